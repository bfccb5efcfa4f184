"""What the jobs list and a job's page show, gathered through the services (jobs, diagnosis, events) and the state."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mfumon.api.accounting import CATEGORIES, STEP_CATEGORIES, Ledger
from mfumon.api.context import AppContext
from mfumon.api.db.tables import JobRow
from mfumon.api.errors import NotFoundError
from mfumon.api.pages import fmt
from mfumon.api.pages.cluster import MAX_JOBS_READ
from mfumon.api.pages.findings import cause
from mfumon.api.pages.serving import serving_page
from mfumon.api.pages.svg import Part, Reference, Series, bar_list, line_chart, stacked_bar
from mfumon.api.pages.view import RANGE_LABELS, PageQuery, Table
from mfumon.api.services import jobs as job_reads
from mfumon.api.services.diagnosis import diagnose_job
from mfumon.api.services.events import read_events
from mfumon.api.services.job_cost import energy_and_cost
from mfumon.api.state.aggregate import JobAccount, summarize
from mfumon.api.state.collective_ranks import MIN_MESSAGE_BYTES, LinkFigure, WaitedRank
from mfumon.api.state.collectives import job_groups
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.software import with_node_software
from mfumon.api.state.views import NodeView

HISTORY_REPORTS = 500
EVENTS_SHOWN = 50
STATUSES = ("pending", "running", "ended")
KINDS = ("training", "inference")
FILTERS = ("status", "team", "pool", "kind")


@dataclass(frozen=True, slots=True)
class JobLine:
    """One row of the jobs list."""

    job: JobRow
    latest: ReportOutcome
    account: JobAccount | None
    ledger: Ledger

    @property
    def pool(self) -> str | None:
        return self.job.pool or (self.account.pool if self.account is not None else None)


def mfu_reason(job: JobRow, latest: ReportOutcome) -> str:
    """Why a job has no MFU: the engine's reason for its latest report, or that it never reported."""
    if latest.reason:
        return latest.reason
    return "no report yet" if not job.reports_received else "not computed for the latest report"


def hardware_reason(job: JobRow, account: JobAccount | None) -> str:
    if job.status == "ended":
        return "the job ended: its GPUs are no longer read"
    if account is None or account.gpus_attributed == 0:
        return "no exporter attributes GPUs to this job"
    return "its GPUs report no tensor activity or clocks"


def _gpus(line: JobLine) -> int | None:
    return line.job.num_gpus if line.job.num_gpus is not None else line.job.gpus_requested


def _hardware(line: JobLine) -> float | None:
    return line.account.hardware_mfu if line.account is not None else None


JOBS_TABLE: Table[JobLine] = Table(
    "jobs",
    {
        "job": ("Job", "asc", lambda ln: ln.job.job_id),
        "kind": ("Kind", "asc", lambda ln: ln.job.kind),
        "status": ("Status", "asc", lambda ln: ln.job.status),
        "team": ("Team", "asc", lambda ln: ln.job.team),
        "pool": ("Pool", "asc", lambda ln: ln.pool),
        "gpus": ("GPUs", "desc", _gpus),
        "mfu": ("MFU (latest)", "desc", lambda ln: ln.latest.mfu),
        "hardware": ("Hardware MFU (estimate)", "desc", _hardware),
        "goodput": ("Goodput", "desc", lambda ln: ln.ledger.goodput),
        "last": ("Last report", "desc", lambda ln: ln.job.last_report_at),
    },
    default="last",
    default_dir="desc",
)


def in_range(job: JobRow, since: float | None) -> bool:
    """Whether the job was pending, running or ended within the range (any job without a range)."""
    if since is None or job.status != "ended":
        return True
    return max(t for t in (job.ended_at, job.last_report_at, job.updated_at, 0.0) if t is not None) >= since


