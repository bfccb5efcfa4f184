"""Workload baselines: which runs compare with which (the signature), how a baseline is captured and raised, and
how people pin and reset one.

**Signature** ``kind|model|device|scale|dtype``: runs with equal signatures should reach the same MFU.

- ``model`` is the model's name, else its shape; ``device`` the peak table's key (``h100-sxm``).
- ``scale`` is the GPU count (``8``), unless a training job reports its ``parallelism``: then it is the per-GPU
  layout, ``dp*.tp8.pp4.cp1.ep1.mbs2[.ga16][.seq4096]`` (any data-parallel degree; tensor, pipeline, context and
  expert parallel sizes; micro-batch per model replica; gradient accumulation and sequence length when known). Each
  GPU then holds the same shard of the model and runs the same micro-batches whatever the data-parallel degree, so
  a run on 64 GPUs compares with one on 512. What the rule cannot see: the gradient all-reduce grows (slowly) with
  the data-parallel degree and crosses a slower network once it leaves a node, so at scale expect a few points
  below a small run's baseline; a job without a layout keeps its exact GPU count, since nothing says how the extra
  GPUs are used.

**Capture**: a signature with no baseline (never captured, or reset) takes the median MFU of a job's first window
of ``BASELINE_WINDOW_REPORTS`` reports after ``BASELINE_WARMUP_REPORTS`` whose spread is within
``BASELINE_MAX_RELATIVE_SPREAD`` (every report of it on the same GPU count, all with an MFU).

**Raise** (the way out of a slow first run): an unpinned baseline is replaced by a later stable window when every
value of that window beats it by ``BASELINE_RAISE_MARGIN``. A baseline only rises on its own; it comes down by a
reset (``DELETE``), after which the next stable window captures afresh.

**Pin**: ``PUT /v1/baselines/{signature}`` fixes a value (a job's recent window, an explicit MFU, or the value held
now) with who (the token's name), when and why; no capture or raise replaces a pin, only another pin or a reset.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, get_args

from sqlalchemy.orm import Session

from mfumon.api.context import AppContext
from mfumon.api.core.security import ANONYMOUS, Principal
from mfumon.api.crud import baselines as crud
from mfumon.api.crud import jobs as job_crud
from mfumon.api.db.tables import BaselineRow, JobReportRow, JobRow
from mfumon.api.errors import ConflictError, InputError, NotFoundError
from mfumon.api.schemas._common import Dtype, Kind
from mfumon.api.schemas.baselines import SCALE_PATTERN, BaselinePin
from mfumon.api.schemas.jobs import JobFields
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.refresh import apply_baseline_row, model_key

LAYOUT_PREFIX = "dp*"


@dataclass(frozen=True, slots=True)
class SignatureParts:
    kind: str
    model: str
    device: str
    scale: str
    dtype: str

    @property
    def num_gpus(self) -> int | None:
        """The GPU count a count signature names; None for a layout signature."""
        return int(self.scale) if self.scale.isdecimal() and self.scale.isascii() else None


def signature(kind: str, model: str, device: str, scale: str, dtype: str) -> str:
    return f"{kind}|{model}|{device}|{scale}|{dtype}"


def layout_scale(parallelism: dict[str, int], seq_len: int | None) -> str:
    """The scale part of a layout signature: every size that sets one GPU's work, the data-parallel degree not."""
    p = parallelism
    parts = [LAYOUT_PREFIX, f"tp{p.get('tensor', 1)}", f"pp{p.get('pipeline', 1)}", f"cp{p.get('context', 1)}"]
    parts += [f"ep{p.get('expert', 1)}", f"mbs{p['micro_batch_size']}"]
    if p.get("gradient_accumulation"):
        parts.append(f"ga{p['gradient_accumulation']}")
    if seq_len:
        parts.append(f"seq{seq_len}")
    return ".".join(parts)


def scale_of(job: JobRow, num_gpus: int) -> str:
    """The GPU count, or the per-GPU layout of a training job whose GPU count fits its layout."""
    layout = job.parallelism
    if job.kind == "training" and layout and "micro_batch_size" in layout:
        model_parallel = layout.get("tensor", 1) * layout.get("pipeline", 1) * layout.get("context", 1)
        if num_gpus % model_parallel == 0:
            return layout_scale(layout, (job.model or {}).get("seq_len"))
    return str(num_gpus)


