"""The audit record of one decision, as ``POST /v1/remediations`` takes it (field meanings are the aggregator's,
``api/schemas/remediations.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mfumon.exporter.scheduler.remediate.model import Decision, Outcome

__all__ = ["Record", "record_of"]


@dataclass(frozen=True, slots=True)
class Record:
    node: str
    scheduler: str  # slurm | kubernetes
    action: str  # drain | resume | cordon | uncordon
    reason: str  # the checks (drain), "healthy" (resume), or the rail that withheld it
    outcome: Outcome
    checks: tuple[str, ...]
    pools: tuple[str, ...]
    detail: str
    actor: str  # which copy of the loop: host:pid
    attempts: int
    timestamp: float
    failing_since: float | None = None  # a drain: since when the node was on the drain list (the loop's clock)

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "node": self.node,
            "scheduler": self.scheduler,
            "action": self.action,
            "reason": self.reason[:128],
            "outcome": self.outcome,
            "checks": list(self.checks),
            "pools": [p[:128] for p in self.pools],
            "detail": self.detail[:1000],
            "actor": self.actor[:128],
            "attempts": self.attempts,
            "timestamp": self.timestamp,
        }
        if self.failing_since is not None and self.failing_since <= self.timestamp:
            body["failing_since"] = self.failing_since
        return body


def record_of(
    decision: Decision,
    outcome: Outcome,
    *,
    scheduler: str,
    action: str,
    actor: str,
    timestamp: float,
    attempts: int = 0,
    detail: str | None = None,
    withheld: str | None = None,
) -> Record:
    """The record of ``decision`` ended with ``outcome`` (a withheld one names its rail as the reason)."""
    rail = withheld or decision.withheld
    return Record(
        node=decision.node,
        scheduler=scheduler,
        action=action,
        reason=rail if outcome == "withheld" and rail else decision.reason,
        outcome=outcome,
        checks=decision.checks,
        pools=decision.pools,
        detail=decision.detail if detail is None else detail,
        actor=actor,
        attempts=attempts,
        timestamp=timestamp,
        failing_since=decision.failing_since,
    )