def list_jobs(
    ctx: AppContext, filters: dict[str, str], query: PageQuery | None = None
) -> tuple[list[JobLine], bool, dict[str, list[str]]]:
    """Jobs matching ``filters`` (status, team, pool, kind; empty means any) that were not ended before the query's
    range, in its sort order; whether the read was cut at :data:`MAX_JOBS_READ`, and the values each filter can
    take."""
    query = query or PageQuery("/ui/jobs")
    since = ctx.clock() - query.range_seconds if query.range_seconds else None
    status = filters.get("status") or None
    rows = job_reads.read_jobs(ctx, status=status, limit=MAX_JOBS_READ, after=None, offset=0)
    accounts = summarize(ctx.state.snapshot(ctx.clock())).jobs
    lines = [
        JobLine(
            j,
            ReportOutcome.from_json(j.latest) or ReportOutcome(),
            accounts.get(j.job_id),
            Ledger.from_json(j.accounting),
        )
        for j in rows
    ]
    choices = {
        "status": list(STATUSES),
        "kind": list(KINDS),
        "team": sorted({ln.job.team for ln in lines if ln.job.team}),
        "pool": sorted({p for ln in lines if (p := ln.pool)}),
    }
    for key, attr in (("team", "team"), ("kind", "kind")):
        if filters.get(key):
            lines = [ln for ln in lines if getattr(ln.job, attr) == filters[key]]
    if filters.get("pool"):
        lines = [ln for ln in lines if ln.pool == filters["pool"]]
    lines = query.sorted(JOBS_TABLE, (ln for ln in lines if in_range(ln.job, since)))
    return lines, len(rows) >= MAX_JOBS_READ, choices


def _mfu_chart(
    job: JobRow,
    rows: list[Any],
    account: JobAccount | None,
    baseline: float | None,
    x_range: tuple[float, float] | None = None,
) -> Any:
    series = [Series("reported MFU", [(r.received_at, r.mfu) for r in rows], "s0")]
    if any(r.hfu is not None for r in rows):
        series.append(Series("HFU (recomputation counted)", [(r.received_at, r.hfu) for r in rows], "s1"))
    if job.kind == "inference" and any(r.mbu is not None for r in rows):
        series.append(Series("MBU (memory bandwidth)", [(r.received_at, r.mbu) for r in rows], "s2"))
    if job.kind == "inference":
        for phase, css in (("prefill", "s4"), ("decode", "s5")):
            points = [(r.received_at, getattr(r, f"{phase}_mfu")) for r in rows]
            if any(y is not None for _, y in points):
                series.append(Series(f"{phase} MFU", points, css))
    hardware_history = any(r.hardware_mfu is not None for r in rows)
    if hardware_history:
        series.append(Series("hardware estimate", [(r.received_at, r.hardware_mfu) for r in rows], "s3"))
    refs = []
    if not hardware_history and account is not None and account.hardware_mfu is not None:
        refs.append(Reference("hardware estimate now", account.hardware_mfu, "ref hw"))
    if baseline is not None:
        refs.append(Reference("baseline MFU", baseline, "ref base"))
    if not any(y is not None for s in series for _, y in s.points):
        return None
    title = "MFU and MBU over time" if job.kind == "inference" else "MFU over time"
    return line_chart("chart-mfu", title, series, references=refs, x_range=x_range), series, refs


def waterfall_parts(gpu_seconds: dict[str, float]) -> list[Part]:
    ordered = list(dict.fromkeys([*CATEGORIES, *gpu_seconds]))
    unit = fmt.gpu_time_unit(gpu_seconds.values())
    scale = 3600 if unit == fmt.GPU_HOURS else 1

    def note(value: float) -> str:
        return f"{value / scale:.2f} {unit}" if unit == fmt.GPU_HOURS else f"{value:.0f} {unit}"

    return [Part(c, gpu_seconds.get(c, 0.0), f"wf-{c}", note(gpu_seconds.get(c, 0.0))) for c in ordered]


@dataclass(frozen=True, slots=True)
class Badge:
    """A warning at the top of a job's page: what is wrong, in a few words, and where the page says more."""

    css: str
    text: str
    detail: str
    anchor: str


