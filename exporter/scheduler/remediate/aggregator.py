"""The aggregator as ``mfumon remediate`` uses it: the drain list and node health in, the audit out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import httpx

from mfumon.exporter.scheduler.remediate.audit import Record
from mfumon.exporter.scheduler.remediate.model import NodeHealth

__all__ = ["Aggregator", "AggregatorError", "health_of"]


class AggregatorError(RuntimeError):
    """The aggregator could not be read or did not take the audit: no action is taken on missing evidence."""


def health_of(node: dict[str, Any]) -> NodeHealth | None:
    """A node of ``GET /v1/nodes`` into its health; None when the aggregator holds no health for it yet."""
    health = node.get("health")
    if not isinstance(health, dict):
        return None
    reasons = [r for r in health.get("reasons") or [] if isinstance(r, dict)]
    drains = [r for r in reasons if r.get("drain")]
    return NodeHealth(
        name=str(node["name"]),
        healthy=bool(health.get("healthy")),
        drain=bool(health.get("drain")),
        drain_checks=tuple(sorted({str(r["check"]) for r in drains if r.get("check")})),
        gpus=tuple(sorted({int(r["gpu"]) for r in drains if isinstance(r.get("gpu"), int)})),
    )


class Aggregator:
    """``GET /v1/nodes?drain=true`` and ``?unhealthy=true``, ``GET /v1/nodes/{node}``, ``/v1/remediations``."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_seconds: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"User-Agent": "mfumon-remediate"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout_seconds, transport=transport
        )

    def _get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        try:
            return self._client.get(path, params=params)
        except httpx.HTTPError as exc:
            raise AggregatorError(f"GET {path}: {exc}") from exc

    def _pages(self, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            page = self._get("/v1/nodes", {**params, "limit": 1000, **({"cursor": cursor} if cursor else {})})
            if page.status_code != 200:
                raise AggregatorError(f"GET /v1/nodes answered {page.status_code}: {page.text[:300]}")
            body = page.json()
            yield from body.get("data") or []
            cursor = body.get("next_cursor")
            if not cursor:
                return

    def read_health(self, also: Iterable[str] = ()) -> dict[str, NodeHealth]:
        """The drain list and the unhealthy nodes, plus each of ``also`` (the nodes we hold drained) that the
        aggregator knows; a node it does not know is left out (no evidence that it is healthy)."""
        found: dict[str, NodeHealth] = {}
        for node in self._pages({"unhealthy": "true"}):  # the drain list is part of it
            if (health := health_of(node)) is not None:
                found[health.name] = health
        for name in sorted(set(also) - set(found)):
            response = self._get(f"/v1/nodes/{name}")
            if response.status_code == 404:
                continue
            if response.status_code != 200:
                raise AggregatorError(f"GET /v1/nodes/{name} answered {response.status_code}")
            if (health := health_of(response.json())) is not None:
                found[health.name] = health
        return found

    def actions_done_since(self, since: float, limit: int = 1000) -> int:
        """Drains and resumes done (by any copy of the loop) since ``since``: the rate limit's count."""
        response = self._get("/v1/remediations", {"outcome": "done", "since": f"{since:.3f}", "limit": limit})
        if response.status_code != 200:
            raise AggregatorError(f"GET /v1/remediations answered {response.status_code}: {response.text[:300]}")
        return int(response.json().get("count", 0))

    def record(self, records: Sequence[Record]) -> None:
        """Store each record in the aggregator's audit (``POST /v1/remediations``)."""
        for record in records:
            try:
                response = self._client.post("/v1/remediations", json=record.as_json())
            except httpx.HTTPError as exc:
                raise AggregatorError(f"POST /v1/remediations: {exc}") from exc
            if response.status_code != 200:
                raise AggregatorError(f"POST /v1/remediations answered {response.status_code}: {response.text[:300]}")

    def close(self) -> None:
        self._client.close()
