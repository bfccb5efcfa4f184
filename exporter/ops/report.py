"""What ``mfumon report`` says about a window, computed from the aggregator's JSON API.

Sources: ``GET /v1/usage`` (the window's waterfall, goodput, MFU and ends per cluster, pool and team, from the
durable hourly counters), ``GET /v1/jobs`` (every job's waterfall, baseline and failures) and, when prices are set,
``GET /v1/nodes`` (which devices each pool has, to price its GPU-hours), and ``GET /v1/remediations`` (what
``mfumon remediate`` did, :mod:`mfumon.exporter.ops.remediation`), and ``GET /v1/regressions`` (software changes that
moved MFU, :mod:`mfumon.exporter.ops.software`). A job counts in the window when it ran
in it (not ended before it starts); its figures are its lifetime's, since a job's waterfall is kept whole.

A job's *waste* is its allocated GPU-hours outside ``compute``: start-up, checkpoints, evals, work lost to failures,
stalls, data waits, exposed communication and pipeline bubbles (the waterfall's other categories).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from mfumon.exporter.ops.prices import Prices
from mfumon.exporter.ops.remediation import Remediation, summarize_remediations
from mfumon.exporter.ops.software import SoftwareSection, summarize_changes
from mfumon.exporter.ops.text import BLANK, bounds, hours, name, pct

HOUR = 3600.0
COMPUTE = "compute"
#: A job below this fraction of its baseline is listed (the MfumonMFUBelowBaseline alert's threshold).
BELOW_BASELINE = 0.8
TOP_WASTERS = 10
_PAGE = 1000


class ReportError(Exception):
    """The aggregator could not be read, or answered something this report cannot use."""


@dataclass(frozen=True, slots=True)
class Group:
    """The cluster, a pool or a team over the window."""

    name: str | None
    gpu_hours: float
    waterfall: tuple[tuple[str, float], ...]  # (category, GPU-hours), in the API's order
    goodput: float | None
    mfu: float | None
    cost: float | None = None

    def hours(self, category: str) -> float:
        return sum(h for c, h in self.waterfall if c == category)

    def share(self, category: str) -> float:
        return self.hours(category) / self.gpu_hours if self.gpu_hours > 0 else 0.0

    @property
    def biggest_waste(self) -> tuple[str, float] | None:
        """The category outside compute (idle included) holding most GPU-hours; None when there is none."""
        waste = [(c, h) for c, h in self.waterfall if c != COMPUTE and h > 0]
        return max(waste, key=lambda item: item[1]) if waste else None


@dataclass(frozen=True, slots=True)
class JobLine:
    """One job that ran in the window, as the report lists it."""

    job_id: str
    name: str | None
    kind: str
    status: str
    team: str | None
    pool: str | None
    device: str | None
    num_gpus: int | None
    gpu_hours: float
    waterfall: tuple[tuple[str, float], ...]
    goodput: float | None
    mfu: float | None  # the latest reported MFU
    lifetime_mfu: float | None
    baseline_mfu: float | None
    vs_baseline: float | None
    failures: int
    restarts: int
    outcome: str | None
    exit_code: int | None
    cost_per_gpu_hour: float | None = None

    def hours(self, category: str) -> float:
        return sum(h for c, h in self.waterfall if c == category)

    @property
    def wasted_gpu_hours(self) -> float:
        return sum(h for c, h in self.waterfall if c != COMPUTE)

    @property
    def biggest_waste(self) -> tuple[str, float] | None:
        waste = [(c, h) for c, h in self.waterfall if c != COMPUTE and h > 0]
        return max(waste, key=lambda item: item[1]) if waste else None

    @property
    def cost(self) -> float | None:
        return None if self.cost_per_gpu_hour is None else self.gpu_hours * self.cost_per_gpu_hour

    @property
    def wasted_cost(self) -> float | None:
        return None if self.cost_per_gpu_hour is None else self.wasted_gpu_hours * self.cost_per_gpu_hour


@dataclass(frozen=True, slots=True)
class ServingLine:
    """A serving job that ran in the window: SLO goodput as bounds, its targets, and where its GPU-hours went."""

    job_id: str
    team: str | None
    pool: str | None
    engine: str | None
    requests_per_second: float | None
    goodput: float | None  # at least this share met both targets (the newest 5-minute window)
    goodput_upper: float | None
    objective: float | None
    ttft_seconds: float | None
    tpot_seconds: float | None
    reason: str | None  # why there is no goodput
    gpu_hours: float
    waterfall: tuple[tuple[str, float], ...]  # serving categories, GPU-hours

    def share(self, category: str) -> float | None:
        hours = sum(h for c, h in self.waterfall if c == category)
        return hours / self.gpu_hours if self.gpu_hours > 0 else None

    def cells(self) -> list[str]:
        """The report's columns for this job (text.serving_columns), as plain text."""
        return [
            self.job_id,
            name(self.team, ""),
            name(self.engine, ""),
            BLANK if self.requests_per_second is None else f"{self.requests_per_second:.2f}",
            bounds(self.goodput, self.goodput_upper, self.reason),
            BLANK if self.ttft_seconds is None else f"{self.ttft_seconds:g} s / {self.tpot_seconds:g} s",
            pct(self.objective),
            "yes" if self.below_objective else "",
            hours(self.gpu_hours),
            pct(self.share("idle")),
            pct(self.share("down")),
        ]

    @property
    def below_objective(self) -> bool:
        """Certainly below its objective: even the upper bound is."""
        return self.goodput_upper is not None and self.objective is not None and self.goodput_upper < self.objective


