"""Regressions across software changes, found rather than looked for (issue 59): per signature, the jobs before and
after each change of one fingerprint component, compared.

For each workload signature (model, GPU model, GPU count or layout, dtype: the baselines' signature, under which
runs should reach the same MFU) and each component of the software fingerprint (``nccl``, ``driver``, ``pytorch``,
``container_image``, a user's ``tag.*`` ...), the versions are taken in the order they first appeared. For each
step ``A -> B`` the jobs of the signature on ``A`` are the *before* group and those on ``B`` the *after* group; each
job counts once, by its time-weighted MFU. A change is called only when

- each group has at least `MIN_JOBS` jobs (else: ``too_few_jobs``, and the page says how many more are needed);
- Welch's t-test rejects "same mean" at `ALPHA` (p < 0.01), which a noisy signature (a wide spread of its jobs on
  the old software) does not reach for a small drop; and
- the change is at least `MIN_EFFECT` of the old mean (2 %): a difference too small to matter is not paged on.

Then it is a ``regression`` (MFU down) or an ``improvement``. Where enough jobs on each side share every other
component's version (the user's ``tag.*`` aside), only those are compared: a driver upgrade is judged on jobs that
run the same NCCL before and after, even when other jobs moved NCCL too. Otherwise every job of each side is, and every
other component whose versions differ between the two groups is listed (``also_changed``): a change that came with
others (an image upgrade that moved NCCL and PyTorch together) is *confounded*, and the page and the alert say so
rather than blame one of them.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from mfumon.api.regressions.stats import Estimate, estimate, welch

MIN_JOBS = 3
ALPHA = 0.01
MIN_EFFECT = 0.02
#: Fingerprint entries that name an instance, not a version: never a change to compare across.
NOT_COMPONENTS = frozenset({"container_id"})

Verdict = Literal["regression", "improvement", "no_change", "too_few_jobs"]


@dataclass(frozen=True, slots=True)
class JobRun:
    """One job as the comparison sees it: its signature, when it started, its MFU, its GPU-hours, its software."""

    job_id: str
    signature: str
    started_at: float
    mfu: float
    gpu_hours: float
    software: Mapping[str, str]
    step_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class AlsoChanged:
    """Another component whose versions differ between the two groups: before -> after (each sorted, joined)."""

    component: str
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class Change:
    """One component's step from ``before`` to ``after`` within one signature, and what it did to MFU."""

    signature: str
    component: str
    before: str
    after: str
    verdict: Verdict
    jobs_before: tuple[str, ...]
    jobs_after: tuple[str, ...]  # the jobs compared on the new version (those matching the old ones, where enough)
    gpu_hours_after: float  # of every job of the signature on the new version (the affected ones)
    mfu_before: Estimate | None = None
    mfu_after: Estimate | None = None
    relative_change: float | None = None
    p_value: float | None = None
    step_seconds_before: float | None = None
    step_seconds_after: float | None = None
    also_changed: tuple[AlsoChanged, ...] = field(default=())
    affected_jobs: tuple[str, ...] = field(default=())  # every job of the signature on the new version

    @property
    def confidence(self) -> float | None:
        """1 - the p-value: how sure the test is that the means differ."""
        return None if self.p_value is None else 1.0 - self.p_value

    @property
    def noise(self) -> float | None:
        """The spread of the jobs on the old software, relative to their mean: what a change must stand out from."""
        if self.mfu_before is None or self.mfu_before.mean <= 0:
            return None
        return self.mfu_before.spread / self.mfu_before.mean

    @property
    def confounded(self) -> bool:
        return bool(self.also_changed)


def _versions_in_order(runs: Sequence[JobRun], component: str) -> list[str]:
    first_seen: dict[str, float] = {}
    for run in runs:
        version = run.software.get(component)
        if version is not None and (version not in first_seen or run.started_at < first_seen[version]):
            first_seen[version] = run.started_at
    return sorted(first_seen, key=lambda v: (first_seen[v], v))


