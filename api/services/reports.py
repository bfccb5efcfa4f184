"""A job's writes. A report, end to end: the job row locked and updated, the report evaluated once
(:mod:`~mfumon.api.services.report_evaluation`), then each step takes that one evaluation: bill
(:mod:`~mfumon.api.services.report_billing`), persist (:mod:`~mfumon.api.services.report_persist`), baseline
(:mod:`~mfumon.api.services.report_baseline`), and the answer (:func:`report_result`). Also a job's metadata and its
end."""

from __future__ import annotations

import logging
from dataclasses import replace

from mfumon.api.context import AppContext
from mfumon.api.core.security import ANONYMOUS, Principal
from mfumon.api.crud import jobs as crud
from mfumon.api.crud.counters import add_to_counters, shard_of
from mfumon.api.db.tables import JobRow
from mfumon.api.schemas.jobs import JobEnd, JobFields, JobReportCreate, JobUpdate, ReportResult
from mfumon.api.schemas.profiles import ProfileRequestNotice
from mfumon.api.services import baselines, lifecycle, profiles
from mfumon.api.services.report_baseline import capture_baseline, held_baseline
from mfumon.api.services.report_billing import allocated_gpus, bill_report
from mfumon.api.services.report_evaluation import PROFILE_FRESH_SECONDS, ReportEvaluation, evaluate_report
from mfumon.api.services.report_persist import persist_report
from mfumon.api.services.report_serving import serving_report, serving_tile
from mfumon.api.state.refresh import job_view
from mfumon.api.state.software import new_node_software

__all__ = [
    "PROFILE_FRESH_SECONDS",
    "ReportEvaluation",
    "allocated_gpus",
    "end_job",
    "record_report",
    "report_result",
    "update_job",
]

logger = logging.getLogger(__name__)


def record_report(
    ctx: AppContext, job_id: str, report: JobReportCreate, principal: Principal = ANONYMOUS
) -> ReportResult:
    """Store one report and return the job's MFU now (or null with the reason)."""
    baselines.check_layout(report)
    now = ctx.clock()
    increments = lifecycle.Increments()
    with ctx.sessions.begin() as session:
        job, created = crud.lock_or_create_job(session=session, job_id=job_id, now=now)
        team = _authorize(principal, job_id, None if created else job, report)
        crud.apply_job_fields(job=job, fields=report)
        _remember_node_software(ctx, job, now)
        job.team = team or job.team
        lifecycle.note_activity(session, job, now, increments, what="report", step=report.step)
        evaluation = evaluate_report(ctx, job, report, now)
        if evaluation.unknown_device:
            ctx.self_metrics.count_unknown_device(evaluation.gpu_model or "")
        serving = serving_report(ctx, session, job, report, evaluation.outcome, now)
        if serving is not None:
            evaluation = replace(evaluation, outcome=replace(evaluation.outcome, serving=serving.outcome()))
        tile = serving.tile if serving is not None else serving_tile(job, report, evaluation.outcome)
        bill_report(ctx, job, evaluation, increments, tile)
        persist_report(session, job, evaluation, serving.figures if serving else None)
        session.flush()
        captured = capture_baseline(ctx, session, job, evaluation)
        notice = profiles.notice_for(session, job_id, now)
        counter_rows = add_to_counters(session, increments, shard=shard_of(job_id), now=now)
    ctx.state.apply_job(job_view(job))
    ctx.state.counters.apply(counter_rows)
    return report_result(evaluation, held_baseline(ctx, evaluation, captured), notice)


def _remember_node_software(ctx: AppContext, job: JobRow, now: float) -> None:
    """Store the driver and firmware the job's nodes report into its software where it holds none yet
    (:mod:`mfumon.api.state.software`), so the regressions comparison sees them once the job has ended; nothing is
    written when nothing is new. Best effort: it can never fail the report."""
    try:
        software = new_node_software(job.software, (node for node, _share in ctx.state.job_shares(job.job_id, now)))
        if software is not None:
            job.software = software
    except Exception:
        logger.exception(
            "adding the node-reported software to job %s failed; the report is stored without it", job.job_id
        )


def report_result(
    evaluation: ReportEvaluation, baseline_mfu: float | None, notice: ProfileRequestNotice | None
) -> ReportResult:
    """The answer to a report: its evaluation, the baseline held for its signature, a profile asked of the job."""
    outcome = evaluation.outcome
    return ReportResult(
        job_id=evaluation.job_id,
        mfu=outcome.mfu,
        hfu=outcome.hfu,
        reason=outcome.reason,
        flops_per_token=outcome.flops_per_token,
        model_flops_per_second=outcome.model_flops_per_second,
        peak_flops_per_second=outcome.peak_flops_per_second,
        peak_flops_per_gpu=outcome.peak_flops_per_gpu,
        tokens_per_second=evaluation.tokens_per_second,
        num_gpus=outcome.num_gpus,
        gpu_model=evaluation.gpu_model,
        device=outcome.device,
        dtype=evaluation.dtype,
        comm_ratio=outcome.comm_ratio,
        data_wait_ratio=outcome.data_wait_ratio,
        step_seconds=outcome.step_seconds,
        baseline_mfu=baseline_mfu,
        baseline_signature=outcome.signature,
        mbu=outcome.mbu,
        engine_mfu=outcome.engine_mfu,
        inference=evaluation.inference,
        comm_source=outcome.comm_source,
        profile_request=notice,
    )


def _authorize(principal: Principal, job_id: str, job: JobRow | None, fields: JobFields) -> str | None:
    """The team the write leaves the job in (ForbiddenError for another team's job); checked under the row lock."""
    return principal.job_team(job_id, fields.team, job.team if job else None, exists=job is not None)


def update_job(ctx: AppContext, job_id: str, update: JobUpdate, principal: Principal = ANONYMOUS) -> JobRow:
    """Register or update a job's metadata; a new job stays pending until it reports."""
    baselines.check_layout(update)
    now = ctx.clock()
    with ctx.sessions.begin() as session:
        job, created = crud.lock_or_create_job(session=session, job_id=job_id, now=now)
        team = _authorize(principal, job_id, None if created else job, update)
        crud.apply_job_fields(job=job, fields=update)
        job.team = team or job.team
        job.updated_at = now
    ctx.state.apply_job(job_view(job))
    return job


def end_job(ctx: AppContext, job_id: str, end: JobEnd, principal: Principal = ANONYMOUS) -> JobRow | None:
    """Mark a job ended; its series leave ``/metrics`` at once. Returns None for an unknown job.

    Ending an ended job changes nothing (a retried request must not count the end twice).
    """
    now = ctx.clock()
    increments = lifecycle.Increments()
    with ctx.sessions.begin() as session:
        job = crud.read_job(session=session, job_id=job_id, for_update=True)
        if job is None:
            return None
        principal.job_team(job_id, None, job.team, exists=True)
        if job.status == "ended":
            return job
        lifecycle.end(job, now, increments, exit_code=end.exit_code)
        job.updated_at = now
        rows = add_to_counters(session, increments, shard=shard_of(job_id), now=now)
    ctx.state.apply_job(job_view(job))
    ctx.state.counters.apply(rows)
    return job
