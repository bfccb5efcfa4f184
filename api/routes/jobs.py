"""Job routes: register, report throughput, end, and read jobs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query

from mfumon.api.accounting import Ledger
from mfumon.api.db.tables import JobRow
from mfumon.api.deps import ContextDep, JobCapacity, JobIdPath, JobWriter, PageDep
from mfumon.api.route_table import route_spec
from mfumon.api.schemas.jobs import (
    AccountingPublic,
    JobEnd,
    JobPublic,
    JobReportCreate,
    JobReportPublic,
    JobsPublic,
    JobUpdate,
    ReportResult,
    WaterfallEntry,
)
from mfumon.api.services import jobs as job_reads
from mfumon.api.services import reports
from mfumon.api.services.job_cost import energy_and_cost
from mfumon.api.serving import serving_waterfall
from mfumon.api.state.aggregate import JobAccount, summarize
from mfumon.api.state.health import job_health
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.software import with_node_software
from mfumon.api.state.views import GpuView
from mfumon.mfu import check_accounting

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

MAX_OFFSET = 10_000


def _public(
    ctx: ContextDep,
    job: JobRow,
    *,
    account: JobAccount | None,
    history: list[JobReportPublic],
    gpus: list[dict[str, Any]],
    health: dict[str, Any] | None = None,
) -> JobPublic:
    latest = ReportOutcome.from_json(job.latest) or ReportOutcome()
    signature = latest.signature
    baseline = ctx.state.baseline(signature) if signature else None
    mfu = latest.mfu
    attributed = account.gpus_attributed if account is not None else 0
    accounting = None
    if account is not None and account.reporting:
        check = check_accounting(
            account.mfu, account.hardware_mfu, dtype=job.dtype, recompute=job.recompute_activations
        )
        accounting = AccountingPublic(verdict=check.verdict, message=check.message)
    return JobPublic(
        job_id=job.job_id,
        status=job.status,
        kind=job.kind,
        name=job.name,
        team=job.team,
        pool=job.pool,
        gpu_model=job.gpu_model,
        dtype=job.dtype,
        weight_dtype=job.weight_dtype,
        kv_cache_dtype=job.kv_cache_dtype,
        num_gpus=job.num_gpus,
        gpus_requested=job.gpus_requested,
        gpus_allocated=account.gpus_held if account is not None else 0,
        gpus_reported=job.num_gpus,
        gpus_attributed=attributed,
        gpus_unverified=account.gpus_unverified if account is not None else 0,
        gpus_shared=account.gpus_shared if account is not None else 0,
        gpu_share=account.gpu_share if account is not None else None,
        share_method=account.share_method if account is not None else None,
        hardware_mfu=account.hardware_mfu if account is not None else None,
        hardware_estimate_source=account.hardware_estimate_source if account is not None else None,
        mfu_hardware_agreement=account.agreement if account is not None else None,
        accounting=accounting,
        model=job.model,
        created_at=job.created_at,
        started_at=job.started_at,
        last_report_at=job.last_report_at,
        ended_at=job.ended_at,
        exit_code=job.exit_code,
        outcome=job.outcome,
        restarts=job.restarts or 0,
        failures=job.failures or 0,
        **_accounting_fields(job),
        **_serving_fields(job, latest),
        **energy_and_cost(ctx.state.counters, ctx.state.prices, job.job_id, job.kind),
        reports_received=job.reports_received,
        latest=latest.as_json() if job.latest else None,
        baseline_mfu=baseline.mfu if baseline else None,
        mfu_vs_baseline=mfu / baseline.mfu if baseline and mfu is not None and baseline.mfu > 0 else None,
        parallelism=job.parallelism,
        # Its own fingerprint, and the driver and firmware its nodes report where it has none (job-sent keys win).
        software=with_node_software(
            job.software, (node for node, _share in ctx.state.job_shares(job.job_id, ctx.clock()))
        ),
        baseline_signature=signature,
        gpus=gpus,
        history=history,
        health=health,
        source=job.source,
        submitted_at=job.submitted_at,
        queued_at=job.queued_at,
        pending_reason=job.pending_reason,
        scheduler_restarts=job.scheduler_restarts,
        placement=job.placement,
        end_state=job.end_state,
    )


def _accounts(ctx: ContextDep) -> dict[str, JobAccount]:
    return summarize(ctx.state.snapshot(ctx.clock())).jobs


def _serving_fields(job: JobRow, latest: ReportOutcome) -> dict[str, Any]:
    """A serving job's SLO goodput, serving waterfall and window figures (nothing for training jobs)."""
    if job.kind != "inference":
        return {"slo": job.slo}
    ledger = Ledger.from_json(job.accounting)
    waterfall = serving_waterfall(ledger.total_gpu_seconds, ledger.serving_gpu_seconds)
    serving = latest.serving
    return {
        "slo": job.slo,
        "slo_goodput_ratio": serving.goodput_ratio if serving else None,
        "serving_waterfall": [WaterfallEntry(category=c, gpu_seconds=s) for c, s in waterfall],
        "serving": dict(serving.document) if serving else None,
    }