def serving_line(job: Mapping[str, Any]) -> ServingLine | None:
    """A serving job's line; None for training jobs and serving jobs without a serving waterfall."""
    if job.get("kind") != "inference" or job.get("serving_waterfall") is None:
        return None
    serving = job.get("serving") or {}
    slo = serving.get("slo") or {}
    good = serving.get("slo_goodput") or {}
    waterfall = _waterfall(job.get("serving_waterfall"))
    return ServingLine(
        job_id=job["job_id"],
        team=job.get("team"),
        pool=job.get("pool"),
        engine=serving.get("engine"),
        requests_per_second=serving.get("requests_per_second"),
        goodput=good.get("ratio"),
        goodput_upper=good.get("upper_ratio"),
        objective=slo.get("objective_ratio"),
        ttft_seconds=slo.get("ttft_seconds"),
        tpot_seconds=slo.get("tpot_seconds"),
        reason=good.get("reason"),
        gpu_hours=sum(h for _, h in waterfall),
        waterfall=waterfall,
    )


@dataclass(frozen=True, slots=True)
class Report:
    url: str
    since: float
    until: float
    generated_at: float
    cluster: Group
    pools: tuple[Group, ...]
    teams: tuple[Group, ...]
    jobs_in_window: int
    top_wasters: tuple[JobLine, ...]
    below_baseline: tuple[JobLine, ...]
    failed_jobs: tuple[JobLine, ...]
    ends: Mapping[str, Mapping[str, int]]  # kind -> outcome -> jobs ended in the window
    below_baseline_threshold: float = BELOW_BASELINE
    currency: str | None = None  # set when prices are: the report then has cost columns
    unpriced: tuple[str, ...] = field(default=())  # devices seen with no price (their costs are left blank)
    remediation: Remediation | None = None  # None: the aggregator has no remediation audit (older)
    serving: tuple[ServingLine, ...] = field(default=())  # serving jobs, furthest below their objective first
    software: SoftwareSection | None = None  # None: the aggregator has no software comparison (older)

    @property
    def failures(self) -> int:
        return sum(n for outcomes in self.ends.values() for o, n in outcomes.items() if o == "failure")


def _waterfall(entries: Sequence[Mapping[str, Any]] | None) -> tuple[tuple[str, float], ...]:
    return tuple((str(e["category"]), float(e["gpu_seconds"]) / HOUR) for e in entries or ())


def _group(data: Mapping[str, Any], cost_per_gpu_hour: float | None) -> Group:
    hours = float(data["total_gpu_seconds"]) / HOUR
    return Group(
        name=data.get("name"),
        gpu_hours=hours,
        waterfall=_waterfall(data.get("waterfall")),
        goodput=data.get("goodput_ratio"),
        mfu=data.get("mfu"),
        cost=None if cost_per_gpu_hour is None else hours * cost_per_gpu_hour,
    )


def ran_in(job: Mapping[str, Any], since: float, until: float) -> bool:
    """Whether the job held GPUs at some time in ``[since, until)``."""
    ended, started = job.get("ended_at"), job.get("started_at") or job.get("created_at")
    if ended is not None and ended < since:
        return False
    return started is None or started < until


