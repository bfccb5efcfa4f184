"""A scheduler driver and an aggregator in memory, for the loop's tests: the aggregator answers over
``httpx.MockTransport`` as the real one does (the drain list, a node, the audit), so the real client code runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from mfumon.exporter.scheduler.remediate.aggregator import Aggregator
from mfumon.exporter.scheduler.remediate.driver import SchedulerCommandError
from mfumon.exporter.scheduler.remediate.model import REASON_PREFIX, Action, Decision, SchedulerNode


@dataclass
class FakeDriver:
    """Nodes in memory; ``failures`` makes the next commands raise; ``no_effect`` makes them do nothing."""

    nodes: dict[str, SchedulerNode]
    kind: str = "slurm"
    failures: int = 0
    no_effect: bool = False
    commands: list[tuple[str, str]] = field(default_factory=list)
    on_read: Callable[[], object] | None = None  # called (once) on the next read: another copy acts meanwhile
    lock: threading.Lock = field(default_factory=threading.Lock)

    def action_name(self, action: Action) -> str:
        return action

    def read_nodes(self) -> list[SchedulerNode]:
        with self.lock:
            result = [self.nodes[n] for n in sorted(self.nodes)]
            hook, self.on_read = self.on_read, None
        if hook is not None:
            hook()
        return result

    def _command(self, what: str, decision: Decision) -> bool:
        with self.lock:
            self.commands.append((what, decision.node))
            if self.failures > 0:
                self.failures -= 1
                raise SchedulerCommandError(f"scontrol update NodeName={decision.node} exited 1: slurm_update error")
            return not self.no_effect

    def drain(self, decision: Decision) -> None:
        if self._command("drain", decision):
            held = self.nodes[decision.node]
            self.nodes[decision.node] = replace(held, drained=True, ours=True, reason=f"{REASON_PREFIX} x")

    def resume(self, decision: Decision) -> None:
        if self._command("resume", decision):
            held = self.nodes[decision.node]
            self.nodes[decision.node] = replace(held, drained=False, ours=False, reason=None)


@dataclass
class FakeAggregator:
    """``GET /v1/nodes?unhealthy=true``, ``GET /v1/nodes/{node}``, ``GET``/``POST /v1/remediations``."""

    health: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> its "health" object
    records: list[dict[str, Any]] = field(default_factory=list)
    down: bool = False
    refuse_records: bool = False  # answer 503 to POST /v1/remediations
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, name: str, check: str = "xid", gpu: int = 3) -> None:
        reason = {"check": check, "drain": True, "meaning": "...", "gpu": gpu}
        self.health[name] = {"healthy": False, "drain": True, "reasons": [reason], "checks": {}}

    def heal(self, name: str) -> None:
        self.health[name] = {"healthy": True, "drain": False, "reasons": [], "checks": {}}

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        path, query = request.url.path, request.url.params
        with self.lock:
            if path == "/v1/nodes":
                data = [{"name": n, "health": h} for n, h in sorted(self.health.items()) if not h["healthy"]]
                return httpx.Response(200, json={"data": data, "count": len(data), "next_cursor": None})
            if path.startswith("/v1/nodes/"):
                name = path.rsplit("/", 1)[1]
                if name not in self.health:
                    return httpx.Response(404, json={"detail": "not found"})
                return httpx.Response(200, json={"name": name, "health": self.health[name]})
            if path == "/v1/remediations" and request.method == "POST":
                if self.refuse_records:
                    return httpx.Response(503, json={"detail": "database unavailable, retry later"})
                self.records.append(json.loads(request.content))
                return httpx.Response(200, json={"id": len(self.records)})
            if path == "/v1/remediations":
                since = float(query.get("since", "0"))
                rows = [r for r in self.records if r["outcome"] == query["outcome"] and r["timestamp"] >= since]
                return httpx.Response(200, json={"data": rows, "count": len(rows)})
        return httpx.Response(404, json={"detail": "no route"})

    def client(self) -> Aggregator:
        return Aggregator("http://aggregator", transport=httpx.MockTransport(self.handle))
