"""One job's diagnosis: its facts gathered from its row (the waterfall, or the summary of an ended job), its events,
the state (its GPUs' counters and health, its hardware MFU) and its baseline, then the rules of
:mod:`mfumon.api.diagnosis` run over them. A job id no job was registered under, but that exporters attribute GPUs
to, is diagnosed from those GPUs alone; an empty diagnosis comes with the reason."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mfumon.api.accounting import CATEGORIES, Ledger
from mfumon.api.context import AppContext
from mfumon.api.crud import events as event_crud
from mfumon.api.crud import jobs as crud
from mfumon.api.db.tables import JobRow
from mfumon.api.diagnosis import Finding, GpuFacts, JobFacts, diagnose
from mfumon.api.diagnosis.facts import (
    CollectiveNodeFact,
    EngineEstimateFacts,
    RegressionFact,
    ServingFacts,
    ServingIntervalFacts,
)
from mfumon.api.regressions.analysis import Change
from mfumon.api.serving import WINDOW_SECONDS, ServingFigures, resolve_targets, serving_waterfall, window_of
from mfumon.api.state.aggregate import JobAccount, summarize
from mfumon.api.state.collective_ranks import JobRanks, nvlink_of, port_bandwidth
from mfumon.api.state.collectives import node_groups
from mfumon.api.state.health import THROTTLING
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.profiles import ProfileFigures
from mfumon.api.state.views import NodeView
from mfumon.mfu import check_accounting


def _gpu_seconds(job: JobRow, ledger: Ledger) -> dict[str, float]:
    """The waterfall: the summary frozen at the end for an ended job, else the live ledger."""
    summary = job.summary if job.status == "ended" else None
    if summary and summary.get("waterfall"):
        return {row["category"]: float(row["gpu_seconds"]) for row in summary["waterfall"]}
    return {c: ledger.gpu_seconds.get(c, 0.0) for c in CATEGORIES}


def collective_facts(nodes: Iterable[NodeView], job_id: str) -> tuple[CollectiveNodeFact, ...]:
    """Each of the job's nodes per process group, over its agent's last NCCL Inspector interval (issue 61)."""
    out = []
    for node in nodes:
        groups = node_groups(node, {job_id})
        ports = port_bandwidth(node)
        for (_job, group), window in sorted(groups.items()):
            out.append(
                CollectiveNodeFact(
                    node=node.name,
                    group=group,
                    bus_bandwidth=window.bus_bandwidth,
                    time_ratio=window.time_ratio,
                    crosses_nodes=window.n_ranks > window.ranks,
                    expected=ports / window.ranks if ports and window.ranks > 0 else None,
                )
            )
    return tuple(out)


def _gpus(ctx: AppContext, job_id: str, now: float) -> tuple[GpuFacts, ...]:
    out: list[GpuFacts] = []
    for node, _share in ctx.state.job_shares(job_id, now):
        health = node.health
        node_failing = tuple(n for n, ok in health.node_checks.items() if not ok) if health else ()
        for gpu in node.gpus:
            if gpu.job_id != job_id or not gpu.up:
                continue
            c: dict[str, Any] = gpu.counters
            out.append(
                GpuFacts(
                    node=node.name,
                    index=gpu.index,
                    uuid=gpu.uuid,
                    utilization=c.get("utilization"),
                    sm_active=c.get("sm_active"),
                    tensor_active=c.get("tensor_active"),
                    sm_clock_hz=c.get("sm_clock_hz"),
                    max_sm_clock_hz=c.get("max_sm_clock_hz"),
                    power_watts=c.get("power_watts"),
                    throttle_reasons=tuple(sorted(THROTTLING & set(c.get("throttle_reasons") or ()))),
                    failing=tuple(health.failing(gpu.uuid)) if health else (),
                    node_failing=node_failing,
                )
            )
    return tuple(out)


def _hardware_only(ctx: AppContext, job_id: str, now: float) -> JobFacts | None:
    """A job id with no job row that exporters attribute GPUs to: what its counters show; None if none do."""
    account = summarize(ctx.state.snapshot(now)).jobs.get(job_id)
    if account is None or not account.gpus_attributed:
        return None
    return JobFacts(
        job_id=job_id,
        status=account.status,
        gpu_seconds={c: 0.0 for c in CATEGORIES},
        hardware_mfu=account.hardware_mfu,
        tensor_spread=account.tensor_active_spread,
        gpus=_gpus(ctx, job_id, now),
        reports_received=0,
    )


def _engine_estimate(job: JobRow, latest: ReportOutcome) -> EngineEstimateFacts | None:
    """Our serving FLOP/s and the engine's own over the last interval, when the engine exports an estimate."""
    inference = latest.inference
    if job.kind != "inference" or inference is None or latest.model_flops_per_second is None:
        return None
    if inference.engine_flops_per_second is None:
        return None
    model = job.model or {}
    convention = "2N"
    if model.get("flops_per_token") is not None:
        convention = "override"
    elif inference.context_tokens is not None and all(
        model.get(k) is not None for k in ("layers", "heads", "head_dim")
    ):
        convention = "2N+attention"
    return EngineEstimateFacts(
        ours_flops_per_second=latest.model_flops_per_second,
        engine_flops_per_second=inference.engine_flops_per_second,
        engine=inference.engine_estimator,
        ours_mfu=latest.mfu,
        engine_mfu=inference.engine_mfu,
        ours_convention=convention,
    )


