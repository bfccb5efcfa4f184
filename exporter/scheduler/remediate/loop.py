"""One round of ``mfumon remediate``: read, decide, act (or not), record; and the kill switch.

A round reads the scheduler and the aggregator first; if either fails, it does nothing (no action on missing
evidence). Each decision is then carried out with the scheduler's state read again just before the command, so a
node that another copy (or a person) drained or resumed meanwhile is not touched twice; a command is checked by
reading the node back, retried with exponential backoff, and recorded ``failed`` when it never took effect.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mfumon.exporter.scheduler.remediate.aggregator import Aggregator, AggregatorError
from mfumon.exporter.scheduler.remediate.audit import Record, record_of
from mfumon.exporter.scheduler.remediate.decide import decide, observe
from mfumon.exporter.scheduler.remediate.driver import Driver, SchedulerCommandError
from mfumon.exporter.scheduler.remediate.model import Decision, Outcome, Policy, SchedulerNode, Seen

__all__ = ["KILL_ENV", "KillSwitch", "Remediator", "Retry"]

logger = logging.getLogger("mfumon.exporter.scheduler.remediate")

KILL_ENV = "MFUMON_REMEDIATE_STOP"
"""Set to anything but empty, 0 or false: every action is withheld (recorded as such) until it is unset."""
MAX_PENDING_RECORDS = 10_000


@dataclass(frozen=True, slots=True)
class KillSwitch:
    """Stops every action at once: the environment variable, or a file that exists (``touch`` it to stop)."""

    path: Path | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def engaged(self) -> str | None:
        """Why actions are stopped, or None."""
        value = self.environ.get(KILL_ENV, "").strip()
        if value and value.lower() not in ("0", "false", "no"):
            return f"kill switch: {KILL_ENV}={value}"
        if self.path is not None and self.path.exists():
            return f"kill switch: {self.path} exists"
        return None


@dataclass(frozen=True, slots=True)
class Retry:
    attempts: int = 3
    backoff_seconds: float = 2.0  # before the 2nd attempt; doubles each time

    def delay_seconds(self, attempt: int) -> float:
        return float(self.backoff_seconds * 2 ** (attempt - 1))


class Remediator:
    """Reads, decides and acts; holds only since when it has seen each node failing or passing (hysteresis)."""

    def __init__(
        self,
        driver: Driver,
        aggregator: Aggregator,
        *,
        policy: Policy,
        act: bool = False,
        kill_switch: KillSwitch | None = None,
        retry: Retry | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        actor: str | None = None,
    ) -> None:
        self._driver = driver
        self._aggregator = aggregator
        self.policy = policy
        self.act = act
        self._kill = kill_switch or KillSwitch()
        self._retry = retry or Retry()
        self._clock = clock
        self._sleep = sleep
        self.actor = actor or f"{socket.gethostname()}:{os.getpid()}"
        self._seen: dict[str, Seen] = {}
        self._pending: list[Record] = []  # records the aggregator did not take yet
        self.rounds = self.failed_rounds = 0

    def run_once(self) -> list[Record]:
        """One round; returns what it recorded (an empty list when it could not read both sides)."""
        now = self._clock()
        try:
            nodes = self._driver.read_nodes()
            ours = [n.name for n in nodes if n.drained and n.ours]
            health = self._aggregator.read_health(also=ours)
            done_recently = self._aggregator.actions_done_since(now - self.policy.rate_window_seconds)
        except (SchedulerCommandError, AggregatorError) as exc:
            self.failed_rounds += 1
            logger.warning("round skipped, nothing done: %s", exc)
            self._flush()
            return []
        self._seen = observe(self._seen, health, now)
        decisions = decide(
            health,
            nodes,
            self._seen,
            now=now,
            policy=self.policy,
            actions_done_recently=done_recently,
            kill_switch=self._kill.engaged(),
        )
        records = [r for d in decisions if (r := self._carry_out(d)) is not None]
        for record in records:
            log = logger.warning if record.outcome in ("failed", "withheld") else logger.info
            log("%s %s %s (%s): %s", record.outcome, record.action, record.node, record.reason, record.detail)
        self._pending = (self._pending + records)[-MAX_PENDING_RECORDS:]
        self._flush()
        self.rounds += 1
        return records

    def _flush(self) -> None:
        while self._pending:
            try:
                self._aggregator.record(self._pending[:1])
            except AggregatorError as exc:
                logger.warning("audit not stored, kept for the next round (%d waiting): %s", len(self._pending), exc)
                return
            self._pending.pop(0)

    def _record(
        self,
        decision: Decision,
        outcome: Outcome,
        *,
        attempts: int = 0,
        detail: str | None = None,
        withheld: str | None = None,
    ) -> Record:
        return record_of(
            decision,
            outcome,
            scheduler=self._driver.kind,
            action=self._driver.action_name(decision.action),
            actor=self.actor,
            timestamp=self._clock(),
            attempts=attempts,
            detail=detail,
            withheld=withheld,
        )

    def _current(self, name: str) -> SchedulerNode | None:
        return next((n for n in self._driver.read_nodes() if n.name == name), None)

    def _carry_out(self, decision: Decision) -> Record | None:
        """Act on one decision (or not): the record of what happened, or None when another copy already did it."""
        if decision.withheld is not None:
            return self._record(decision, "withheld")
        if not self.act:
            return self._record(decision, "dry_run")
        error = "not attempted"
        issued = False
        for attempt in range(1, self._retry.attempts + 1):
            if attempt > 1:
                self._sleep(self._retry.delay_seconds(attempt - 1))
            if (why := self._kill.engaged()) is not None:
                return self._record(decision, "withheld", withheld="kill_switch", detail=why, attempts=attempt - 1)
            try:
                current = self._current(decision.node)
                verdict = _before(decision, current, issued)
                if verdict == "done":
                    return self._record(decision, "done", attempts=attempt - 1) if issued else None
                if verdict != "act":
                    return self._record(decision, "withheld", withheld=verdict, detail=_why(current), attempts=0)
                issued = True
                if decision.action == "drain":
                    self._driver.drain(decision)
                else:
                    self._driver.resume(decision)
                if _before(decision, self._current(decision.node), issued) == "done":
                    return self._record(decision, "done", attempts=attempt)
                error = "the command returned, but the scheduler does not show its effect"
            except SchedulerCommandError as exc:
                error = str(exc)
            tries = f"attempt {attempt} of {self._retry.attempts}"
            logger.warning("%s %s failed, %s: %s", decision.action, decision.node, tries, error)
        return self._record(decision, "failed", detail=error, attempts=self._retry.attempts)

    def run(self, interval_seconds: float, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.run_once()
            except Exception:  # a bug in one round must not end the loop that watches the fleet
                logger.exception("round failed")
            stop.wait(max(0.0, interval_seconds - (time.monotonic() - started)))


def _before(decision: Decision, current: SchedulerNode | None, issued: bool) -> str:
    """What to do about ``decision`` given the node's state now: act, done, or the rail that forbids it."""
    if current is None:
        return "not_in_scheduler"
    if decision.action == "drain":
        if not current.drained:
            return "act"
        return "done" if current.ours else "not_ours"
    if not current.drained:
        return "done"
    return "act" if current.ours else "not_ours"


def _why(current: SchedulerNode | None) -> str:
    if current is None:
        return "the scheduler lists no such node"
    return f"changed by someone else meanwhile: {current.reason or 'no reason given'}"
