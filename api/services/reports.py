"""A job report, end to end: store it, compute MFU with the engine, capture a baseline, update the state."""

from __future__ import annotations

from typing import Any

from mfumon.api.accounting import StepSplit
from mfumon.api.context import AppContext
from mfumon.api.core.security import ANONYMOUS, Principal
from mfumon.api.crud import jobs as crud
from mfumon.api.crud.counters import add_to_counters, shard_of
from mfumon.api.db.tables import JobRow
from mfumon.api.errors import InputError
from mfumon.api.schemas.jobs import JobEnd, JobFields, JobReportCreate, JobUpdate, ReportResult
from mfumon.api.services import accounting, baselines, lifecycle, profiles
from mfumon.api.state.outcome import InferenceOutcome, ReportOutcome
from mfumon.api.state.profiles import ProfileFigures
from mfumon.api.state.refresh import apply_baseline_row, job_view
from mfumon.api.state.views import JobShare, NodeView
from mfumon.mfu import MfuResult, ModelShape, ServingWindow, evaluate

PROFILE_FRESH_SECONDS = 3600.0
"""A profile this recent gives the job's comm ratio (it sees every parallelism); an older one leaves it to the
reports' hooks or timers, since the job may have changed since."""


def _ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return min(part / whole, 1.0)


def _authorize(principal: Principal, job_id: str, job: JobRow | None, fields: JobFields) -> str | None:
    """The team the write leaves the job in (ForbiddenError for another team's job); checked under the row lock."""
    return principal.job_team(job_id, fields.team, job.team if job else None, exists=job is not None)


