"""A node's GPU series come from a template per node shape (``mfumon.api.metrics.node``): whatever changes from one
push to the next, labels, counters reported, checks, GPUs up or down, the scrape shows the node as it is now."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.api.metrics import node
from mfumon.api.metrics.node import render_gpu_lines
from mfumon.api.state.health import advance
from mfumon.api.state.views import NodeView
from tests.utils.factories import gpu, metric_samples, node_sample, node_view, scrape
from tests.utils.waiting import eventually


def _push(client: TestClient, body: dict[str, Any]) -> str:
    assert client.post("/v1/nodes/n1/samples", json=body).status_code == 200
    renderer = client.app.state.ctx.renderer  # type: ignore[attr-defined]
    assert eventually(lambda: renderer.waiting() == 0)
    return scrape(client)


def _gpu_series(text: str, gpu_index: str = "0") -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {key: v for key, v in metric_samples(text).items() if ("gpu", gpu_index) in key[1]}


def _names(series: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> set[str]:
    return {name for name, _ in series}


def test_a_change_of_shape_shows_the_new_labels_counters_and_checks_and_drops_the_old(client: TestClient) -> None:
    plain = node_sample(2, job_id="a")
    before = _gpu_series(_push(client, plain))
    info = [dict(labels) for name, labels in before if name == "mfumon_gpu_info"]
    assert [i["job_id"] for i in info] == ["a"]
    assert "mfumon_gpu_ecc_uncorrected_total" not in _names(before)
    assert "mfumon_gpu_throttled" not in _names(before)

    changed = node_sample(2, job_id="b", ecc_uncorrected_total=2, throttle_reasons=["hw_slowdown"])
    changed["gpus"][1] = {**gpu(1), "up": False}
    text = _push(client, changed)
    now = _gpu_series(text)
    assert [dict(labels)["job_id"] for name, labels in now if name == "mfumon_gpu_info"] == ["b"]
    assert {dict(labels)["reason"]: v for (name, labels), v in now.items() if name == "mfumon_gpu_throttled"} == {
        "thermal": 0,
        "power": 0,
        "hw_slowdown": 1,
    }
    assert [v for (name, _), v in now.items() if name == "mfumon_gpu_ecc_uncorrected_total"] == [2]
    checks = {dict(labels)["check"]: v for (name, labels), v in now.items() if name == "mfumon_gpu_health"}
    assert checks["ecc_uncorrectable"] == 0 and checks["hw_slowdown"] == 0 and checks["responsive"] == 1
    down = _gpu_series(text, "1")
    assert {name for name in _names(down)} == {"mfumon_gpu_info", "mfumon_gpu_up", "mfumon_gpu_health"}
    assert [v for (name, _), v in down.items() if name == "mfumon_gpu_up"] == [0]

    again = _gpu_series(_push(client, node_sample(2, job_id="a")))
    assert _names(again) == _names(before)
    assert [dict(labels)["job_id"] for name, labels in again if name == "mfumon_gpu_info"] == ["a"]


def test_values_are_exact_push_after_push(client: TestClient) -> None:
    values = {"memory_total_bytes": 85_520_809_984.0, "power_watts": 612.345, "tensor_active": 0.123456789012345}
    text = _push(client, node_sample(1, **values))
    assert 'mfumon_gpu_memory_total_bytes{node="n1",gpu="0",' in text
    assert "} 85520809984\n" in text  # whole numbers without a fraction or an exponent
    first = _gpu_series(text)
    metrics = {
        "memory_total_bytes": "mfumon_gpu_memory_total_bytes",
        "power_watts": "mfumon_gpu_power_watts",
        "tensor_active": "mfumon_gpu_tensor_active_ratio",
    }
    for field, metric in metrics.items():
        assert [v for (name, _), v in first.items() if name == metric] == [values[field]], field

    second = _gpu_series(_push(client, node_sample(1, **{**values, "power_watts": 100.5})))
    assert [v for (name, _), v in second.items() if name == "mfumon_gpu_power_watts"] == [100.5]
    unchanged = {k: v for k, v in first.items() if k[0] != "mfumon_gpu_power_watts"}
    assert {k: v for k, v in second.items() if k[0] != "mfumon_gpu_power_watts"} == unchanged


def test_a_percent_sign_in_a_label_is_text_not_a_placeholder(client: TestClient) -> None:
    text = _push(client, node_sample(1, name="Weird %s %d %% GPU"))
    models = [dict(labels)["model"] for name, labels in _gpu_series(text) if name == "mfumon_gpu_info"]
    assert models == ["Weird %s %d %% GPU"]


def _view(body: dict[str, Any], held: NodeView | None, name: str = "n1") -> NodeView:
    return advance(held, node_view(body, name), 600.0)


def test_a_family_whose_values_did_not_change_is_reused_not_formatted_again() -> None:
    first_view = _view(node_sample(8), None)
    first = render_gpu_lines(first_view, None)
    second = render_gpu_lines(_view(node_sample(8, power_watts=321.0), first_view), first)
    assert second.template is first.template  # same shape: the same template
    assert second.chunk["mfumon_gpu_memory_total_bytes"] is first.chunk["mfumon_gpu_memory_total_bytes"]
    assert second.chunk["mfumon_gpu_power_watts"] != first.chunk["mfumon_gpu_power_watts"]
    assert second.chunk["mfumon_gpu_power_watts"].count(b"} 321\n") == 8


def _text(lines: node.GpuLines) -> str:
    return b"".join(lines.chunk.values()).decode()


def test_nodes_of_one_shape_share_a_template_each_with_its_own_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    a = render_gpu_lines(_view(node_sample(4, job_id="ja"), None, "na"), None)
    b = render_gpu_lines(_view(node_sample(4, job_id="jb"), None, "nb"), None)
    assert a.template is b.template
    assert 'node="na"' in _text(a) and 'job_id="ja"' in _text(a) and "nb" not in _text(a) and "jb" not in _text(a)
    assert 'node="nb"' in _text(b) and 'job_id="jb"' in _text(b)

    down = node_sample(4)
    down["gpus"][2] = {**gpu(2), "up": False}
    other = render_gpu_lines(_view(down, None, "nc"), None)
    assert other.template is not a.template
    assert 'mfumon_gpu_up{node="nc",gpu="2",' in _text(other)

    monkeypatch.setattr(node, "MAX_TEMPLATES", 1)  # every new shape now drops the templates held
    render_gpu_lines(_view(node_sample(3), None, "nd"), None)
    again = render_gpu_lines(_view(node_sample(4, job_id="ja"), None, "na"), other)
    assert again.template is not a.template  # built afresh after the drop ...
    assert _text(again) == _text(a)  # ... the same lines