def signature_of(job: JobRow, device: str | None, num_gpus: int | None) -> str | None:
    """The job's workload signature, or None while model, device or GPU count is unknown."""
    model = model_key(job.model)
    if model is None or device is None or not num_gpus:
        return None
    return signature(job.kind, model, device, scale_of(job, num_gpus), job.dtype)


def check_layout(fields: JobFields) -> None:
    """422 naming ``parallelism`` for a body whose GPU count is no multiple of the layout it sends with it."""
    if fields.parallelism is None or fields.num_gpus is None:
        return
    size = fields.parallelism.model_parallel_size()
    if fields.num_gpus % size:
        raise InputError(
            "parallelism",
            f"num_gpus ({fields.num_gpus}) is not a multiple of tensor x pipeline x context ({size})",
        )


def parse_signature(ctx: AppContext, text: str) -> SignatureParts:
    """The parts of a signature a person typed, checked as far as a capture would make them (422 otherwise)."""
    head, _, rest = text.partition("|")
    parts = [head, *rest.rsplit("|", 3)]  # a model name may itself hold a '|'
    if len(parts) != 5 or not all(parts):
        example = "training|llama-8b|h100-sxm|8|bf16"
        raise InputError("signature", f"a signature is kind|model|device|scale|dtype, e.g. {example}")
    kind, model, device, scale, dtype = parts
    if kind not in get_args(Kind):
        raise InputError("signature", f"kind {kind!r} is not one of {', '.join(get_args(Kind))}")
    if dtype not in get_args(Dtype):
        raise InputError("signature", f"dtype {dtype!r} is not one of {', '.join(get_args(Dtype))}")
    spec = ctx.peak_table.get(device)
    if spec is None or spec.key != device:
        raise InputError("signature", f"device {device!r} is not a device key of the peak table (e.g. h100-sxm)")
    if not re.fullmatch(SCALE_PATTERN, scale):
        layout = f"{LAYOUT_PREFIX}.tpT.ppP.cpC.epE.mbsM[.gaG][.seqS]"
        raise InputError("signature", f"scale {scale!r} is neither a GPU count nor a layout ({layout})")
    return SignatureParts(kind, model, device, scale, dtype)


def _window(reports: Sequence[JobReportRow], num_gpus: int | None) -> list[JobReportRow]:
    """The reports of a window that can make a baseline: an MFU each, all on the job's current GPU count, none slowed
    by the profiler."""
    return [
        r
        for r in reports
        if r.mfu is not None and (num_gpus is None or r.num_gpus == num_gpus) and not r.profiled_steps
    ]


def _per_gpu(reports: Sequence[JobReportRow]) -> float | None:
    rates = [r.tokens_per_second / r.num_gpus for r in reports if r.num_gpus]
    return statistics.median(rates) if rates else None


def capture(
    ctx: AppContext,
    session: Session,
    job: JobRow,
    device: str | None,
    num_gpus: int | None,
    mfu: float | None,
    now: float,
) -> BaselineRow | None:
    """Capture or raise the baseline of the job's signature from its latest window; the stored row, or None.

    Cheap on the hot path: a report that cannot change the baseline the state holds reads nothing.
    """
    settings = ctx.settings
    key = signature_of(job, device, num_gpus)
    if mfu is None or key is None or device is None:
        return None
    margin = settings.BASELINE_RAISE_MARGIN
    held = ctx.state.baseline(key)
    if held is not None and (held.pinned or mfu < held.mfu * (1.0 + margin)):
        return None
    size = settings.BASELINE_WINDOW_REPORTS
    if job.reports_received < settings.BASELINE_WARMUP_REPORTS + size:
        return None
    recent = job_crud.read_history(session=session, job_id=job.job_id, limit=size)
    window = _window(recent, num_gpus)
    if len(window) < size:
        return None
    values = [float(r.mfu) for r in window if r.mfu is not None]
    mean = statistics.fmean(values)
    if mean <= 0 or (max(values) - min(values)) / mean > settings.BASELINE_MAX_RELATIVE_SPREAD:
        return None
    row = {
        "signature": key,
        "kind": job.kind,
        "model_key": model_key(job.model) or "",
        "gpu_model": device,
        "num_gpus": num_gpus,
        "dtype": job.dtype,
        "mfu": statistics.median(values),
        "tokens_per_second_per_gpu": _per_gpu(window),
        "source_job_id": job.job_id,
        "captured_at": now,
        "updated_at": now,
    }
    return crud.capture(session=session, row=row, raise_margin=margin, window_min=min(values))