def badges(facts: Any, gpus: list[Any], serving: Any, findings: list[Any]) -> list[Badge]:
    """An over-claim (the hardware contradicts the reported MFU), a failing health check, an SLO miss."""
    out = []
    if facts.accounting_verdict == "over_claims":
        out.append(
            Badge(
                "bad",
                "MFU over-claimed",
                "the job reports more MFU than its GPUs' tensor activity and clocks allow: read its MFU as suspect",
                "#diagnosis",
            )
        )
    elif facts.accounting_verdict == "under_claims":
        out.append(
            Badge("warn", "MFU under-claimed", "the hardware shows more work than the job reports", "#diagnosis")
        )
    failing = sorted({f"{c} ({g.node}/{g.index})" for g in gpus for c in (*g.failing, *g.node_failing)})
    if failing:
        out.append(
            Badge("bad", "Health check failing", ", ".join(failing[:6]) + (" …" if len(failing) > 6 else ""), "#gpus")
        )
    if serving is not None:
        best = serving.goodput_upper if serving.goodput_upper is not None else serving.goodput_lower
        if any(f.cause == "slo_misses" for f in findings) or (best is not None and best < serving.objective.value):
            out.append(
                Badge(
                    "bad",
                    "SLO missed",
                    f"fewer requests met their latency targets than the objective ({serving.objective.value:.0%})",
                    "#serving-goodput",
                )
            )
    return out


#: what a scheduler's pending reason means, for the reasons people see most (Slurm's and Kubernetes' words)
PENDING_MEANINGS = {
    "resources": "waiting for free GPUs: the GPUs it asks for are in use",
    "priority": "waiting behind jobs with higher priority",
    "unschedulable": "no node can hold it as asked",
    "dependency": "waiting for a job it depends on",
    "qosmaxgpuperuser": "its user is at the QOS limit on GPUs",
    "reqnodenotavail": "a node it asks for is not available",
}


def pending_context(job: JobRow, now: float) -> dict[str, Any] | None:
    """Why a pending job waits and since when (the scheduler's reason and queue time); None for other jobs."""
    if job.status != "pending":
        return None
    since = job.queued_at if job.queued_at is not None else job.submitted_at
    reason = job.pending_reason
    return {
        "reason": reason,
        "meaning": PENDING_MEANINGS.get((reason or "").lower().replace(" ", "")),
        "since": since,
        "waited": max(now - since, 0.0) if since is not None else None,
        "held": job.queued_at is None and job.submitted_at is not None,
        "created": job.created_at,
        "created_waited": max(now - job.created_at, 0.0),
    }


GPUS_TABLE: Table[Any] = Table(
    "gpus",
    {
        "gpu": ("Node / GPU", "asc", lambda g: (g.node, g.index)),
        "tensor": ("Tensor active", "desc", lambda g: g.tensor_active),
        "sm": ("SM active", "desc", lambda g: g.sm_active),
        "clock": ("SM clock", "desc", lambda g: g.sm_clock_hz),
        "throttling": ("Throttling", "desc", lambda g: ", ".join(g.throttle_reasons)),
        "failing": ("Failing checks", "desc", lambda g: ", ".join((*g.failing, *g.node_failing))),
    },
    default="gpu",
)
EVENTS_TABLE: Table[Any] = Table(
    "events",
    {
        "received": ("Received", "desc", lambda e: e.received_at),
        "type": ("Type", "asc", lambda e: e.type),
        "seconds": ("Seconds", "desc", lambda e: e.seconds),
        "step": ("Step", "desc", lambda e: e.step),
        "exit_code": ("Exit code", "desc", lambda e: e.exit_code),
        "attempt": ("Attempt", "desc", lambda e: e.attempt),
    },
    default="received",
)
_ORDER = {c: i for i, c in enumerate(CATEGORIES)}
WATERFALL_TABLE: Table[Part] = Table(
    "waterfall",
    {
        "category": ("Category", "asc", lambda p: (_ORDER.get(p.label, len(_ORDER)), p.label)),  # the ledger's order
        "time": ("GPU-time", "desc", lambda p: p.value),
        "share": ("Share of allocated", "desc", lambda p: p.value),
    },
    default="category",
)
#: NCCL Inspector per rank (issue 61): the ranks their peers wait for, largest lag first by default.
WAITED_TABLE: Table[WaitedRank] = Table(
    "waited",
    {
        "node": ("Node", "asc", lambda w: w.node),
        "rank": ("Rank", "asc", lambda w: w.rank),
        "group": ("Group", "asc", lambda w: w.group),
        "collective": ("Collective", "asc", lambda w: w.collective),
        "time": ("Time / operation", "asc", lambda w: w.seconds_per_operation),
        "median": ("Peers' median", "desc", lambda w: w.peers_median_seconds_per_operation),
        "lag": ("Lag ratio", "desc", lambda w: w.lag_ratio),
        "bandwidth": ("Bus bandwidth", "asc", lambda w: w.bus_bandwidth),
    },
    default="lag",
    default_dir="desc",
)
#: ... and point-to-point links, the furthest below the fabric first; links not judged (small messages, no
#: expected figure) sort last on their ratio.
LINKS_TABLE: Table[LinkFigure] = Table(
    "links",
    {
        "group": ("Group", "asc", lambda link: link.group),
        "pair": ("GPU pair", "asc", lambda link: (link.node, link.rank, link.peer_node, link.peer_rank)),
        "where": ("Where", "asc", lambda link: link.within_node),
        "bandwidth": ("Bus bandwidth", "asc", lambda link: link.bus_bandwidth),
        "expected": ("Expected", "desc", lambda link: link.expected),
        "ratio": ("Of expected", "asc", lambda link: link.expected_ratio if link.judged else None),
        "message": ("Mean message", "desc", lambda link: link.mean_message_bytes),
    },
    default="ratio",
)
JOB_TABLES = (GPUS_TABLE, EVENTS_TABLE, WATERFALL_TABLE, WAITED_TABLE, LINKS_TABLE)
#: Ranks and links the Collectives section lists at most: the worst ones.
RANKS_SHOWN = 8
LINKS_SHOWN = 8


