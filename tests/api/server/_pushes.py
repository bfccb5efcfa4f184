"""What the two tests of the node push's doors share: the tokens, the limits, the self-metrics series compared, and
push bodies (``test_fast_path.py``: the fast door on the ASGI scope; ``test_in_place.py``: in the server's protocol)."""

from __future__ import annotations

import json
from typing import Any

from tests.utils.factories import node_sample

TOKENS = """\
exporter-secret  name=exporters scopes=nodes
jobs-secret      name=jobs      scopes=jobs
"""
GOOD = {"content-type": "application/json", "authorization": "Bearer exporter-secret"}
BODY_TIMEOUT_S = 0.3
LIMITS = {
    "MAX_GPUS_PER_NODE": 2,
    "MAX_BODY_BYTES": 4096,
    "MAX_NODES": 3,
    "AUDIT_LOG": True,
    "BODY_TIMEOUT_SECONDS": BODY_TIMEOUT_S,
}
SELF_SERIES = (
    "mfumon_ingest_requests_total",
    "mfumon_token_writes_total",
    "mfumon_ingest_refused_total",
    "mfumon_ingest_gpu_samples_total",
    "mfumon_read_requests_rejected_total",
    "mfumon_http_connections_closed_total",
)


def push_body(n: int = 2, timestamp: float | None = None, **counters: Any) -> bytes:
    sample = node_sample(n, **counters)
    if timestamp is not None:
        sample["timestamp"] = timestamp
    return json.dumps(sample).encode()


def push_with_gpus(gpus: list[Any]) -> bytes:
    return json.dumps({**node_sample(2), "gpus": gpus}).encode()