def _interval(figures: ServingFigures) -> ServingIntervalFacts:
    return ServingIntervalFacts(
        at=figures.at,
        prefill_tokens_per_second=figures.prefill_tokens_per_second,
        decode_tokens_per_second=figures.decode_tokens_per_second,
        mean_prompt_tokens=figures.mean_prompt_tokens,
        tpot_p90_seconds=figures.percentile("tpot_p90"),
        itl_p99_seconds=figures.percentile("itl_p99"),
        ttft_p90_seconds=figures.percentile("ttft_p90"),
        requests_running=figures.requests_running,
        requests_waiting=figures.requests_waiting,
        kv_cache_usage=figures.kv_cache_usage,
        preemptions=figures.preemptions,
        batch_size=figures.batch_size,
    )


def _p90(figures: tuple[ServingFigures, ...], measure: str) -> float | None:
    """The window's typical interval percentile: the median of the intervals' (no row keeps the buckets)."""
    values = sorted(v for f in figures if (v := f.percentile(measure)) is not None)
    return values[len(values) // 2] if values else None


def _serving(ctx: AppContext, job: JobRow, rows: list[dict[str, Any]], ledger: Ledger) -> ServingFacts | None:
    """A serving job over the goodput window, from its reports' figures; None for training jobs."""
    if job.kind != "inference":
        return None
    pool = (job.accounting or {}).get("pool") or job.pool
    targets = resolve_targets(job.slo, pool, ctx.settings)
    window = window_of((ServingFigures.from_json(row) for row in rows), targets, WINDOW_SECONDS)
    good = window.goodput
    seconds = good.window_seconds
    finished = window.total("requests_finished")
    latest = window.latest
    return ServingFacts(
        engine=latest.engine if latest else None,
        window_seconds=seconds,
        gpus=ledger.gpus,
        requests_per_second=None if finished is None or seconds <= 0 else finished / seconds,
        batch_size=window.mean("batch_size"),
        requests_running=window.mean("requests_running"),
        requests_waiting=window.mean("requests_waiting"),
        kv_cache_usage=window.mean("kv_cache_usage"),
        max_kv_cache_usage=window.maximum("kv_cache_usage"),
        preemptions=window.total("preemptions"),
        mbu=window.mean("mbu"),
        prefill_mfu=window.mean("prefill_mfu"),
        decode_mfu=window.mean("decode_mfu"),
        ttft_target_seconds=targets.ttft_seconds,
        tpot_target_seconds=targets.tpot_seconds,
        objective_ratio=targets.objective_ratio,
        ttft_met=good.ttft_met,
        tpot_met=good.tpot_met,
        goodput=None if good.lower is None or good.upper is None else (good.lower, good.upper),
        goodput_reason=good.reason,
        ttft_p90_seconds=_p90(window.figures, "ttft_p90"),
        tpot_p90_seconds=_p90(window.figures, "tpot_p90"),
        itl_p99_seconds=_p90(window.figures, "itl_p99"),
        intervals=tuple(_interval(f) for f in window.figures),
        waterfall=dict(serving_waterfall(ledger.total_gpu_seconds, ledger.serving_gpu_seconds)),
    )


def job_facts(ctx: AppContext, job_id: str) -> JobFacts | None:
    """Everything the rules look at for ``job_id``; None for an unknown job."""
    now = ctx.clock()
    with ctx.sessions() as session:
        job = crud.read_job(session=session, job_id=job_id)
        if job is None:
            return _hardware_only(ctx, job_id, now)
        stats = event_crud.event_stats(session=session, job_id=job_id)
        rows = (
            crud.read_serving_since(session=session, job_id=job_id, since=(job.last_report_at or 0) - WINDOW_SECONDS)
            if job.kind == "inference"
            else []
        )
    ledger = Ledger.from_json(job.accounting)
    latest = ReportOutcome.from_json(job.latest) or ReportOutcome()
    running = job.status != "ended"
    account: JobAccount | None = summarize(ctx.state.snapshot(now)).jobs.get(job_id) if running else None
    signature = latest.signature
    baseline = ctx.state.baseline(signature) if signature else None
    mfu = latest.mfu
    verdict = message = None
    if account is not None and account.reporting:
        check = check_accounting(
            account.mfu, account.hardware_mfu, dtype=job.dtype, recompute=job.recompute_activations
        )
        verdict, message = check.verdict, check.message
    nodes = [node for node, _ in ctx.state.job_shares(job_id, now)] if running else []
    ranks = JobRanks(nodes, job_id)
    exit_codes = stats.exit_codes
    if job.exit_code not in (None, 0) and (not exit_codes or exit_codes[-1] != job.exit_code):
        exit_codes = (*exit_codes, job.exit_code)
    return JobFacts(
        job_id=job.job_id,
        kind=job.kind,
        status=job.status,
        dtype=job.dtype,
        gpu_seconds=_gpu_seconds(job, ledger),
        compute_mfu=ledger.compute_mfu,
        lifetime_mfu=ledger.lifetime_mfu,
        mfu=mfu,
        baseline_mfu=baseline.mfu if baseline else None,
        signature=signature,
        regressions=regression_facts(ctx.state.regressions, job.job_id),
        collectives=collective_facts(nodes, job_id),
        waited_ranks=tuple(ranks.waited()),
        links=tuple(ranks.links(nvlink_of(ctx.peak_table))),
        links_unmapped=ranks.unmapped,
        hardware_mfu=account.hardware_mfu if account else None,
        accounting_verdict=verdict,
        accounting_message=message,
        agreement=account.agreement if account else None,
        restarts=job.restarts or 0,
        failures=job.failures or 0,
        exit_codes=exit_codes,
        checkpoint_saves=stats.checkpoint_saves,
        checkpoint_save_seconds=stats.checkpoint_save_seconds,
        tensor_spread=account.tensor_active_spread if account else None,
        step_time_deviation=ledger.step_time_deviation if running else None,
        recent_step_seconds=tuple(ledger.recent_step_seconds),
        gpus=_gpus(ctx, job_id, now) if running else (),
        reports_received=job.reports_received or 0,
        profile=ProfileFigures.from_json(job.profile),
        engine_estimate=_engine_estimate(job, latest),
        serving=_serving(ctx, job, rows, ledger),
    )


def diagnose_job(ctx: AppContext, job_id: str) -> tuple[JobFacts, list[Finding]] | None:
    facts = job_facts(ctx, job_id)
    return None if facts is None else (facts, diagnose(facts))


def regression_facts(changes: Iterable[Change], job_id: str) -> tuple[RegressionFact, ...]:
    """The regressions the fleet comparison called whose new version this job runs."""
    return tuple(
        RegressionFact(
            component=c.component,
            before=c.before,
            after=c.after,
            relative_change=c.relative_change or 0.0,
            confidence=c.confidence or 0.0,
            also_changed=tuple(f"{a.component} {a.before} -> {a.after}" for a in c.also_changed),
        )
        for c in changes
        if c.verdict == "regression" and job_id in c.affected_jobs
    )
