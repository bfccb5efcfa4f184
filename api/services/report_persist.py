"""The report stored: the job row's newest outcome and counts, and one row of the job's report history."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mfumon.api.crud import jobs as crud
from mfumon.api.db.tables import JobRow
from mfumon.api.services.report_evaluation import ReportEvaluation
from mfumon.api.serving import ServingFigures


def persist_report(
    session: Session, job: JobRow, evaluation: ReportEvaluation, serving: ServingFigures | None = None
) -> None:
    """Write the evaluated report: the job's ``latest`` record and counts, and its history row (with a serving
    report's request figures)."""
    now = evaluation.now
    job.last_report_at = now
    job.reports_received += 1
    job.latest = evaluation.outcome.as_json()
    job.updated_at = now
    values = history_row(evaluation)
    if serving is not None:
        values["serving"] = serving.as_json()
    crud.add_report(session=session, job_id=evaluation.job_id, received_at=now, values=values)


def history_row(evaluation: ReportEvaluation) -> dict[str, Any]:
    """The report-history columns (``job_reports``) of an evaluated report."""
    outcome = evaluation.outcome
    known = outcome.mfu is not None
    return {
        "tokens_per_second": outcome.tokens_per_second,
        "num_gpus": outcome.num_gpus,
        "mfu": outcome.mfu,
        "hfu": outcome.hfu,
        "model_flops_per_second": outcome.model_flops_per_second if known else None,
        "comm_ratio": outcome.comm_ratio,
        "data_wait_ratio": outcome.data_wait_ratio,
        "step_seconds": outcome.step_seconds,
        "step": outcome.step,
        "reason": outcome.reason,
        "hardware_mfu": evaluation.hardware_mfu,
        "profiled_steps": evaluation.profiled_steps or None,
        **_phase_history(evaluation),
    }


def _phase_history(evaluation: ReportEvaluation) -> dict[str, float | None]:
    """The report-history columns of an inference report's phases and MBU."""
    inference = evaluation.outcome.inference
    if inference is None:
        return {}
    prefill, decode = inference.phase("prefill"), inference.phase("decode")
    return {
        "mbu": inference.mbu,
        "prefill_tokens_per_second": prefill.tokens_per_second,
        "decode_tokens_per_second": decode.tokens_per_second,
        "prefill_mfu": prefill.mfu,
        "decode_mfu": decode.mfu,
    }