def _also_changed(component: str, before: Sequence[JobRun], after: Sequence[JobRun]) -> tuple[AlsoChanged, ...]:
    keys = {key for run in (*before, *after) for key in run.software if not key.startswith("tag.")}
    others = sorted(keys - NOT_COMPONENTS - {component})
    out = []
    for other in others:
        old = sorted({run.software.get(other, "-") for run in before})
        new = sorted({run.software.get(other, "-") for run in after})
        if old != new:
            out.append(AlsoChanged(other, ", ".join(old), ", ".join(new)))
    return tuple(out)


def _others(run: JobRun, component: str) -> tuple[tuple[str, str], ...]:
    """The job's versions of every other component: what must match for a clean comparison (tags aside)."""
    skip = NOT_COMPONENTS | {component}
    return tuple(sorted((k, v) for k, v in run.software.items() if k not in skip and not k.startswith("tag.")))


def _matched(component: str, old: list[JobRun], new: list[JobRun]) -> tuple[list[JobRun], list[JobRun]]:
    """The jobs of each side whose other components' versions some job of the other side shares, if enough of
    them; else both sides whole."""
    old_keys, new_keys = [_others(r, component) for r in old], [_others(r, component) for r in new]
    old_set, new_set = set(old_keys), set(new_keys)
    clean_old = [r for r, key in zip(old, old_keys, strict=True) if key in new_set]
    clean_new = [r for r, key in zip(new, new_keys, strict=True) if key in old_set]
    if len(clean_old) >= MIN_JOBS and len(clean_new) >= MIN_JOBS:
        return clean_old, clean_new
    return old, new


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def compare(signature: str, component: str, before: str, after: str, runs: Sequence[JobRun]) -> Change:
    """The step ``before -> after`` of `component` among the `runs` of one signature."""
    old = [r for r in runs if r.software.get(component) == before]
    affected = [r for r in runs if r.software.get(component) == after]
    old, new = _matched(component, old, affected)
    base = {
        "signature": signature,
        "component": component,
        "before": before,
        "after": after,
        "jobs_before": tuple(r.job_id for r in old),
        "jobs_after": tuple(r.job_id for r in new),
        "gpu_hours_after": sum(r.gpu_hours for r in affected),
        "affected_jobs": tuple(r.job_id for r in affected),
        "also_changed": _also_changed(component, old, new),
        "step_seconds_before": _median(r.step_seconds for r in old),
        "step_seconds_after": _median(r.step_seconds for r in new),
    }
    if len(old) < MIN_JOBS or len(new) < MIN_JOBS:
        return Change(verdict="too_few_jobs", **base)  # type: ignore[arg-type]
    mfu_old, mfu_new = [r.mfu for r in old], [r.mfu for r in new]
    test = welch(mfu_old, mfu_new)
    before_estimate, after_estimate = estimate(mfu_old), estimate(mfu_new)
    relative = (after_estimate.mean - before_estimate.mean) / before_estimate.mean if before_estimate.mean else 0.0
    verdict: Verdict = "no_change"
    if test.p_value < ALPHA and abs(relative) >= MIN_EFFECT:
        verdict = "regression" if relative < 0 else "improvement"
    return Change(
        verdict=verdict,
        mfu_before=before_estimate,
        mfu_after=after_estimate,
        relative_change=relative,
        p_value=test.p_value,
        **base,  # type: ignore[arg-type]
    )


def find_changes(runs: Iterable[JobRun]) -> list[Change]:
    """Every component step of every signature among `runs`, in signature, component and time order."""
    by_signature: dict[str, list[JobRun]] = {}
    for run in runs:
        by_signature.setdefault(run.signature, []).append(run)
    out = []
    for signature, group in sorted(by_signature.items()):
        components = sorted({key for run in group for key in run.software} - NOT_COMPONENTS)
        for component in components:
            versions = _versions_in_order(group, component)
            for before, after in itertools.pairwise(versions):
                out.append(compare(signature, component, before, after, group))
    return out
