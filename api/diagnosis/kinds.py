"""Which jobs a rule judges: each rule declares the job kinds it applies to, and :func:`diagnose` runs only the
rules whose kinds include the job's.

A training rule reads step time (exposed communication, data wait, bubbles, checkpoints, stragglers, a profile of
steps); a serving job has no steps, and the same figures there mean something else (a zero-token interval of a
server is an idle one, not a stall). A serving rule reads the engine's counters. A few rules judge the hardware or
the job's life (throttling, failures, start-up) and apply to both, each with advice in the kind's own terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from mfumon.api.diagnosis.facts import Finding, JobFacts
from mfumon.api.schemas._common import Kind

Check = Callable[[JobFacts], Finding | None]

#: Every job kind there is (the API's ``kind``): a rule may name only these.
KINDS: tuple[str, ...] = get_args(Kind)
TRAINING = "training"
INFERENCE = "inference"


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A rule (``check``) and the job kinds it applies to; called like the check itself."""

    check: Check
    kinds: frozenset[str]

    def __post_init__(self) -> None:
        if not self.kinds:
            raise ValueError(f"rule {self.name} applies to no job kind")
        unknown = self.kinds - set(KINDS)
        if unknown:
            raise ValueError(f"rule {self.name} names unknown job kinds {sorted(unknown)} (kinds: {', '.join(KINDS)})")

    @property
    def name(self) -> str:
        return self.check.__name__

    def applies(self, kind: str) -> bool:
        return kind in self.kinds

    def __call__(self, facts: JobFacts) -> Finding | None:
        return self.check(facts)


def applies_to(*kinds: str) -> Callable[[Check], RuleSpec]:
    """Declare the kinds a rule applies to: ``@applies_to("training")`` above its function."""

    def declare(check: Check) -> RuleSpec:
        return RuleSpec(check, frozenset(kinds))

    return declare


def busy_gpu_seconds(facts: JobFacts) -> float:
    """The GPU-seconds the job spent working: step time for training; for a serving job the serving waterfall's
    prefill, decode and recompute where the engine's view is known, else the ledger's step time (intervals with
    tokens)."""
    serving = facts.serving
    if facts.kind == INFERENCE and serving is not None and serving.waterfall:
        return sum(serving.waterfall.get(c, 0.0) for c in ("prefill", "decode", "recompute"))
    return facts.step_gpu_seconds