def _accounting_fields(job: JobRow) -> dict[str, Any]:
    ledger = Ledger.from_json(job.accounting)
    return {
        "total_gpu_seconds": ledger.total_gpu_seconds,
        "waterfall": [WaterfallEntry(category=c, gpu_seconds=s) for c, s in ledger.waterfall()],
        "goodput_ratio": ledger.goodput,
        "lifetime_mfu": ledger.lifetime_mfu,
        "compute_mfu": ledger.compute_mfu,
        "summary": job.summary,
    }


@router.put("/{job_id}", response_model=JobPublic, dependencies=[JobCapacity])
@route_spec("jobs", endpoint="job_update")
def update_job(job_id: JobIdPath, body: JobUpdate, ctx: ContextDep, principal: JobWriter) -> JobPublic:
    """Register a job (pending until it reports) or update its metadata."""
    job = reports.update_job(ctx, job_id, body, principal)
    ctx.self_metrics.count_ingest("job_update", "accepted")
    return _public(ctx, job, account=_accounts(ctx).get(job_id), history=[], gpus=[])


@router.post("/{job_id}/reports", response_model=ReportResult, dependencies=[JobCapacity])
@route_spec("jobs", endpoint="job_reports")
def create_report(job_id: JobIdPath, body: JobReportCreate, ctx: ContextDep, principal: JobWriter) -> ReportResult:
    """Report a job's throughput over the last interval; returns its MFU now."""
    result = reports.record_report(ctx, job_id, body, principal)
    ctx.self_metrics.count_ingest("job_reports", "accepted")
    return result


@router.post("/{job_id}/end", response_model=JobPublic)
@route_spec("jobs", endpoint="job_end")
def end_job(
    job_id: JobIdPath, ctx: ContextDep, principal: JobWriter, body: Annotated[JobEnd | None, Body()] = None
) -> JobPublic:
    """End a job; its series leave /metrics at once."""
    job = reports.end_job(ctx, job_id, body or JobEnd(), principal)
    if job is None:
        ctx.self_metrics.count_ingest("job_end", "not_found")
        raise HTTPException(status_code=404, detail=f"job {job_id!r} not found")
    ctx.self_metrics.count_ingest("job_end", "accepted")
    return _public(ctx, job, account=None, history=[], gpus=[])


@router.get("", response_model=JobsPublic)
def read_jobs(
    ctx: ContextDep,
    page: PageDep,
    status: Annotated[str | None, Query(pattern="^(pending|running|ended)$")] = None,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Prefer `cursor`: deep offsets are slow.")] = 0,
) -> JobsPublic:
    """List jobs in job_id order with their current MFU, a page at a time: pass `next_cursor` back as `cursor`."""
    accounts = _accounts(ctx)
    rows = job_reads.read_jobs(ctx, status=status, limit=page.limit, after=page.after, offset=offset)
    data = [_public(ctx, j, account=accounts.get(j.job_id), history=[], gpus=[]) for j in rows]
    return JobsPublic(data=data, count=len(data), next_cursor=page.next_cursor([j.job_id for j in rows]))


def _share_of(gpu: GpuView, job_id: str) -> dict[str, Any]:
    """A shared GPU's entry says the job's share of it, how it was measured and how many jobs share it."""
    for share in gpu.shares or ():
        if share.job_id == job_id:
            return {"share": share.share, "share_method": share.method, "jobs": len(gpu.shares or ())}
    return {}


@router.get("/{job_id}", response_model=JobPublic)
def read_job(job_id: JobIdPath, ctx: ContextDep, history: Annotated[int, Query(ge=0, le=1000)] = 60) -> JobPublic:
    """One job: current MFU, baseline, its GPUs and recent history."""
    account = _accounts(ctx).get(job_id)
    job, rows = job_reads.read_job(ctx, job_id, history=history)
    gpus = [
        {
            "node": g.node,
            "gpu": g.index,
            "uuid": g.uuid,
            "name": g.name,
            "up": g.up,
            **_share_of(g, job_id),
            **g.counters,
        }
        for node, _ in ctx.state.job_shares(job_id, ctx.clock())
        for g in node.gpus
        if g.job_id == job_id or (g.shares is not None and any(s.job_id == job_id for s in g.shares))
    ]
    past = [JobReportPublic.model_validate(r, from_attributes=True) for r in rows]
    nodes = [node for node, _share in ctx.state.job_shares(job_id, ctx.clock())]
    health = job_health(job_id, nodes) if job.status == "running" else None
    return _public(ctx, job, account=account, history=past, gpus=gpus, health=health)
