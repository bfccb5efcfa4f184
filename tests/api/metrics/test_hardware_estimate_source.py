"""Issue 53 on ``/metrics``: the source of each GPU's hardware estimate, and the new per-GPU gauges.

``mfumon_gpu_hardware_estimate_source{source}`` is 1 for the source the estimate used, a line beside
``mfumon_gpu_hardware_mfu_ratio``; the source is a label filled in like a value, so a GPU that flips source between
pushes keeps its node's shape and template. A push with only the counters exporters sent before renders as it did,
plus that line.
"""

from __future__ import annotations

from typing import Any

from mfumon.api.metrics.health import HEALTH_FAMILIES
from mfumon.api.metrics.node import GPU_FAMILIES, GPU_LINE_METRICS, GpuLines, render_gpu_lines, render_node
from tests.utils.factories import gpu, metric_samples, node_sample, node_view

SOURCE = "mfumon_gpu_hardware_estimate_source"
UUID = "GPU-00000000-aaaa-bbbb-cccc-000000000000"
_GPU = f'node="n1",gpu="0",uuid="{UUID}"'

# One GPU as exporters sent it before issue 53, and every line of it (the node's lines after them).
OLD_STYLE: dict[str, Any] = {"job_id": "j", "sm_clock_hz": 1.5e9, "max_sm_clock_hz": 2e9, "compute_processes": 1}
OLD_LINES = f"""\
mfumon_gpu_info{{{_GPU},model="NVIDIA H100 80GB HBM3",job_id="j",mig_profile=""}} 1
mfumon_gpu_up{{{_GPU}}} 1
mfumon_gpu_utilization_ratio{{{_GPU}}} 0.95
mfumon_gpu_sm_active_ratio{{{_GPU}}} 0.8
mfumon_gpu_tensor_active_ratio{{{_GPU}}} 0.45
mfumon_gpu_memory_used_bytes{{{_GPU}}} 60000000000
mfumon_gpu_memory_total_bytes{{{_GPU}}} 80000000000
mfumon_gpu_power_watts{{{_GPU}}} 550
mfumon_gpu_temperature_celsius{{{_GPU}}} 61
mfumon_gpu_sm_clock_hz{{{_GPU}}} 1500000000
mfumon_gpu_max_sm_clock_hz{{{_GPU}}} 2000000000
mfumon_gpu_busy{{{_GPU}}} 1
mfumon_gpu_jobs{{{_GPU}}} 1
mfumon_gpu_hardware_mfu_ratio{{{_GPU}}} 0.3375
"""
NODE_LINES = (
    'mfumon_node_info{node="n1",pool="train"} 1\nmfumon_node_last_seen_timestamp_seconds{node="n1"} 1800000000\n'
)


def _body(n_gpus: int = 1, **counters: Any) -> dict[str, Any]:
    return {**node_sample(n_gpus, **OLD_STYLE, **counters), "timestamp": 1.8e9}


def _render(body: dict[str, Any]) -> str:
    chunk, _ = render_node(node_view(body))
    return b"".join(chunk.values()).decode()


def _sources(lines: GpuLines) -> dict[str, str]:
    text = lines.chunk.get(SOURCE, b"").decode()
    series = metric_samples(f"# TYPE {SOURCE} gauge\n{text}")
    assert set(series.values()) <= {1.0}
    return {dict(labels)["gpu"]: dict(labels)["source"] for _, labels in series}


def test_a_push_of_old_counters_renders_as_before_plus_the_ratio_clock_source() -> None:
    source = f'{SOURCE}{{{_GPU},source="ratio_clock"}} 1\n'
    assert _render(_body()) == OLD_LINES + source + NODE_LINES
    assert _render(_body(tensor_active_exact=0)) == OLD_LINES + source + NODE_LINES  # the flag's 0 shows nothing


def test_cycle_counters_show_as_the_source_and_the_flag_has_no_gauge_of_its_own() -> None:
    text = _render(_body(tensor_active_exact=1))
    assert text == OLD_LINES + f'{SOURCE}{{{_GPU},source="cycle_counters"}} 1\n' + NODE_LINES
    assert "exact" not in text.replace("cycle_counters", "")


