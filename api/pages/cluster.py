"""What the cluster page shows, gathered from the state's summary and the services (never from storage directly)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mfumon.api.accounting import STEP_CATEGORIES, Ledger
from mfumon.api.context import AppContext
from mfumon.api.pages import fmt
from mfumon.api.pages.svg import Part, stacked_bar
from mfumon.api.pages.view import RANGE_LABELS, PageQuery, Table
from mfumon.api.schemas.usage import UsageGroup
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
    in_steps_gpu_seconds: float = 0.0  # of the waste, the waits inside steps (data_wait, comm_exposed, bubble)


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
            in_steps = sum(s for c, s in waste if c in STEP_CATEGORIES)
            out.append(
                Waster(
                    job.job_id, job.name, job.team, wasted, ledger.total_gpu_seconds, biggest, ledger.goodput, in_steps
                )
            )
    return sorted(out, key=lambda w: -w.wasted_gpu_seconds)[:TOP_WASTERS]


@dataclass(frozen=True, slots=True)
class PoolLine:
    """A pool now (its GPUs' states, jobs) and over the page's range (MFU and goodput, from the durable counters:
    the figures ``mfumon report`` prints for the same window)."""

    name: str
    now: GroupTotals
    usage: UsageGroup | None

    @property
    def mfu(self) -> float | None:
        """Useful model FLOPs ÷ dense peak FLOPs over the pool's jobs' allocated time in the range: ``mfumon
        report``'s pool MFU, None (``—``) when no FLOPs were counted, where the report prints its blank (an en dash)."""
        return self.usage.mfu if self.usage is not None else None

    @property
    def goodput(self) -> float | None:
        return self.usage.goodput_ratio if self.usage is not None else None


POOLS_TABLE: Table[PoolLine] = Table(
    "pools",
    {
        "pool": ("Pool", "asc", lambda p: p.name),
        "mfu": ("MFU over the range", "desc", lambda p: p.mfu),
        "goodput": ("Goodput over the range", "desc", lambda p: p.goodput),
        "coverage": ("Coverage", "desc", lambda p: p.now.reported_coverage),
        "reporting": ("Reporting", "desc", lambda p: p.now.gpus_reporting),
        "unreported": ("Unreported", "desc", lambda p: p.now.gpus_unreported),
        "idle": ("Idle", "desc", lambda p: p.now.gpus_idle),
        "down": ("Down", "desc", lambda p: p.now.gpus_down),
        "satisfaction": ("Satisfaction (allocated ÷ requested GPUs)", "desc", lambda p: p.now.resource_satisfaction),
        "jobs": ("Jobs running / pending", "desc", lambda p: (p.now.jobs_running, p.now.jobs_pending)),
    },
    default="pool",
)
WASTERS_TABLE: Table[Waster] = Table(
    "wasters",
    {
        "job": ("Job", "asc", lambda w: w.job_id),
        "team": ("Team", "asc", lambda w: w.team),
        "wasted": ("Outside compute", "desc", lambda w: w.wasted_gpu_seconds),
        "allocated": ("Allocated", "desc", lambda w: w.total_gpu_seconds),
        "in_steps": ("Of it inside steps", "desc", lambda w: w.in_steps_gpu_seconds),
        "biggest": ("Biggest cause", "desc", lambda w: w.biggest[1] if w.biggest else None),
        "goodput": ("Goodput", "desc", lambda w: w.goodput),
    },
    default="wasted",
    default_dir="desc",
)
CLUSTER_TABLES = (POOLS_TABLE, WASTERS_TABLE)


def cluster_page(ctx: AppContext, query: PageQuery | None = None) -> dict[str, Any]:
    """The template's context for ``/ui``: the cluster now, and its MFU and goodput over the query's range (24 h by
    default)."""
    query = query or PageQuery("/ui")
    window = query.range_seconds or GOODPUT_WINDOW_SECONDS
    now = ctx.clock()
    snapshot = ctx.state.snapshot(now)
    summary = summarize(snapshot)
    usage = read_usage(ctx, now - window, now)
    used = {p.name: p for p in usage.pools if p.name is not None}
    pools = [PoolLine(n, summary.pools.get(n) or GroupTotals(), used.get(n)) for n in sorted({*summary.pools, *used})]
    wasters = _wasters(ctx)
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
        "pools": query.sorted(POOLS_TABLE, pools),
        "goodput": usage.cluster.goodput_ratio,
        "window_mfu": usage.cluster.mfu,
        "window_label": RANGE_LABELS[query.range] if query.range else f"last {window // 3600} h",
        "wasters": query.sorted(WASTERS_TABLE, wasters),
        "wasters_unit": fmt.gpu_time_unit(
            v for w in wasters for v in (w.wasted_gpu_seconds, w.total_gpu_seconds, w.in_steps_gpu_seconds)
        ),
        "q": query,
        "tables": {t.name: t for t in CLUSTER_TABLES},
        "drain": drain,
    }