def job_page(ctx: AppContext, job_id: str, query: PageQuery | None = None) -> dict[str, Any]:
    """The template's context for ``/ui/jobs/{job_id}``; :class:`NotFoundError` for an unknown job."""
    query = query or PageQuery(f"/ui/jobs/{job_id}")
    now = ctx.clock()
    job, history = job_reads.read_job(ctx, job_id, history=HISTORY_REPORTS)
    rows = sorted(history, key=lambda r: r.received_at)
    x_range = None
    if query.range_seconds:
        x_range = (now - query.range_seconds, now)
        rows = [r for r in rows if r.received_at >= x_range[0]]
    latest = ReportOutcome.from_json(job.latest) or ReportOutcome()
    account = summarize(ctx.state.snapshot(ctx.clock())).jobs.get(job_id) if job.status != "ended" else None
    held = ctx.state.baseline(latest.signature) if latest.signature else None
    diagnosis = diagnose_job(ctx, job_id)
    if diagnosis is None:  # removed between the two reads
        raise NotFoundError(f"job {job_id!r} not found")
    facts, findings = diagnosis
    mfu_chart = _mfu_chart(job, rows, account, held.mfu if held else None, x_range)
    serving = (
        serving_page(job, latest, rows, ctx.settings, mfu_reason(job, latest)) if job.kind == "inference" else None
    )
    parts = waterfall_parts(facts.gpu_seconds)
    gpus = sorted(facts.gpus, key=lambda g: (g.node, g.index))
    step = sum(facts.gpu_seconds.get(c, 0.0) for c in STEP_CATEGORIES)
    compute = facts.gpu_seconds.get("compute", 0.0)
    tensor = [Part(f"{g.node}/{g.index}", g.tensor_active, "s0") for g in gpus if g.tensor_active is not None]
    return {
        "job": job,
        "latest": latest,
        "account": account,
        "mfu_reason": mfu_reason(job, latest),
        "hardware_reason": hardware_reason(job, account),
        "baseline": held,
        "vs_baseline": latest.mfu / held.mfu if held and latest.mfu is not None and held.mfu > 0 else None,
        "reports": len(rows),
        "latest_report": rows[-1] if rows else None,
        "mfu_chart": mfu_chart,
        "facts": facts,
        "serving": serving,
        "findings": findings,
        "waterfall": query.sorted(WATERFALL_TABLE, parts),
        "waterfall_unit": fmt.gpu_time_unit([*facts.gpu_seconds.values(), facts.total]),
        "findings_unit": fmt.gpu_time_unit(f.gpu_seconds for f in findings),
        "causes": {f.cause: cause(f.cause) for f in findings},
        "step_gpu_seconds": step,
        "waits_in_steps": step - compute,
        "outside_compute": facts.total - compute,
        "badges": badges(facts, gpus, serving, findings),
        "pending": pending_context(job, now),
        "q": query,
        "tables": {t.name: t for t in JOB_TABLES},
        "range_label": RANGE_LABELS.get(query.range or "", ""),
        "waterfall_chart": stacked_bar("chart-waterfall", "Where the allocated GPU-time went", parts)
        if facts.total > 0
        else None,
        "gpus": query.sorted(GPUS_TABLE, gpus),
        "tensor_chart": bar_list("chart-tensor", "Tensor-core activity per GPU", tensor, x_max=1.0) if tensor else None,
        "events": query.sorted(EVENTS_TABLE, read_events(ctx, job_id, limit=EVENTS_SHOWN)),
        "software": software_rows(
            with_node_software(job.software, (node for node, _share in ctx.state.job_shares(job_id, now)))
        ),
        "energy": energy_and_cost(ctx.state.counters, ctx.state.prices, job.job_id, job.kind),
        "collectives": collective_rows([node for node, _share in ctx.state.job_shares(job_id, now)], job_id),
        "waited_ranks": query.sorted(WAITED_TABLE, waited_rows(facts.waited_ranks)),
        "links": query.sorted(LINKS_TABLE, list(facts.links)[:LINKS_SHOWN]),
        "links_unmapped": facts.links_unmapped,
        "min_message_bytes": MIN_MESSAGE_BYTES,
        "priced": bool(ctx.state.prices),
        "money": lambda value: fmt.money(value, ctx.state.prices.currency),
        "kwh": fmt.kwh,
        "per_token": fmt.per_token,
    }


