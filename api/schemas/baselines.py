"""Baseline request and response bodies (``/v1/baselines``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from api.schemas._common import ID_PATTERN, PRINTABLE_PATTERN, PositiveFloat

SIGNATURE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]{1,512}$"
"""A signature in a path or cursor: printable, at most 512 characters (``kind|model|device|scale|dtype``)."""

Note = Annotated[str, StringConstraints(min_length=1, max_length=256, strip_whitespace=True, pattern=PRINTABLE_PATTERN)]


class BaselinePin(BaseModel):
    """``PUT /v1/baselines/{signature}``: pin a job's recent window (``job_id``), an explicit ``mfu``, or, with
    neither, the value the signature holds now."""

    model_config = ConfigDict(extra="forbid")

    job_id: Annotated[str, Field(pattern=ID_PATTERN)] | None = None
    mfu: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None
    tokens_per_second_per_gpu: PositiveFloat | None = Field(default=None, description="with mfu: for the record")
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