def record_report(
    ctx: AppContext, job_id: str, report: JobReportCreate, principal: Principal = ANONYMOUS
) -> ReportResult:
    """Store one report and return the job's MFU now (or null with the reason)."""
    baselines.check_layout(report)
    now = ctx.clock()
    tokens_per_second = report.rate()
    increments = lifecycle.Increments()
    with ctx.sessions.begin() as session:
        job, created = crud.lock_or_create_job(session=session, job_id=job_id, now=now)
        team = _authorize(principal, job_id, None if created else job, report)
        crud.apply_job_fields(job=job, fields=report)
        job.team = team or job.team
        lifecycle.note_activity(session, job, now, increments, what="report", step=report.step)

        # Exporters' attribution fills in what the report leaves out.
        shares = ctx.state.job_shares(job_id, now)
        attributed = sum(share.gpus for _, share in shares)
        num_gpus = job.num_gpus or attributed or None
        gpu_name = job.gpu_model or (shares[0][1].gpu_name if shares else None)
        mig_profile = None if job.gpu_model else (shares[0][1].mig_profile if shares else None)
        if not job.model:
            raise InputError("model", "model is required: send model.params or model.flops_per_token")
        shape = ModelShape(**{k: v for k, v in job.model.items() if k != "name"})
        serving = _serving_window(job, report)
        result = evaluate(
            kind=job.kind,  # type: ignore[arg-type]
            shape=shape,
            tokens_per_second=tokens_per_second,
            num_gpus=num_gpus or 1,
            device_name=gpu_name,
            dtype=job.dtype,  # type: ignore[arg-type]
            mig_profile=mig_profile,
            peak_flops_per_gpu=job.peak_flops_per_gpu,
            recompute_activations=job.recompute_activations,
            table=ctx.peak_table,
            serving=serving,
            weight_dtype=job.weight_dtype,  # type: ignore[arg-type]
            kv_cache_dtype=job.kv_cache_dtype,  # type: ignore[arg-type]
            peak_memory_bandwidth_per_gpu=job.peak_memory_bandwidth_per_gpu,
        )
        mfu, hfu, reason = result.mfu, result.hfu, result.reason
        inference = None if result.serving is None else result.serving.as_json(shape)
        if inference is not None:
            inference["engine_estimator"] = report.engine_estimator  # whose FLOPs convention engine_mfu follows
        peak_flops_per_second = result.peak_flops_per_second
        if num_gpus is None:
            mfu = hfu = peak_flops_per_second = None
            reason = "num_gpus unknown: report num_gpus, or run exporters that attribute GPUs to this job"
            inference = _without_utilization(inference, reason)
        elif gpu_name is None and job.peak_flops_per_gpu is None:
            reason = "gpu_model unknown: report gpu_model or peak_flops_per_gpu, or run exporters on its nodes"
        elif result.device_key is None and job.peak_flops_per_gpu is None:
            ctx.self_metrics.count_unknown_device(gpu_name or "")

        signature = baselines.signature_of(job, result.device_key, num_gpus)
        comm_ratio = _ratio(report.comm_seconds, report.step_seconds)
        comm_source: str | None = (report.comm_source or "hooks") if comm_ratio is not None else None
        figures = ProfileFigures.from_json(job.profile)
        if figures is not None and now - figures.captured_at <= PROFILE_FRESH_SECONDS:
            comm_ratio, comm_source = figures.exposed_comm_ratio, "profile"  # sees every group, hooks only DP
        data_wait_ratio = _ratio(report.data_wait_seconds, report.step_seconds)
        latest = ReportOutcome(
            tokens_per_second=tokens_per_second,
            mfu=mfu,
            hfu=hfu,
            reason=reason,
            flops_per_token=result.flops_per_token,
            model_flops_per_second=result.model_flops_per_second,
            peak_flops_per_second=peak_flops_per_second,
            peak_flops_per_gpu=result.peak_flops_per_gpu,
            device=result.device_key,
            num_gpus=num_gpus,
            step_seconds=report.step_seconds,
            comm_ratio=comm_ratio,
            comm_source=comm_source,
            data_wait_ratio=data_wait_ratio,
            step=report.step,
            signature=signature,
            # Inference reports with a phase split (mfumon/mfu/_serving.py) and the engine's scheduler state.
            inference=None if inference is None else InferenceOutcome.from_json(inference),
            requests_running=report.requests_running,
            requests_waiting=report.requests_waiting,
            kv_cache_usage=report.kv_cache_usage,
        )
        _bill_report(ctx, job, report, shares, result, mfu, num_gpus, now, increments)
        job.last_report_at = now
        job.reports_received += 1
        job.latest = latest.as_json()
        job.updated_at = now
        crud.add_report(
            session=session,
            job_id=job_id,
            received_at=now,
            values={
                "tokens_per_second": tokens_per_second,
                "num_gpus": num_gpus,
                "mfu": mfu,
                "hfu": hfu,
                "model_flops_per_second": result.model_flops_per_second if mfu is not None else None,
                "comm_ratio": comm_ratio,
                "data_wait_ratio": data_wait_ratio,
                "step_seconds": report.step_seconds,
                "step": report.step,
                "reason": reason,
                "hardware_mfu": _hardware_mfu(shares),
                "profiled_steps": report.profiled_steps or None,
                **_phase_history(inference),
            },
        )
        session.flush()
        profiled = bool(report.profiled_steps)  # the profiler slows those steps: not a workload's baseline
        baseline = None if profiled else baselines.capture(ctx, session, job, result.device_key, num_gpus, mfu, now)
        notice = profiles.notice_for(session, job_id, now)
        counter_rows = add_to_counters(session, increments, shard=shard_of(job_id), now=now)
    ctx.state.apply_job(job_view(job))
    ctx.state.counters.apply(counter_rows)
    if baseline is not None:
        apply_baseline_row(ctx.state, baseline)
    held = ctx.state.baseline(signature) if signature else None
    return ReportResult(
        job_id=job_id,
        mfu=mfu,
        hfu=hfu,
        reason=reason,
        flops_per_token=result.flops_per_token,
        model_flops_per_second=result.model_flops_per_second,
        peak_flops_per_second=peak_flops_per_second,
        peak_flops_per_gpu=result.peak_flops_per_gpu,
        tokens_per_second=tokens_per_second,
        num_gpus=num_gpus,
        gpu_model=gpu_name,
        device=result.device_key,
        dtype=job.dtype,
        comm_ratio=comm_ratio,
        data_wait_ratio=data_wait_ratio,
        step_seconds=report.step_seconds,
        baseline_mfu=held.mfu if held else None,
        baseline_signature=signature,
        mbu=None if inference is None else inference["mbu"],
        engine_mfu=None if inference is None else inference["engine_mfu"],
        inference=inference,
        comm_source=comm_source,
        profile_request=notice,
    )


