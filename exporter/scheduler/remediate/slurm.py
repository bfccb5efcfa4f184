"""Slurm for ``mfumon remediate``: nodes from ``sinfo --json``, drains and resumes with ``scontrol update``.

``sinfo --json`` shapes (checked on 22.05's openapi v0.0.38, newer data_parser shapes handled): ``state`` is a
string with ``state_flags`` beside it (22.05: ``"idle"`` + ``["DRAIN"]``) or a list holding both (23.02+:
``["IDLE", "DRAIN"]``); ``partitions`` lists every partition of the node (overlapping ones included); ``reason`` is
the text given with the drain. A drain's reason starts with ``mfumon:`` when this loop set it; anything else is a
person's (or Slurm's own: a node that stopped responding), and is left alone.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from mfumon.exporter.scheduler.remediate.driver import SchedulerCommandError
from mfumon.exporter.scheduler.remediate.model import REASON_PREFIX, Action, Decision, SchedulerNode

__all__ = ["SlurmDriver", "parse_sinfo", "slurm_reason"]

#: States and flags that keep new jobs off a node.
_OUT = frozenset({"DRAIN", "DRAINED", "DRAINING", "DOWN", "FAIL", "FAILING", "MAINT", "REBOOT_REQUESTED"})
MAX_REASON_CHARS = 200


def slurm_reason(decision: Decision) -> str:
    """``mfumon: xid,responsive (GPU 3,5)``: our prefix, the failing checks, the GPUs."""
    gpus = f" (GPU {','.join(str(g) for g in decision.gpus)})" if decision.gpus else ""
    return f"{REASON_PREFIX} {decision.reason}{gpus}"[:MAX_REASON_CHARS]


def _states(record: Mapping[str, Any]) -> set[str]:
    state = record.get("state")
    states = {state} if isinstance(state, str) else set(state or ())
    states |= set(record.get("state_flags") or ())
    return {str(s).upper() for s in states}


def parse_sinfo(document: Mapping[str, Any]) -> list[SchedulerNode]:
    """``sinfo --json`` into scheduler nodes (one per node name)."""
    nodes: dict[str, SchedulerNode] = {}
    for record in document.get("nodes") or []:
        name = str(record.get("name") or "")
        if not name:
            continue
        reason = str(record.get("reason") or "").strip() or None
        drained = bool(_states(record) & _OUT)
        partitions = tuple(sorted({str(p) for p in record.get("partitions") or () if p}))
        ours = drained and reason is not None and reason.startswith(REASON_PREFIX)
        nodes[name] = SchedulerNode(name=name, pools=partitions, drained=drained, ours=ours, reason=reason)
    return [nodes[n] for n in sorted(nodes)]


class SlurmDriver:
    """Runs ``sinfo`` and ``scontrol`` (with ``SLURM_CONF`` and the rest of the environment as given)."""

    kind = "slurm"

    def __init__(
        self,
        *,
        sinfo: Sequence[str] = ("sinfo", "--json"),
        scontrol: str = "scontrol",
        env: Mapping[str, str] | None = None,
        timeout_seconds: float = 60.0,
    ) -> None:
        self._sinfo = tuple(sinfo)
        self._scontrol = scontrol
        self._env = dict(env) if env is not None else None
        self._timeout_seconds = timeout_seconds

    def action_name(self, action: Action) -> str:
        return action

    def _run(self, command: Sequence[str]) -> str:
        try:
            done = subprocess.run(
                list(command), capture_output=True, text=True, timeout=self._timeout_seconds, env=self._env, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SchedulerCommandError(f"{command[0]} failed: {exc}") from exc
        if done.returncode != 0:
            message = (done.stderr.strip().splitlines() or [""])[-1]
            raise SchedulerCommandError(f"{' '.join(command[:3])} exited {done.returncode}: {message}")
        return done.stdout

    def read_nodes(self) -> list[SchedulerNode]:
        try:
            document = json.loads(self._run(self._sinfo))
        except ValueError as exc:
            raise SchedulerCommandError(f"{self._sinfo[0]} printed no JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise SchedulerCommandError(f"{self._sinfo[0]} printed JSON that is not an object")
        return parse_sinfo(document)

    def drain(self, decision: Decision) -> None:
        reason = slurm_reason(decision)
        self._run((self._scontrol, "update", f"NodeName={decision.node}", "State=DRAIN", f"Reason={reason}"))

    def resume(self, decision: Decision) -> None:
        self._run((self._scontrol, "update", f"NodeName={decision.node}", "State=RESUME"))