def _from_job(ctx: AppContext, session: Session, key: str, job_id: str) -> dict[str, Any]:
    """The measured columns of a pin from a job: the median of its recent reports under this signature."""
    job = job_crud.read_job(session=session, job_id=job_id)
    if job is None:
        raise NotFoundError(f"job {job_id!r} not found")
    latest = ReportOutcome.from_json(job.latest) or ReportOutcome()
    if latest.signature != key:
        runs = f"runs {latest.signature!r}" if latest.signature else "has no signature yet"
        raise ConflictError(f"job {job_id!r} {runs}, not {key!r}")
    num_gpus = latest.num_gpus
    reports = _window(
        job_crud.read_history(session=session, job_id=job_id, limit=ctx.settings.BASELINE_WINDOW_REPORTS), num_gpus
    )
    if reports:
        mfu = statistics.median(float(r.mfu) for r in reports if r.mfu is not None)
        per_gpu = _per_gpu(reports)
    elif latest.mfu is not None:  # history pruned (an old job): its last report
        per_gpu = latest.tokens_per_second / num_gpus if num_gpus and latest.tokens_per_second is not None else None
        mfu = latest.mfu
    else:
        raise InputError("job_id", f"job {job_id!r} has no report with an MFU to pin")
    return {"mfu": mfu, "tokens_per_second_per_gpu": per_gpu, "num_gpus": num_gpus, "source_job_id": job_id}


def pin(ctx: AppContext, key: str, body: BaselinePin, principal: Principal = ANONYMOUS) -> BaselineRow:
    """Pin a signature's baseline: from a job, to an explicit MFU, or (empty body) the value it holds now.

    Raises NotFoundError (404: no such job, or nothing held to pin), ConflictError (409) or InputError (422).
    """
    parts = parse_signature(ctx, key)
    now = ctx.clock()
    who = {"pinned_by": principal.name, "pinned_at": now, "note": body.note, "updated_at": now}
    with ctx.sessions.begin() as session:
        if body.job_id is None and body.mfu is None:
            row = crud.pin_current(session=session, signature=key, values=who)
            if row is None:
                raise NotFoundError(f"no baseline for {key!r}: pin one with job_id or mfu")
        else:
            if body.job_id is not None:
                measured = _from_job(ctx, session, key, body.job_id)
            else:
                measured = {
                    "mfu": body.mfu,
                    "tokens_per_second_per_gpu": body.tokens_per_second_per_gpu,
                    "num_gpus": parts.num_gpus,
                    "source_job_id": None,
                }
            row = crud.pin(
                session=session,
                row={
                    "signature": key,
                    "kind": parts.kind,
                    "model_key": parts.model,
                    "gpu_model": parts.device,
                    "dtype": parts.dtype,
                    "captured_at": now,
                    **measured,
                    **who,
                },
            )
    apply_baseline_row(ctx.state, row)
    return row


def reset(ctx: AppContext, key: str, principal: Principal = ANONYMOUS) -> BaselineRow | None:
    """Reset a signature's baseline (pinned or not); None when it holds none. The next stable window captures."""
    now = ctx.clock()
    with ctx.sessions.begin() as session:
        row = crud.reset(session=session, signature=key, reset_by=principal.name, now=now)
    if row is not None:
        apply_baseline_row(ctx.state, row)
    return row


def read_baselines(
    ctx: AppContext, *, limit: int, after: str | None, pinned: bool | None, include_reset: bool
) -> Sequence[BaselineRow]:
    """Baselines in signature order after the cursor ``after``; ``pinned`` keeps only pinned (or only captured)."""
    with ctx.sessions() as session:
        return crud.read_baselines(
            session=session, limit=limit, after=after, pinned=pinned, include_reset=include_reset
        )


def read_baseline(ctx: AppContext, key: str) -> BaselineRow:
    """One signature's baseline, a reset one too; :class:`NotFoundError` when there is none."""
    with ctx.sessions() as session:
        row = crud.read_baseline(session=session, signature=key, include_reset=True)
    if row is None:
        raise NotFoundError(f"no baseline for {key!r}")
    return row
