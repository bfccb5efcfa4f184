"""Baseline request and response bodies (``/v1/baselines``)."""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mfumon.api.schemas._common import ID_PATTERN, Dtype, Kind, Number, Text, TokensPerSecond, given, null

SIGNATURE_KEY_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]{1,512}$"
"""What a signature is as a key of a list (the ``cursor`` of ``GET /v1/baselines``): 1-512 printable characters."""
SIGNATURE_MAX_LENGTH = 512
_COUNT = "[1-9][0-9]{0,7}"  # a PositiveInt as decimal digits
_LAYOUT = rf"dp\*\.tp{_COUNT}\.pp{_COUNT}\.cp{_COUNT}\.ep{_COUNT}\.mbs{_COUNT}(?:\.ga{_COUNT})?(?:\.seq{_COUNT})?"
SCALE_PATTERN = rf"(?:{_COUNT}|{_LAYOUT})"
"""The scale part: a GPU count, or the per-GPU layout ``mfumon.api.services.baselines.layout_scale`` writes."""
DEVICE_KEY = "[a-z0-9][a-z0-9._-]*"
"""A device key of the peak table (``mfumon.mfu._spec.KEY_PATTERN``)."""


def signature_pattern(device: str = DEVICE_KEY) -> str:
    """``kind|model|device|scale|dtype`` as ``mfumon.api.services.baselines.signature`` writes it; ``device`` narrows
    the device part (``PUT`` takes only the keys of this server's peak table). The model part may hold ``|`` itself:
    the last three parts hold none, so the pattern splits where ``parse_signature`` does."""
    kinds, dtypes = "|".join(get_args(Kind)), "|".join(get_args(Dtype))
    return rf"^(?:{kinds})\|[^\x00-\x1f\x7f-\x9f]+\|(?:{device})\|{SCALE_PATTERN}\|(?:{dtypes})$"


SIGNATURE_PATTERN = signature_pattern()
SIGNATURE_RULE = (
    "kind|model|device|scale|dtype, as a job's `baseline_signature` shows it (URL-encoded): kind training or "
    "inference; model the model's name or shape (it may hold '|'); device a device key of the peak table; scale "
    "the GPU count or the layout dp*.tpT.ppP.cpC.epE.mbsM[.gaG][.seqS]; dtype bf16, fp16, fp8, tf32, fp32, fp4 or "
    "int8. "
    f"At most {SIGNATURE_MAX_LENGTH} characters."
)

Note = Annotated[str, Text(256)]


class BaselinePin(BaseModel):
    """``PUT /v1/baselines/{signature}``: pin a job's recent window (``job_id``), an explicit ``mfu``, or, with
    neither, the value the signature holds now."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {"anyOf": [null("job_id"), null("mfu")]},  # not both
                {"anyOf": [null("tokens_per_second_per_gpu"), given("mfu", mfu="number")]},  # only with mfu
            ]
        },
    )

    job_id: Annotated[str, Field(pattern=ID_PATTERN)] | None = None
    mfu: Annotated[Number, Field(gt=0, le=1)] | None = None
    tokens_per_second_per_gpu: TokensPerSecond | None = Field(default=None, description="with mfu: for the record")
    note: Note | None = Field(default=None, description="why it is pinned (the benchmark, the change it marks)")

    @model_validator(mode="after")
    def _one_source(self) -> BaselinePin:
        if self.job_id is not None and self.mfu is not None:
            raise ValueError("give 'job_id' or 'mfu', not both")
        if self.tokens_per_second_per_gpu is not None and self.mfu is None:
            raise ValueError("'tokens_per_second_per_gpu' goes with 'mfu' (a job's own throughput is taken from it)")
        return self


class BaselinePublic(BaseModel):
    """A workload signature's baseline and where it came from."""

    signature: str
    kind: str
    model: str
    device: str
    scale: str = Field(description="the GPU count, or the per-GPU layout (dp*.tp..) that ignores data parallelism")
    dtype: str
    mfu: float | None = Field(description="null once reset: the next stable window captures a new one")
    tokens_per_second_per_gpu: float | None
    num_gpus: int | None = Field(description="GPUs of the run it was taken from")
    source: str = Field(description="pinned | captured (automatic: first stable window, or raised since) | reset")
    source_job_id: str | None
    captured_at: float
    updated_at: float
    captures: int = Field(description="automatic captures and raises of this signature so far")
    previous_mfu: float | None = Field(description="the value the last capture, raise, pin or reset replaced")
    pinned: bool
    pinned_by: str | None = Field(description="the name of the token that pinned it")
    pinned_at: float | None
    note: str | None
    reset_by: str | None
    reset_at: float | None


class BaselinesPublic(BaseModel):
    data: list[BaselinePublic]
    count: int = Field(description="Baselines in this page.")
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; null on the last page.")