def job_line(job: Mapping[str, Any], prices: Prices) -> JobLine:
    summary = job.get("summary") or {}
    latest = job.get("latest") or {}
    device = latest.get("device") or summary.get("device")
    waterfall = job.get("waterfall") or summary.get("waterfall")
    return JobLine(
        job_id=job["job_id"],
        name=job.get("name"),
        kind=job.get("kind", "training"),
        status=job.get("status", ""),
        team=job.get("team"),
        pool=job.get("pool") or summary.get("pool"),
        device=device,
        num_gpus=job.get("num_gpus"),
        gpu_hours=float(job.get("total_gpu_seconds") or summary.get("total_gpu_seconds") or 0.0) / HOUR,
        waterfall=_waterfall(waterfall),
        goodput=job.get("goodput_ratio"),
        mfu=latest.get("mfu"),
        lifetime_mfu=job.get("lifetime_mfu"),
        baseline_mfu=job.get("baseline_mfu"),
        vs_baseline=job.get("mfu_vs_baseline"),
        failures=int(job.get("failures") or 0),
        restarts=int(job.get("restarts") or 0),
        outcome=job.get("outcome"),
        exit_code=job.get("exit_code"),
        cost_per_gpu_hour=prices.of(device) if prices else None,
    )


def build_report(
    *,
    url: str,
    usage: Mapping[str, Any],
    jobs: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]] = (),
    prices: Prices | None = None,
    generated_at: float,
    top: int = TOP_WASTERS,
    below: float = BELOW_BASELINE,
    remediations: Sequence[Mapping[str, Any]] | None = None,
    software_changes: Sequence[Mapping[str, Any]] | None = None,
) -> Report:
    """The report of the window ``usage`` covers. Pure: the inputs are the API's JSON answers."""
    prices = prices or Prices()
    since, until = float(usage["since"]), float(usage["until"])
    lines = [job_line(j, prices) for j in jobs if ran_in(j, since, until)]
    lines = [j for j in lines if j.gpu_hours > 0 or j.vs_baseline is not None]

    # Device mixes, to price GPU-hours that the counters do not split by device: a pool's (the cluster's) GPUs as
    # the exporters report them now, else the devices of its jobs in the window (by GPU-hours); a team's jobs'.
    CLUSTER = "\0cluster"
    node_mix: dict[str | None, dict[str | None, float]] = defaultdict(lambda: defaultdict(float))
    for node in nodes:
        for gpu in node.get("gpus") or ():
            node_mix[node.get("pool")][gpu.get("device")] += 1
            node_mix[CLUSTER][gpu.get("device")] += 1
    job_mix: dict[tuple[str, str | None], dict[str | None, float]] = defaultdict(lambda: defaultdict(float))
    for line in lines:
        for key in (("team", line.team), ("pool", line.pool), ("cluster", None)):
            job_mix[key][line.device] += line.gpu_hours

    def price(scope: str, name: str | None) -> float | None:
        if not prices:
            return None
        mix = node_mix.get(CLUSTER if scope == "cluster" else name) if scope != "team" else None
        return prices.of_mix(mix or job_mix.get((scope, name)) or {})

    devices = {d for mix in node_mix.values() for d in mix} | {j.device for j in lines}
    unpriced = sorted(str(d) for d in devices if prices and prices.of(d) is None)
    ends: dict[str, dict[str, int]] = defaultdict(dict)
    for end in usage.get("ends") or ():
        ends[str(end["kind"])][str(end["outcome"])] = round(float(end["count"]))
    return Report(
        url=url,
        since=since,
        until=until,
        generated_at=generated_at,
        cluster=_group(usage["cluster"], price("cluster", None)),
        pools=tuple(_group(p, price("pool", p["name"])) for p in usage.get("pools") or ()),
        teams=tuple(_group(t, price("team", t["name"])) for t in usage.get("teams") or ()),
        jobs_in_window=len(lines),
        top_wasters=tuple(sorted((j for j in lines if j.wasted_gpu_hours > 0), key=_waste_order)[:top]),
        below_baseline=tuple(
            sorted((j for j in lines if j.vs_baseline is not None and j.vs_baseline < below), key=_baseline_order)
        ),
        failed_jobs=tuple(sorted((j for j in lines if j.failures > 0), key=lambda j: (-j.failures, j.job_id))),
        ends={kind: dict(sorted(outcomes.items())) for kind, outcomes in sorted(ends.items())},
        below_baseline_threshold=below,
        currency=prices.currency if prices else None,
        unpriced=tuple(unpriced),
        remediation=summarize_remediations(remediations) if remediations is not None else None,
        serving=tuple(sorted(_serving_lines(jobs, since, until), key=_serving_order)),
        software=summarize_changes(software_changes) if software_changes is not None else None,
    )