def _serving_window(job: JobRow, report: JobReportCreate) -> ServingWindow | None:
    """The report's prefill/decode split as the MFU engine takes it; None for reports without one."""
    if not report.has_phases():
        return None
    if job.kind != "inference":
        raise InputError(
            "prefill_tokens", "prefill_tokens and decode_tokens are for inference jobs: send kind 'inference'"
        )
    assert report.interval_seconds is not None
    running = report.requests_running or None  # the batch when the engine gave no mean batch size
    return ServingWindow(
        interval_seconds=report.interval_seconds,
        prefill_tokens=report.prefill_tokens or 0,
        decode_tokens=report.decode_tokens or 0,
        batch_size=report.batch_size if report.batch_size is not None else running,
        context_tokens=report.context_tokens,
        prompt_tokens=report.mean_prompt_tokens,
        prefill_seconds=report.prefill_busy_seconds,
        decode_seconds=report.decode_busy_seconds,
        engine_flops_per_gpu=report.engine_flops_per_gpu,
        engine_bytes_per_gpu=report.engine_bytes_per_gpu,
    )


def _without_utilization(inference: dict[str, Any] | None, reason: str) -> dict[str, Any] | None:
    """Keep the throughput of an inference report whose GPU count is unknown, but none of its ratios."""
    if inference is None:
        return None
    phases = {name: {**values, "mfu": None, "active_mfu": None} for name, values in inference["phases"].items()}
    engine = {"engine_flops_per_second": None, "engine_mfu": None, "engine_memory_bytes_per_second": None}
    return {**inference, **engine, "phases": phases, "mfu": None, "mbu": None, "mbu_reason": reason, "engine_mbu": None}


def _phase_history(inference: dict[str, Any] | None) -> dict[str, float | None]:
    """The report-history columns of an inference report's phases and MBU."""
    if inference is None:
        return {}
    prefill, decode = inference["phases"]["prefill"], inference["phases"]["decode"]
    return {
        "mbu": inference["mbu"],
        "prefill_tokens_per_second": prefill["tokens_per_second"],
        "decode_tokens_per_second": decode["tokens_per_second"],
        "prefill_mfu": prefill["mfu"],
        "decode_mfu": decode["mfu"],
    }


def _hardware_mfu(shares: list[tuple[NodeView, JobShare]]) -> float | None:
    """The job's hardware estimate now: the mean over its GPUs that report tensor activity, as the job's account
    (:class:`mfumon.api.state.aggregate.JobAccount`) sums it."""
    estimated = sum(share.estimated for _, share in shares)
    return sum(share.estimate_sum for _, share in shares) / estimated if estimated else None


def allocated_gpus(num_gpus: int | None, shares: list[JobShare]) -> float:
    """GPU-equivalents the waterfall bills for a tile: the job's GPUs, each shared one counted at the job's share
    of it (so two jobs on one GPU are billed one GPU-second per second between them, not two)."""
    if not num_gpus:
        return 0.0
    shared = sum(share.shared for share in shares)
    held = sum(share.gpu_share - share.count for share in shares)  # its share of the shared GPUs
    return max(0.0, num_gpus - shared + held)


def _bill_report(
    ctx: AppContext,
    job: JobRow,
    report: JobReportCreate,
    shares: list[tuple[NodeView, JobShare]],
    result: MfuResult,
    mfu: float | None,
    num_gpus: int | None,
    now: float,
    increments: lifecycle.Increments,
) -> None:
    """Close the job's waterfall tile with this report and add it to the pool, team and cluster counters.

    The pool is that of the nodes exporters attribute the job's GPUs to (the first by name; the job's own pool when
    those nodes are in it, as a scheduler's overlapping partitions make them), else the job's label.
    """
    pools_of = ctx.state.pools(now).of
    pools = sorted({pool for node, _ in shares for pool in pools_of(node)})
    pool = job.pool if job.pool in pools else (pools[0] if pools else job.pool)
    job.accounting = {**(job.accounting or {}), "pool": pool}
    ledger = accounting.ledger_of(job)
    known = mfu is not None
    bill = ledger.report(
        now,
        gpus=allocated_gpus(num_gpus, [share for _, share in shares]),
        covered_seconds=report.interval_seconds,
        stalled=report.rate() == 0,
        split=StepSplit(
            step_seconds=report.step_seconds,
            data_wait_seconds=report.data_wait_seconds,
            comm_seconds=report.comm_seconds,
            bubble_seconds=report.bubble_seconds,
        ),
        model_flops_per_second=result.model_flops_per_second if known else None,
        peak_flops_per_gpu=result.peak_flops_per_gpu if known else None,
        mfu=mfu,
        max_gap_seconds=ctx.settings.JOB_TTL_SECONDS,
    )
    accounting.bill_job(job, ledger, bill, increments)


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
