"""``mfumon report`` over several aggregators: one report with a row per cluster and a fleet row.

Each aggregator is one cluster (one database); nothing is merged on the server side. The report reads each
cluster's window with :func:`mfumon.exporter.ops.report.fetch_report`, as for one cluster, and adds them up here:
GPU-hours, the waste waterfall and cost add; goodput and MFU are weighted by each cluster's job GPU-hours (goodput is
exact so; MFU is exact when the clusters' GPUs have the same peak, and otherwise weights a GPU-hour of each alike).
A cluster that does not answer is listed with its error, never left out silently.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import yaml

from mfumon.exporter.ops.prices import Prices
from mfumon.exporter.ops.report import BELOW_BASELINE, TOP_WASTERS, Group, JobLine, Report, ReportError, fetch_report

#: Waterfall categories that no job holds: they count in GPU-hours but not in the job GPU-hours goodput is over.
NOT_JOBS = frozenset({"idle", "unreported"})
_NAMED_URL = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)=(?P<url>https?://.+)$")


@dataclass(frozen=True, slots=True)
class ClusterSource:
    """One aggregator to read: its cluster's name, URL and `read` token (None: the shared one, if any)."""

    name: str
    url: str
    token: str | None = None


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A cluster whose aggregator could not be read, and why."""

    name: str
    url: str
    error: str


@dataclass(frozen=True, slots=True)
class FleetWaster:
    cluster: str
    job: JobLine


@dataclass(frozen=True, slots=True)
class FleetReport:
    since: float
    until: float
    generated_at: float
    clusters: tuple[tuple[str, Report], ...]  # (cluster name, its report), in the order given
    unanswered: tuple[Unanswered, ...]
    fleet: Group
    top_wasters: tuple[FleetWaster, ...]
    currency: str | None = None

    @property
    def asked(self) -> int:
        return len(self.clusters) + len(self.unanswered)


def source_from_url(value: str) -> ClusterSource:
    """`--url` value: `URL` (named by its host:port) or `NAME=URL`."""
    match = _NAMED_URL.match(value)
    if match is not None:
        return ClusterSource(match.group("name"), match.group("url"))
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        raise ValueError(f"--url {value!r}: not an http(s) URL")
    return ClusterSource(parts.netloc, value)


def load_clusters(path: Path) -> list[ClusterSource]:
    """The `--clusters` file: YAML `clusters: [{name, url, token_file?}, ...]`; token files relative to it."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--clusters {path}: {exc}") from None
    entries = data.get("clusters") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"--clusters {path}: expected 'clusters:' with a list of {{name, url, token_file}}")
    sources, names = [], set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("name", "url")):
            raise ValueError(f"--clusters {path}: entry {i + 1} needs a name and a url")
        unknown = set(entry) - {"name", "url", "token_file"}
        if unknown:
            raise ValueError(f"--clusters {path}: entry {entry['name']!r} has unknown keys {sorted(unknown)}")
        if entry["name"] in names:
            raise ValueError(f"--clusters {path}: cluster {entry['name']!r} is listed twice")
        names.add(entry["name"])
        token = None
        if entry.get("token_file"):
            token_path = path.parent / str(entry["token_file"])
            try:
                token = token_path.read_text(encoding="utf-8").strip() or None
            except OSError as exc:
                raise ValueError(f"--clusters {path}: cluster {entry['name']!r}: {exc}") from None
        source_from_url(entry["url"])  # validates
        sources.append(ClusterSource(entry["name"], entry["url"], token))
    return sources


def fleet_group(groups: Sequence[Group]) -> Group:
    """The clusters' figures added up (see the module docstring for goodput and MFU)."""
    waterfall: dict[str, float] = defaultdict(float)
    for group in groups:
        for category, hours in group.waterfall:
            waterfall[category] += hours

    def job_hours(group: Group) -> float:
        return sum(h for c, h in group.waterfall if c not in NOT_JOBS)

    def weighted(values: list[tuple[float | None, float]]) -> float | None:
        known = [(v, w) for v, w in values if v is not None and w > 0]
        total = sum(w for _, w in known)
        return sum(v * w for v, w in known) / total if total > 0 else None

    costs = [g.cost for g in groups]
    return Group(
        name="fleet",
        gpu_hours=sum(g.gpu_hours for g in groups),
        waterfall=tuple(waterfall.items()),
        goodput=weighted([(g.goodput, job_hours(g)) for g in groups]),
        mfu=weighted([(g.mfu, job_hours(g)) for g in groups]),
        cost=sum(c for c in costs if c is not None) if groups and all(c is not None for c in costs) else None,
    )


def build_fleet(
    reports: Sequence[tuple[str, Report]],
    unanswered: Sequence[Unanswered],
    *,
    generated_at: float,
    top: int = TOP_WASTERS,
    currency: str | None = None,
) -> FleetReport:
    """The fleet report from each answering cluster's report. Pure."""
    wasters = [FleetWaster(name, job) for name, report in reports for job in report.top_wasters]
    wasters.sort(key=lambda w: (-w.job.wasted_gpu_hours, w.cluster, w.job.job_id))
    return FleetReport(
        since=min((r.since for _, r in reports), default=generated_at),
        until=max((r.until for _, r in reports), default=generated_at),
        generated_at=generated_at,
        clusters=tuple(reports),
        unanswered=tuple(unanswered),
        fleet=fleet_group([r.cluster for _, r in reports]),
        top_wasters=tuple(wasters[:top]),
        currency=currency,
    )


def fetch_fleet(
    sources: Sequence[ClusterSource],
    open_client: Callable[[ClusterSource], AbstractContextManager[httpx.Client]],
    *,
    since: str,
    prices: Prices | None = None,
    generated_at: float,
    top: int = TOP_WASTERS,
    below: float = BELOW_BASELINE,
) -> FleetReport:
    """Read every cluster in turn (``open_client`` gives each one's client, closed after); one that fails (down, a
    refused token, an older aggregator) is named in the report, not dropped."""
    reports: list[tuple[str, Report]] = []
    unanswered: list[Unanswered] = []
    for source in sources:
        try:
            with open_client(source) as client:
                report = fetch_report(
                    client, since=since, prices=prices, generated_at=generated_at, top=top, below=below
                )
        except ReportError as exc:
            unanswered.append(Unanswered(source.name, source.url, str(exc)))
            continue
        reports.append((source.name, report))
    return build_fleet(
        reports, unanswered, generated_at=generated_at, top=top, currency=prices.currency if prices else None
    )
