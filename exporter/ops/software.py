"""``mfumon report``'s software section (issue 59): the regressions and improvements ``GET /v1/regressions`` called in
the window, each with its versions, the MFU before and after, and what else changed at the same time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SoftwareChange:
    """One called change: a component's step within a signature and what it did to MFU."""

    verdict: str  # regression | improvement
    component: str
    before: str
    after: str
    signature: str
    relative_change: float
    mfu_before: float
    mfu_after: float
    confidence: float
    jobs_after: int
    gpu_hours_after: float
    also_changed: str  # "pytorch 2.5.1 -> 2.6.0; ..." or ""


@dataclass(frozen=True, slots=True)
class SoftwareSection:
    changes: tuple[SoftwareChange, ...]
    undecided: int  # steps with too few jobs to tell

    @property
    def summary(self) -> str:
        called = len(self.changes)
        regressions = sum(1 for c in self.changes if c.verdict == "regression")
        text = f"{called} software change(s) moved MFU beyond the noise ({regressions} regression(s))"
        if self.undecided:
            text += f"; {self.undecided} more had too few jobs on one side to tell"
        return text + "."


def summarize_changes(changes: Sequence[Mapping[str, Any]]) -> SoftwareSection:
    """The section from ``GET /v1/regressions``'s ``changes``: regressions first, the largest drop first."""
    called = []
    for c in changes:
        if c["verdict"] not in ("regression", "improvement"):
            continue
        also = "; ".join(f"{a['component']} {a['before']} -> {a['after']}" for a in c.get("also_changed") or ())
        called.append(
            SoftwareChange(
                verdict=c["verdict"],
                component=c["component"],
                before=c["before"],
                after=c["after"],
                signature=c["signature"],
                relative_change=float(c["relative_change"]),
                mfu_before=float(c["mfu_before"]["mean"]),
                mfu_after=float(c["mfu_after"]["mean"]),
                confidence=float(c["confidence"]),
                jobs_after=len(c["jobs_after"]),
                gpu_hours_after=float(c["gpu_hours_after"]),
                also_changed=also,
            )
        )
    called.sort(key=lambda c: (c.verdict != "regression", c.relative_change))
    undecided = sum(1 for c in changes if c["verdict"] == "too_few_jobs")
    return SoftwareSection(tuple(called), undecided)


def rows(section: SoftwareSection) -> list[list[str]]:
    """The section's table rows: verdict, component, versions, change, MFU before and after, jobs, GPU-hours, also."""
    return [
        [
            c.verdict,
            c.component,
            f"{c.before} -> {c.after}",
            f"{c.relative_change * 100:+.1f} %",
            f"{c.mfu_before * 100:.1f} %",
            f"{c.mfu_after * 100:.1f} %",
            str(c.jobs_after),
            f"{c.gpu_hours_after:.1f}",
            c.also_changed or "-",
        ]
        for c in section.changes
    ]


HEADER = ["verdict", "component", "versions", "MFU change", "before", "after", "jobs after", "GPU-h after", "also"]
