"""What the cluster page shows, gathered from the state's summary and the services (never from storage directly)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mfumon.api.accounting import Ledger
from mfumon.api.context import AppContext
from mfumon.api.pages.svg import Part, stacked_bar
from mfumon.api.services import jobs as job_reads
from mfumon.api.services.usage import read_usage
from mfumon.api.state.aggregate import GroupTotals, summarize

GOODPUT_WINDOW_SECONDS = 24 * 3600
TOP_WASTERS = 5
STATES = (("reporting", "st-reporting"), ("unreported", "st-unreported"), ("idle", "st-idle"), ("down", "st-down"))
MAX_JOBS_READ = 1000  # one page of the jobs service: the most the pages read at once


@dataclass(frozen=True, slots=True)
class Waster:
    job_id: str
    name: str | None
    team: str | None
    wasted_gpu_seconds: float
    total_gpu_seconds: float
    biggest: tuple[str, float] | None  # the category outside compute holding most GPU-seconds
    goodput: float | None


def gpu_state_parts(group: GroupTotals) -> list[Part]:
    states = group.states()
    return [Part(name, states[name], css, f"{states[name]} GPUs") for name, css in STATES]


def _wasters(ctx: AppContext) -> list[Waster]:
    out = []
    for job in job_reads.read_jobs(ctx, status="running", limit=MAX_JOBS_READ, after=None, offset=0):
        ledger = Ledger.from_json(job.accounting)
        waste = [(c, s) for c, s in ledger.waterfall() if c != "compute" and s > 0]
        wasted = sum(s for _, s in waste)
        if wasted > 0:
            biggest = max(waste, key=lambda item: item[1])
            out.append(
                Waster(job.job_id, job.name, job.team, wasted, ledger.total_gpu_seconds, biggest, ledger.goodput)
            )
    return sorted(out, key=lambda w: -w.wasted_gpu_seconds)[:TOP_WASTERS]


def cluster_page(ctx: AppContext) -> dict[str, Any]:
    """The template's context for ``/ui``."""
    now = ctx.clock()
    snapshot = ctx.state.snapshot(now)
    summary = summarize(snapshot)
    usage = read_usage(ctx, now - GOODPUT_WINDOW_SECONDS, now)
    drain = [
        {"node": n.name, "pool": n.pool, "reasons": [r for r in n.health.reasons if r["drain"]]}
        for n in sorted(snapshot.nodes, key=lambda n: n.name)
        if n.health is not None and n.health.drain
    ]
    return {
        "now": now,
        "cluster": summary.cluster,
        "summary": summary,
        "states_chart": stacked_bar("chart-gpu-states", "GPUs by state", gpu_state_parts(summary.cluster)),
        "states": STATES,
        "pools": sorted(summary.pools.items()),
        "goodput": usage.cluster.goodput_ratio,
        "goodput_window_hours": GOODPUT_WINDOW_SECONDS // 3600,
        "wasters": _wasters(ctx),
        "drain": drain,
    }
