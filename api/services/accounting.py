"""The waterfall's bookkeeping around the ledger: where a job's bill goes (its row, and the durable counters of its
pool, team and the cluster), and the idle and unreported GPU-seconds billed to pools and the cluster.

A job's amounts are added in the transaction that stores their cause (a report, an event, an end, an expiry); the
idle and unreported GPU-seconds by a periodic billing that one replica at a time wins (a billing mark). So each is
counted exactly once, survives restarts, and reads the same on every replica (``mfumon.api.crud.counters``).
"""

from __future__ import annotations

from typing import Any

from mfumon.api.accounting import Bill, Ledger
from mfumon.api.context import AppContext
from mfumon.api.crud.counters import HOUR, Increments, add_to_counters, compact_hours, prune_hours
from mfumon.api.crud.marks import claim_interval
from mfumon.api.db.tables import JobRow
from mfumon.api.metrics._text import labels_text
from mfumon.api.services.fleet_billing import (
    JOB_COST,
    JOB_GPU_SECONDS,
    JOB_UNPRICED,
    cost_family,
    energy_increments,
    fleet_draw,
    job_labels,
    state_cost_increments,
    state_counts,
    state_prices,
    unpriced_family,
)
from mfumon.api.services.prices import refresh_prices
from mfumon.api.state.aggregate import BusyUnreported, busy_unreported
from mfumon.api.state.outcome import ReportOutcome

SCOPES: tuple[str, ...] = ("cluster", "pool", "team")
#: Seconds a job (or node) had GPUs busy without reports, and those seconds x its GPUs: the day-long
#: ``...:sum1d`` rules read them with increase() (deploy/prometheus/rules/mfumon-cluster-truth.yml).
JOB_UNREPORTED_SECONDS = "mfumon_job_unreported_seconds_total"
JOB_UNREPORTED_GPU_SECONDS = "mfumon_job_unreported_gpu_seconds_total"
NODE_UNATTRIBUTED_SECONDS = "mfumon_node_unattributed_busy_seconds_total"
NODE_UNATTRIBUTED_GPU_SECONDS = "mfumon_node_unattributed_busy_gpu_seconds_total"


def gpu_seconds_family(scope: str) -> str:
    return f"mfumon_{scope}_gpu_seconds_total"


def flops_families(scope: str) -> tuple[str, str, str]:
    """(model FLOPs, peak FLOPs over allocated time, peak FLOPs over compute time) counters of a scope."""
    return (
        f"mfumon_{scope}_model_flops_total",
        f"mfumon_{scope}_peak_flops_total",
        f"mfumon_{scope}_compute_peak_flops_total",
    )


def scopes_of(pool: str | None, team: str | None) -> list[tuple[str, list[tuple[str, str]]]]:
    out: list[tuple[str, list[tuple[str, str]]]] = [("cluster", [])]
    if pool:
        out.append(("pool", [("pool", pool)]))
    if team:
        out.append(("team", [("team", team)]))
    return out


def add_bill(
    increments: Increments,
    bill: Bill,
    *,
    pool: str | None,
    team: str | None,
    price_per_gpu_second: float | None = None,
    job: tuple[str, str] | None = None,
) -> None:
    """The bill's amounts, added to the counters of the cluster, the job's pool and its team (and, with ``job``, its
    own); each category's cost at ``price_per_gpu_second``, or its GPU-seconds as unpriced when there is none."""
    for scope, labels in scopes_of(pool, team):
        family = gpu_seconds_family(scope)
        for category, value in bill.gpu_seconds.items():
            key = labels_text([*labels, ("category", category)])
            increments[(family, key)] += value
            if price_per_gpu_second is None:
                increments[(unpriced_family(scope), key)] += value
            else:
                increments[(cost_family(scope), key)] += value * price_per_gpu_second
        model, peak, compute_peak = flops_families(scope)
        increments[(model, labels_text(labels))] += bill.model_flops
        increments[(peak, labels_text(labels))] += bill.peak_flops
        increments[(compute_peak, labels_text(labels))] += bill.compute_peak_flops
    if job is not None:
        total = sum(bill.gpu_seconds.values())
        own = job_labels(*job)
        increments[(JOB_GPU_SECONDS, own)] += total
        if price_per_gpu_second is None:
            increments[(JOB_UNPRICED, own)] += total
        else:
            increments[(JOB_COST, own)] += total * price_per_gpu_second


def ledger_of(job: JobRow) -> Ledger:
    return Ledger.from_json(job.accounting)


def store_ledger(job: JobRow, ledger: Ledger) -> None:
    """Write the ledger back into the job's accounting JSON, beside the lifecycle's own keys."""
    job.accounting = {**(job.accounting or {}), **ledger.to_json()}


def bill_job(job: JobRow, ledger: Ledger, bill: Bill, increments: Increments) -> None:
    """Store the ledger and add its bill to the scope counters and the job's own (pool and price per GPU-second as
    resolved by the last report: :func:`mfumon.api.services.report_billing.bill_report`)."""
    store_ledger(job, ledger)
    if bill:
        acct = job.accounting or {}
        add_bill(
            increments,
            bill,
            pool=acct.get("pool"),
            team=job.team,
            price_per_gpu_second=acct.get("price_per_gpu_second"),
            job=(job.job_id, job.kind),
        )


