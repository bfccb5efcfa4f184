"""The report's remediation section: what ``mfumon remediate`` did in the window, what its rails withheld, and what
its drains cost and saved in GPU-hours, from ``GET /v1/remediations`` (field meanings are the aggregator's,
``api/schemas/remediations.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mfumon.exporter.ops.text import hours

__all__ = ["Remediation", "summarize_remediations", "summary_line"]

_OUT = frozenset({"drain", "cordon"})


@dataclass(frozen=True, slots=True)
class Remediation:
    """The loop's decisions recorded in the window (a dry-run or withheld decision repeating is one, over rounds)."""

    actions: tuple[tuple[str, str, int], ...]  # (action, outcome, decisions), by action then outcome
    withheld: tuple[tuple[str, int, int], ...]  # (rail, decisions, rounds), most decisions first
    drains: int  # drains and cordons done
    drained_gpu_hours: float  # GPU-hours those drains kept out of scheduling (to their resume, or now)
    jobs_gpu_hours_before_drain: float  # the drained nodes' jobs' GPU-hours from the fault to the drain
    still_out: int  # of the drains, nodes not resumed yet

    @property
    def empty(self) -> bool:
        return not self.actions


def _number(row: Mapping[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def summarize_remediations(rows: Sequence[Mapping[str, Any]]) -> Remediation:
    """The section from the API's rows (one page, newest first)."""
    actions: Counter[tuple[str, str]] = Counter()
    withheld: Counter[str] = Counter()
    rounds: Counter[str] = Counter()
    drains = still_out = 0
    drained = before = 0.0
    for row in rows:
        action, outcome = str(row.get("action")), str(row.get("outcome"))
        actions[(action, outcome)] += 1
        if outcome == "withheld":
            withheld[str(row.get("reason"))] += 1
            rounds[str(row.get("reason"))] += int(_number(row, "repeats")) or 1
        if action in _OUT and outcome == "done":
            drains += 1
            still_out += row.get("resumed_at") is None
            drained += _number(row, "drained_gpu_hours")
            before += _number(row, "jobs_gpu_hours_before_drain")
    return Remediation(
        actions=tuple((a, o, n) for (a, o), n in sorted(actions.items())),
        withheld=tuple((rail, n, rounds[rail]) for rail, n in sorted(withheld.items(), key=lambda i: (-i[1], i[0]))),
        drains=drains,
        drained_gpu_hours=drained,
        jobs_gpu_hours_before_drain=before,
        still_out=still_out,
    )


def summary_line(section: Remediation) -> str:
    """One sentence: the drains, the capacity they took and the jobs' GPU-hours lost before them (plain text)."""
    if section.empty:
        return "mfumon remediate recorded nothing in this window."
    out = f" ({section.still_out} still out)" if section.still_out else ""
    return (
        f"{section.drains} drains done{out}: {hours(section.drained_gpu_hours)} GPU-hours held out of scheduling "
        f"(the capacity they cost); the drained nodes' jobs ran {hours(section.jobs_gpu_hours_before_drain)} "
        "GPU-hours on them between the fault and the drain (stalled or lost: what acting sooner saves)."
    )
