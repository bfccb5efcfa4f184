"""Request bodies for tests: realistic defaults, overridable per test; and a node's view built from one."""

from __future__ import annotations

import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.views import CollectiveRankView, CollectiveView, NodeView, build_node_view, gpu_views
from mfumon.mfu._mfu import default_peak_table

LLAMA_7B: dict[str, Any] = {"params": 6.74e9, "layers": 32, "heads": 32, "head_dim": 128, "seq_len": 4096}


def report(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "tokens_per_second": 25_000.0,
        "num_gpus": 8,
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "model": dict(LLAMA_7B),
    }
    body.update(overrides)
    return body


def gpu(index: int, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "uuid": f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000",
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "utilization": 0.95,
        "sm_active": 0.8,
        "tensor_active": 0.45,
        "memory_used_bytes": 60e9,
        "memory_total_bytes": 80e9,
        "power_watts": 550.0,
        "temperature_celsius": 61.0,
    }
    body.update(overrides)
    return body


def node_sample(
    n_gpus: int = 8, *, job_id: str | None = None, pool: str | None = "train", **gpu_overrides: Any
) -> dict[str, Any]:
    gpus = [gpu(i, **({"job_id": job_id} if job_id else {}), **gpu_overrides) for i in range(n_gpus)]
    body: dict[str, Any] = {"timestamp": time.time(), "gpus": gpus}
    if pool:
        body["pool"] = pool
    return body


def metric_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Parse exposition text with prometheus_client's parser: (name, labels) -> value."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of the one series of ``name`` whose labels include ``labels``, or None."""
    matches = [v for (n, lbls), v in metric_samples(text).items() if n == name and set(labels.items()) <= set(lbls)]
    assert len(matches) <= 1, f"{len(matches)} series of {name} match {labels}"
    return matches[0] if matches else None


def scrape(client: httpx.Client | Any) -> str:
    response = client.get("/metrics")
    assert response.status_code == 200
    return str(response.text)


def ib_port(device: str = "mlx5_0", port: int = 1, **overrides: Any) -> dict[str, Any]:
    """An InfiniBand port as the exporter sends it (bytes, not the kernel's 4-byte words)."""
    body: dict[str, Any] = {
        "device": device,
        "port": port,
        "link_layer": "InfiniBand",
        "state": "ACTIVE",
        "phys_state": "LinkUp",
        "rate_bytes_per_second": 50e9,
        "link_downed_total": 0,
        "symbol_errors_total": 0,
        "receive_errors_total": 0,
        "link_error_recovery_total": 0,
        "transmit_discards_total": 0,
        "transmit_bytes_total": 4 * 2880761508848,
        "receive_bytes_total": 4 * 18126345378,
    }
    body.update(overrides)
    return body


def node_view(body: dict[str, Any], name: str = "n1") -> NodeView:
    """The view the aggregator builds from a node push of ``body``, without the API (health not advanced)."""
    sample = NodeSampleCreate.model_validate(body)
    return build_node_view(
        name=name,
        pool=sample.pool,
        last_seen_at=sample.timestamp,
        last_sample_timestamp=sample.timestamp,
        samples_received=1,
        updated_at=sample.timestamp,
        gpus=gpu_views(name, sample.timestamp, sample.gpus, DeviceResolver(default_peak_table())),
    )


def inspector_node(
    name: str,
    *,
    collectives: tuple[CollectiveView, ...] | None = None,
    collective_ranks: tuple[CollectiveRankView, ...] | None = None,
) -> NodeView:
    """A node view with no GPUs holding only NCCL Inspector's figures, as its last push sent them."""
    return build_node_view(
        name=name,
        pool=None,
        last_seen_at=1.0,
        last_sample_timestamp=1.0,
        samples_received=1,
        updated_at=1.0,
        gpus=(),
        collectives=collectives,
        collective_ranks=collective_ranks,
    )
