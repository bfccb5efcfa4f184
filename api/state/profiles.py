"""A job's latest profile as figures: the ranks' summaries added up, per parallelism, and the ranks that wait.

Each profiled rank sends its own summary (``POST /v1/jobs/{id}/profiles``); the job's figures are the device-time
totals over those ranks, so a ratio is Σ seconds ÷ Σ device span. They live on the job row (``jobs.profile``) so that
every replica renders the metrics and the diagnosis reads them without a query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import median
from typing import Any

GROUPS: tuple[str, ...] = ("tp", "pp", "dp", "ep", "cp", "other")
#: Ranks named at most among those waiting longest in communication.
_NAMED_RANKS = 8


@dataclass(frozen=True, slots=True)
class GroupFigures:
    group: str
    comm_ratio: float
    exposed_comm_ratio: float
    top_collective: str | None = None  # the collective with most exposed time in this group


@dataclass(frozen=True, slots=True)
class ProfileFigures:
    """The job-wide figures of one profile (ratios of the profiled ranks' device time)."""

    profile_id: int
    captured_at: float
    ranks: int
    steps: int
    comm_ratio: float
    exposed_comm_ratio: float
    idle_ratio: float
    tensor_core_ratio: float | None
    groups: tuple[GroupFigures, ...]
    # Ranks whose communication takes longest (they wait for a slower peer or link), and the median over ranks.
    waiting_ranks: tuple[tuple[int, float], ...] = ()
    median_rank_comm_ratio: float | None = None
    least_comm_rank: tuple[int, float] | None = None  # the rank that waits least: the one the others wait for
    top_kernels: tuple[tuple[str, float], ...] = ()  # (name, share of compute time), the largest first

    def group(self, name: str) -> GroupFigures | None:
        return next((g for g in self.groups if g.group == name), None)

    def as_json(self) -> dict[str, Any]:
        return {
            "profile_id": self.profile_id,
            "captured_at": self.captured_at,
            "ranks": self.ranks,
            "steps": self.steps,
            "comm_ratio": self.comm_ratio,
            "exposed_comm_ratio": self.exposed_comm_ratio,
            "idle_ratio": self.idle_ratio,
            "tensor_core_ratio": self.tensor_core_ratio,
            "groups": [
                {
                    "group": g.group,
                    "comm_ratio": g.comm_ratio,
                    "exposed_comm_ratio": g.exposed_comm_ratio,
                    "top_collective": g.top_collective,
                }
                for g in self.groups
            ],
            "waiting_ranks": [[rank, ratio] for rank, ratio in self.waiting_ranks],
            "median_rank_comm_ratio": self.median_rank_comm_ratio,
            "least_comm_rank": None if self.least_comm_rank is None else list(self.least_comm_rank),
            "top_kernels": [[name, share] for name, share in self.top_kernels],
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any] | None) -> ProfileFigures | None:
        if not stored:
            return None
        return cls(
            profile_id=int(stored["profile_id"]),
            captured_at=float(stored["captured_at"]),
            ranks=int(stored.get("ranks", 0)),
            steps=int(stored.get("steps", 0)),
            comm_ratio=float(stored["comm_ratio"]),
            exposed_comm_ratio=float(stored["exposed_comm_ratio"]),
            idle_ratio=float(stored["idle_ratio"]),
            tensor_core_ratio=None if stored.get("tensor_core_ratio") is None else float(stored["tensor_core_ratio"]),
            groups=tuple(
                GroupFigures(
                    str(g["group"]), float(g["comm_ratio"]), float(g["exposed_comm_ratio"]), g.get("top_collective")
                )
                for g in stored.get("groups", ())
            ),
            waiting_ranks=tuple((int(r), float(v)) for r, v in stored.get("waiting_ranks", ())),
            median_rank_comm_ratio=None
            if stored.get("median_rank_comm_ratio") is None
            else float(stored["median_rank_comm_ratio"]),
            top_kernels=tuple((str(n), float(s)) for n, s in stored.get("top_kernels", ())),
            least_comm_rank=None
            if not stored.get("least_comm_rank")
            else (int(stored["least_comm_rank"][0]), float(stored["least_comm_rank"][1])),
        )


def combine(profile_id: int, captured_at: float, summaries: Iterable[Mapping[str, Any]]) -> ProfileFigures | None:
    """The job's figures over the ranks' summaries (the bodies of ``POST .../profiles``); None without device time."""
    ranks = [s for s in summaries if float(s.get("span_seconds") or 0) > 0]
    span = sum(float(s["span_seconds"]) for s in ranks)
    if span <= 0:
        return None
    comm: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
    exposed: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
    collective_exposed: dict[tuple[str, str], float] = {}
    for summary in ranks:
        for g in summary.get("groups", ()):
            comm[g["group"]] += float(g["comm_seconds"])
            exposed[g["group"]] += float(g["exposed_seconds"])
        for c in summary.get("collectives", ()):
            key = (c["group"], c["collective"])
            collective_exposed[key] = collective_exposed.get(key, 0.0) + float(c["exposed_seconds"])
    groups = tuple(
        GroupFigures(group, comm[group] / span, exposed[group] / span, _top_collective(group, collective_exposed))
        for group in GROUPS
    )
    rank_comm = sorted(
        ((int(s["rank"]), float(s["comm_seconds"]) / float(s["span_seconds"])) for s in ranks), key=lambda r: -r[1]
    )
    tensor = [
        (float(s["tensor_core_ratio"]), float(s["compute_seconds"]))
        for s in ranks
        if s.get("tensor_core_ratio") is not None
    ]
    compute = sum(weight for _, weight in tensor)
    return ProfileFigures(
        profile_id=profile_id,
        captured_at=captured_at,
        ranks=len(ranks),
        steps=max((len(s.get("steps", ())) for s in ranks), default=0),
        comm_ratio=sum(float(s["comm_seconds"]) for s in ranks) / span,
        exposed_comm_ratio=sum(float(s["exposed_comm_seconds"]) for s in ranks) / span,
        idle_ratio=sum(float(s["idle_seconds"]) for s in ranks) / span,
        tensor_core_ratio=sum(r * w for r, w in tensor) / compute if compute > 0 else None,
        groups=groups,
        waiting_ranks=tuple(rank_comm[:_NAMED_RANKS]),
        median_rank_comm_ratio=median(r for _, r in rank_comm) if rank_comm else None,
        least_comm_rank=rank_comm[-1] if rank_comm else None,
        top_kernels=_top_kernels(ranks),
    )


def _top_collective(group: str, exposed: Mapping[tuple[str, str], float]) -> str | None:
    mine = [(seconds, name) for (g, name), seconds in exposed.items() if g == group and seconds > 0]
    return max(mine)[1] if mine else None


def _top_kernels(ranks: list[Mapping[str, Any]]) -> tuple[tuple[str, float], ...]:
    compute = sum(float(s["compute_seconds"]) for s in ranks)
    if compute <= 0:
        return ()
    seconds: dict[str, float] = {}
    for summary in ranks:
        for k in summary.get("top_kernels", ()):
            seconds[k["name"]] = seconds.get(k["name"], 0.0) + float(k["seconds"])
    ranked = sorted(seconds.items(), key=lambda item: -item[1])[:5]
    return tuple((name, s / compute) for name, s in ranked)
