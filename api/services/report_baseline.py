"""The report against its workload's baseline: captured or raised from the job's latest window, then read back."""

from __future__ import annotations

from sqlalchemy.orm import Session

from mfumon.api.context import AppContext
from mfumon.api.db.tables import BaselineRow, JobRow
from mfumon.api.services import baselines
from mfumon.api.services.report_evaluation import ReportEvaluation
from mfumon.api.state.refresh import apply_baseline_row


def capture_baseline(
    ctx: AppContext, session: Session, job: JobRow, evaluation: ReportEvaluation
) -> BaselineRow | None:
    """The baseline row this report captured or raised (after the report is stored and flushed), or None; never
    from profiled steps, which the profiler slows."""
    if evaluation.profiled:
        return None
    outcome = evaluation.outcome
    return baselines.capture(ctx, session, job, outcome.device, outcome.num_gpus, outcome.mfu, evaluation.now)


def held_baseline(ctx: AppContext, evaluation: ReportEvaluation, captured: BaselineRow | None) -> float | None:
    """The baseline MFU the state holds for the report's signature, once the captured row (if any) is applied."""
    if captured is not None:
        apply_baseline_row(ctx.state, captured)
    signature = evaluation.outcome.signature
    held = ctx.state.baseline(signature) if signature else None
    return held.mfu if held else None