def test_no_estimate_no_source_line() -> None:
    body = _body(2, tensor_active=None)
    body["gpus"][1] = {**gpu(1), "up": False}
    text = _render(body)
    assert "mfumon_gpu_hardware_mfu_ratio" not in text and SOURCE not in text


def _lines(body: dict[str, Any], previous: GpuLines | None = None) -> GpuLines:
    return render_gpu_lines(node_view(body), previous)


def test_a_gpu_that_flips_source_between_pushes_shows_its_source_now() -> None:
    first = _lines(_body(3, tensor_active_exact=1))
    assert _sources(first) == {"0": "cycle_counters", "1": "cycle_counters", "2": "cycle_counters"}

    flipped = _body(3, tensor_active_exact=1)
    flipped["gpus"][1]["tensor_active_exact"] = 0  # the same counters reported: the same shape and template
    second = _lines(flipped, first)
    assert second.template is first.template
    assert _sources(second) == {"0": "cycle_counters", "1": "ratio_clock", "2": "cycle_counters"}
    assert second.chunk["mfumon_gpu_tensor_active_ratio"] is first.chunk["mfumon_gpu_tensor_active_ratio"]

    third = _lines(_body(3, tensor_active_exact=1), second)  # and back
    assert third.template is first.template
    assert third.chunk[SOURCE] == first.chunk[SOURCE]

    dropped = _body(3, tensor_active_exact=1)
    del dropped["gpus"][2]["tensor_active_exact"]  # an exporter without the flag: another shape
    fourth = _lines(dropped, third)
    assert fourth.template is not first.template
    assert _sources(fourth) == {"0": "cycle_counters", "1": "cycle_counters", "2": "ratio_clock"}

    lost = _body(3, tensor_active_exact=1)
    lost["gpus"][0]["tensor_active"] = None  # no estimate: its source line goes with it
    assert _sources(_lines(lost, fourth)) == {"1": "cycle_counters", "2": "cycle_counters"}


NEW_COUNTERS = {
    "hmma_active": 0.5,
    "imma_active": 0.125,
    "dmma_active": 0.0,
    "pcie_link_gen": 4,
    "pcie_link_gen_max": 5,
    "pcie_link_width": 8,
    "pcie_link_width_max": 16,
    "fabric_health_summary": 3,
    "fabric_health_mask": 6,
    "fabric_manager_status": 3,
}


def test_the_new_counters_are_per_gpu_gauges() -> None:
    text = _render(_body(2, **NEW_COUNTERS))
    series = metric_samples(text)

    def value(index: int, name: str, **extra: str) -> float:
        ident = {("node", "n1"), ("gpu", str(index)), ("uuid", f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000")}
        return series[(name, frozenset(ident | set(extra.items())))]

    for i in (0, 1):
        by_precision = {
            p: value(i, "mfumon_gpu_tensor_precision_active_ratio", precision=p) for p in ("hmma", "imma", "dmma")
        }
        assert by_precision == {"hmma": 0.5, "imma": 0.125, "dmma": 0.0}
        assert value(i, "mfumon_gpu_pcie_link_generation") == 4
        assert value(i, "mfumon_gpu_pcie_link_max_generation") == 5
        assert value(i, "mfumon_gpu_pcie_link_width_lanes") == 8
        assert value(i, "mfumon_gpu_pcie_link_max_width_lanes") == 16
        assert value(i, "mfumon_gpu_fabric_health_summary") == 3
        assert value(i, "mfumon_gpu_fabric_manager_status") == 3
    assert "mask" not in text
    names = [line.split("{", 1)[0] for line in text.splitlines()]
    runs = [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]
    assert len(runs) == len(set(runs))  # each family's lines in one block, GPU after GPU


def test_every_gpu_line_family_is_declared_once() -> None:
    assert set(GPU_LINE_METRICS.values()) <= set(GPU_FAMILIES) | set(HEALTH_FAMILIES)
    assert not set(GPU_FAMILIES) & set(HEALTH_FAMILIES)  # a family in both would be served twice
    assert (
        GPU_FAMILIES[SOURCE].help == "1 for the source the hardware estimate used: `cycle_counters` or `ratio_clock`."
    )