def gpu_state_increments(increments: Increments, states: dict[str | None, tuple[int, int]], seconds: float) -> None:
    """Idle and unreported GPU-seconds of every pool and the cluster: the GPUs in each state now x ``seconds``
    (``states``: :func:`~mfumon.api.services.fleet_billing.state_counts`)."""
    for pool, (idle, unreported) in states.items():
        scope, labels = ("cluster", []) if pool is None else ("pool", [("pool", pool)])
        for category, gpus in (("idle", idle), ("unreported", unreported)):
            if gpus:
                increments[(gpu_seconds_family(scope), labels_text([*labels, ("category", category)]))] += (
                    gpus * seconds
                )


def busy_unreported_increments(increments: Increments, busy: BusyUnreported, seconds: float) -> None:
    """Each job's and node's busy-without-reports seconds and GPU-seconds: its GPUs now x ``seconds``
    (``busy``: :func:`~mfumon.api.state.aggregate.busy_unreported`)."""
    for (job_id, kind), gpus in busy.jobs.items():
        labels = labels_text([("job_id", job_id), ("kind", kind)])
        increments[(JOB_UNREPORTED_SECONDS, labels)] += seconds
        increments[(JOB_UNREPORTED_GPU_SECONDS, labels)] += gpus * seconds
    for node, gpus in busy.nodes.items():
        labels = labels_text([("node", node)])
        increments[(NODE_UNATTRIBUTED_SECONDS, labels)] += seconds
        increments[(NODE_UNATTRIBUTED_GPU_SECONDS, labels)] += gpus * seconds


def bill_gpu_states(ctx: AppContext) -> float:
    """Bill the idle and unreported GPUs since the last billing (any replica's), as this replica sees them now, and
    each job's and node's GPUs busy without reports; the fleet's energy at the power drawn now (jobs, idle,
    unreported: :mod:`mfumon.api.services.fleet_billing`), and the idle and unreported GPU-seconds' cost.

    Runs every ``ACCOUNTING_INTERVAL_SECONDS`` on every replica; the billing mark makes each interval billed once.
    The states are sampled: a GPU that went idle between two billings is billed in its new state for the whole
    interval. An interval longer than ``NODE_TTL_SECONDS`` (every replica down) is billed for its last part only:
    nobody saw the GPUs before. Returns the seconds billed.
    """
    now = ctx.clock()
    prices = refresh_prices(ctx)  # another replica may have set a new list
    # Counted before the transaction, which would otherwise hold the database's write lock (SQLite's, for the
    # whole file) meanwhile.
    snapshot = ctx.state.snapshot(now)
    priced = state_prices(snapshot, prices)  # idle and unreported GPUs, counted and priced in one pass
    states = state_counts(priced)
    busy = busy_unreported(snapshot)
    draw = fleet_draw(snapshot)
    teams = {job.job_id: job.team for job in snapshot.jobs}
    with ctx.sessions.begin() as session:
        interval = claim_interval(session, name="gpu_states", now=now, max_seconds=ctx.settings.NODE_TTL_SECONDS)
        if interval is None:
            return 0.0
        seconds = interval[1] - interval[0]
        increments = Increments()
        gpu_state_increments(increments, states, seconds)
        busy_unreported_increments(increments, busy, seconds)
        state_cost_increments(increments, priced, seconds)
        energy_increments(increments, draw, teams, prices, seconds)
        rows = add_to_counters(session, increments, shard=0, now=now)
    ctx.state.counters.apply(rows)
    return seconds


def maintain_hours(ctx: AppContext) -> int:
    """Fold the hourly counter rows of past hours into one shard and drop those past the retention (hourly, one
    replica at a time, under a billing mark). Returns the rows folded."""
    now = ctx.clock()
    with ctx.sessions.begin() as session:
        if claim_interval(session, name="counter_hours", now=now, max_seconds=HOUR) is None:
            return 0
        folded = compact_hours(session, before=now - HOUR)
        prune_hours(session, before=now - ctx.settings.USAGE_RETENTION_DAYS * 86400)
    return folded


def summary_of(job: JobRow, ledger: Ledger) -> dict[str, Any]:
    """The lifetime summary frozen when the job ends: readable at ``GET /v1/jobs/{id}`` ever after."""
    total = ledger.total_gpu_seconds
    return {
        "gpu_hours": total / 3600.0,
        "total_gpu_seconds": total,
        "waterfall": [{"category": c, "gpu_seconds": s} for c, s in ledger.waterfall()],
        "goodput_ratio": ledger.goodput,
        "lifetime_mfu": ledger.lifetime_mfu,
        "compute_mfu": ledger.compute_mfu,
        "time_weighted_mfu": ledger.time_weighted_mfu,
        "model_flops": ledger.model_flops,
        "restarts": job.restarts,
        "failures": job.failures,
        "exit_code": job.exit_code,
        "outcome": job.outcome,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
        "reports_received": job.reports_received,
        "pool": (job.accounting or {}).get("pool"),
        "team": job.team,
        "device": latest.device if (latest := ReportOutcome.from_json(job.latest)) else None,
    }