def _serving_lines(jobs: Sequence[Mapping[str, Any]], since: float, until: float) -> Iterator[ServingLine]:
    for job in jobs:
        if ran_in(job, since, until) and (served := serving_line(job)) is not None:
            yield served


def _serving_order(line: ServingLine) -> tuple[float, str]:
    return (line.goodput_upper if line.goodput_upper is not None else 2.0, line.job_id)


def _waste_order(job: JobLine) -> tuple[float, str]:
    return (-job.wasted_gpu_hours, job.job_id)


def _baseline_order(job: JobLine) -> tuple[float, str]:
    return (job.vs_baseline if job.vs_baseline is not None else 1.0, job.job_id)


# --- reading the aggregator ---------------------------------------------------------------------------------------


def _get(client: httpx.Client, path: str, params: Mapping[str, Any]) -> Any:
    try:
        response = client.get(path, params=params)
    except httpx.HTTPError as exc:
        raise ReportError(f"cannot reach the aggregator at {client.base_url}: {exc}") from None
    if response.status_code in (401, 403):
        raise ReportError(f"GET {path}: {response.status_code}: this aggregator needs a token with the 'read' scope")
    if response.status_code == 404 and path == "/v1/usage":
        raise ReportError("GET /v1/usage: 404: this aggregator is older than mfumon report (no usage endpoint)")
    if response.status_code >= 400:
        raise ReportError(f"GET {path}: {response.status_code}: {_detail(response)}")
    try:
        return response.json()
    except ValueError:
        raise ReportError(f"GET {path}: the answer is not JSON") from None


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:200]
    if isinstance(detail, list):
        return "; ".join(f"{d.get('field') or '.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail)
    return str(detail)


def _pages(client: httpx.Client, path: str) -> Iterator[Mapping[str, Any]]:
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": _PAGE}
        if cursor:
            params["cursor"] = cursor
        page = _get(client, path, params)
        yield from page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return


def fetch_report(
    client: httpx.Client,
    *,
    since: str,
    prices: Prices | None = None,
    generated_at: float,
    top: int = TOP_WASTERS,
    below: float = BELOW_BASELINE,
) -> Report:
    """Read the window ``since`` (``7d``, ``24h`` or Unix seconds) from the aggregator behind ``client``."""
    usage = _get(client, "/v1/usage", {"since": since})
    jobs = list(_pages(client, "/v1/jobs"))
    nodes = list(_pages(client, "/v1/nodes")) if prices else []
    remediations = _remediations(client, since=float(usage["since"]))
    software_changes = _software_changes(client, since=float(usage["since"]))
    return build_report(
        url=str(client.base_url),
        usage=usage,
        jobs=jobs,
        nodes=nodes,
        prices=prices,
        generated_at=generated_at,
        top=top,
        below=below,
        remediations=remediations,
        software_changes=software_changes,
    )


def _software_changes(client: httpx.Client, *, since: float) -> list[Mapping[str, Any]] | None:
    """The window's software changes (``GET /v1/regressions``); None from an aggregator without the comparison."""
    return _optional_list(client, "/v1/regressions", {"since": since}, key="changes")


def _remediations(client: httpx.Client, *, since: float) -> list[Mapping[str, Any]] | None:
    """The remediation decisions of the window (the newest 1000); None from an aggregator without the audit."""
    return _optional_list(client, "/v1/remediations", {"since": since, "limit": 1000}, key="data")


def _optional_list(
    client: httpx.Client, path: str, params: Mapping[str, Any], *, key: str
) -> list[Mapping[str, Any]] | None:
    """The list under `key` of ``GET path``, or None where an older aggregator has no such route (404)."""
    try:
        response = client.get(path, params=params)
    except httpx.HTTPError as exc:
        raise ReportError(f"cannot reach the aggregator at {client.base_url}: {exc}") from None
    if response.status_code == 404:
        return None
    if response.status_code >= 400:
        raise ReportError(f"GET {path}: {response.status_code}: {_detail(response)}")
    return list(response.json()[key])