@dataclass(frozen=True, slots=True)
class CollectiveRow:
    """One process group of the job, from NCCL Inspector on its nodes (issue 61)."""

    group: str
    collective: str
    operations: int
    seconds: float
    bus_bandwidth: float | None  # bytes/s over the agents' last interval, per group
    time_ratio: float | None  # per group
    lost: int  # per group
    nodes: int


def collective_rows(nodes: list[NodeView], job_id: str) -> list[CollectiveRow]:
    """The job's groups and collectives summed over its nodes, the group's figures (bandwidth, time share, lost) on
    each of its rows; empty without Inspector data."""
    groups = {group: window for (_job, group), window in job_groups(nodes, {job_id}).items()}
    ops: dict[tuple[str, str], list[float]] = {}
    for node in nodes:
        for row in node.collectives or ():
            if row.job_id == job_id:
                held = ops.setdefault((row.group, row.collective), [0, 0.0, 0])
                held[0] += row.operations_total
                held[1] += row.seconds_total
                held[2] += 1
    return [
        CollectiveRow(
            group=group,
            collective=collective,
            operations=int(held[0]),
            seconds=held[1],
            bus_bandwidth=groups[group].bus_bandwidth,
            time_ratio=groups[group].time_ratio,
            lost=groups[group].lost,
            nodes=int(held[2]),
        )
        for (group, collective), held in sorted(ops.items())
    ]


def waited_rows(ranks: Iterable[WaitedRank]) -> list[WaitedRank]:
    """The ranks their peers wait for longest (a lag above 0: their kernels are shorter than their communicator's
    median), at most :data:`RANKS_SHOWN`; ranks that wait themselves are left out."""
    return sorted((w for w in ranks if w.lag_seconds > 0), key=lambda w: -w.lag_seconds)[:RANKS_SHOWN]


#: The fingerprint's components in the order a person reads them: the stack from the bottom (the firmware and driver
#: its nodes report first), then the rest, tags last.
_SOFTWARE_ORDER = (
    "vbios",
    "driver",
    "cuda_driver",
    "cuda",
    "rocm",
    "cudnn",
    "nccl",
    "rccl",
    "python",
    "pytorch",
    "container_image",
)


def software_rows(software: dict[str, str] | None) -> list[tuple[str, str]]:
    """The job's software fingerprint as (component, version) rows: the stack, the frameworks, the user's tags."""
    items = (software or {}).items()

    def order(item: tuple[str, str]) -> tuple[int, int, str]:
        key = item[0]
        known = _SOFTWARE_ORDER.index(key) if key in _SOFTWARE_ORDER else len(_SOFTWARE_ORDER)
        return (key.startswith("tag."), known, key)

    return sorted(items, key=order)
