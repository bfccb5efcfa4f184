"""The waterfall's bookkeeping around the ledger: where a job's bill goes (its row, and the durable counters of its
pool, team and the cluster), and the idle and unreported GPU-seconds that node pushes bill to pools and the cluster.

Every amount is added in the transaction that stores its cause (a report, an end, a node push), so each is counted
exactly once, survives restarts, and reads the same on every replica (``api.crud.counters``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container
from typing import Any

from api.accounting import Bill, Ledger
from api.db.models import Job
from api.metrics._text import labels_text
from api.state.aggregate import node_gpu_states
from api.state.views import NodeView

SCOPES: tuple[str, ...] = ("cluster", "pool", "team")

Increments = Counter[tuple[str, str]]


def gpu_seconds_family(scope: str) -> str:
    return f"mfumon_{scope}_gpu_seconds_total"


def flops_families(scope: str) -> tuple[str, str, str]:
    """(model FLOPs, peak FLOPs over allocated time, peak FLOPs over compute time) counters of a scope."""
    return (
        f"mfumon_{scope}_model_flops_total",
        f"mfumon_{scope}_peak_flops_total",
        f"mfumon_{scope}_compute_peak_flops_total",
    )


def _scopes(pool: str | None, team: str | None) -> list[tuple[str, list[tuple[str, str]]]]:
    out: list[tuple[str, list[tuple[str, str]]]] = [("cluster", [])]
    if pool:
        out.append(("pool", [("pool", pool)]))
    if team:
        out.append(("team", [("team", team)]))
    return out


def add_bill(increments: Increments, bill: Bill, *, pool: str | None, team: str | None) -> None:
    """The bill's amounts, added to the counters of the cluster, the job's pool and its team."""
    for scope, labels in _scopes(pool, team):
        family = gpu_seconds_family(scope)
        for category, value in bill.gpu_seconds.items():
            increments[(family, labels_text([*labels, ("category", category)]))] += value
        model, peak, compute_peak = flops_families(scope)
        increments[(model, labels_text(labels))] += bill.model_flops
        increments[(peak, labels_text(labels))] += bill.peak_flops
        increments[(compute_peak, labels_text(labels))] += bill.compute_peak_flops


def ledger_of(job: Job) -> Ledger:
    return Ledger.from_json(job.accounting)


def store_ledger(job: Job, ledger: Ledger) -> None:
    """Write the ledger back into the job's accounting JSON, beside the lifecycle's own keys."""
    job.accounting = {**(job.accounting or {}), **ledger.to_json()}


def bill_job(job: Job, ledger: Ledger, bill: Bill, increments: Increments) -> None:
    """Store the ledger and add its bill to the scope counters (pool as resolved by the last report)."""
    store_ledger(job, ledger)
    if bill:
        add_bill(increments, bill, pool=(job.accounting or {}).get("pool"), team=job.team)


def node_push_increments(increments: Increments, node: NodeView, *, seconds: float, reporting: Container[str]) -> None:
    """Idle and unreported GPU-seconds of a node over the ``seconds`` since its previous push (its state then)."""
    if seconds <= 0:
        return
    states = node_gpu_states(node, reporting)
    for category in ("idle", "unreported"):
        gpu_seconds = states[category] * seconds
        for scope, labels in _scopes(node.pool, None):
            increments[(gpu_seconds_family(scope), labels_text([*labels, ("category", category)]))] += gpu_seconds


def summary_of(job: Job, ledger: Ledger) -> dict[str, Any]:
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
        "device": (job.latest or {}).get("device"),
    }
