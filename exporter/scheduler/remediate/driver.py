"""What a scheduler driver does for ``mfumon remediate``, and its one error type."""

from __future__ import annotations

from typing import Protocol

from mfumon.exporter.scheduler.remediate.model import Action, Decision, SchedulerNode

__all__ = ["Driver", "SchedulerCommandError"]


class SchedulerCommandError(RuntimeError):
    """The scheduler could not be read, or refused or failed a command: retried, reported, never assumed done."""


class Driver(Protocol):
    """Reads the scheduler's nodes and drains or resumes one; every method may raise :class:`SchedulerCommandError`."""

    kind: str  # "slurm" | "kubernetes": the audit's scheduler

    def action_name(self, action: Action) -> str:
        """The audit's name of an action on this scheduler: drain/resume (Slurm), cordon/uncordon (Kubernetes)."""
        ...

    def read_nodes(self) -> list[SchedulerNode]:
        """Every node the scheduler lists, with its pools and whether (and by whom) it is drained."""
        ...

    def drain(self, decision: Decision) -> None:
        """Take the node out of scheduling with our reason."""
        ...

    def resume(self, decision: Decision) -> None:
        """Give the node back to the scheduler, removing our reason."""
        ...
