"""A node's and its GPUs' series on ``/metrics``: the families, and the per-GPU template they are filled into.

A node's series are rendered once per push (:func:`render_node`, on the ingest path) and cached by the store, so scrapes
only join them. Most of them are GPU lines, which differ from one push to the next only in their values and, now and
then, in their *shape*: which GPUs are up and which counters and checks each reports. Their labels (node, GPU, UUID,
model, job, the hardware estimate's source) are arguments like the values. So the lines of every node of one shape,
nearly every node of a cluster, come from one template, one ``%``-format string per metric family, built the first time
the shape is seen; a push only collects its labels and values in line order and fills each family in one C-level ``%``,
and a family whose arguments did not change since the node's last push (total memory, error counters, flags, checks) is
reused as it was rendered. Measured against building each line in Python: 1.1-1.3x cheaper for the bench's push of 123
lines, 1.5x for one with every counter NVML reads on Hopper (371 lines; ``bench/results/cpu-2026-12-02a``), for a list
of arguments per node and a few shared templates.

Values are written with ``%.15g``: whole numbers below 10**15 exactly, other values to 15 significant digits (every
decimal an exporter sends survives the round trip); flags (``up``, ``busy``, checks) are booleans, written 1 or 0.
GPU health counters and checks are GPU lines too; their families are declared in :mod:`mfumon.api.metrics.health`.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from mfumon.api.metrics._text import counter, declare, escape_label_value, format_value, gauge, gpu_labels
from mfumon.api.metrics.health import HEALTH_COUNTER_METRICS, render_node_health
from mfumon.api.state.views import GpuView, NodeView

# Per GPU (labels node, gpu, uuid), then per node. Rendered per node and cached until the node pushes again.
GPU_FAMILIES = declare(
    gauge("gpu_info", "GPU identity and attribution; value 1."),
    gauge("gpu_up", "1 when the GPU answers, 0 when the exporter reports it lost."),
    gauge("gpu_utilization_ratio", "Fraction of time a kernel was running (NVML utilization)."),
    gauge("gpu_sm_active_ratio", "Fraction of time SMs had at least one warp (profiling/GPM)."),
    gauge("gpu_sm_occupancy_ratio", "Warps resident / maximum warps (profiling/GPM)."),
    gauge("gpu_tensor_active_ratio", "Fraction of cycles the tensor pipes were active (profiling/GPM)."),
    gauge(
        "gpu_tensor_precision_active_ratio",
        "Fraction of cycles the tensor pipes ran matrix ops of one precision: hmma (fp16, bf16, tf32, fp8), imma "
        "(integer), dmma (fp64) (DCGM profiling).",
    ),
    gauge("gpu_dram_active_ratio", "Fraction of cycles device memory was busy (profiling/GPM)."),
    gauge("gpu_memory_used_bytes", "Device memory in use."),
    gauge("gpu_memory_total_bytes", "Device memory size."),
    gauge("gpu_power_watts", "Power draw."),
    gauge("gpu_temperature_celsius", "GPU temperature."),
    gauge("gpu_sm_clock_hz", "Current SM clock."),
    gauge("gpu_max_sm_clock_hz", "Maximum SM clock."),
    gauge("gpu_nvlink_tx_bytes_per_second", "NVLink transmit throughput."),
    gauge("gpu_nvlink_rx_bytes_per_second", "NVLink receive throughput."),
    gauge("gpu_pcie_tx_bytes_per_second", "PCIe transmit throughput."),
    gauge("gpu_pcie_rx_bytes_per_second", "PCIe receive throughput."),
    gauge("gpu_pcie_link_generation", "PCIe link generation now; below the maximum, the link has downtrained."),
    gauge("gpu_pcie_link_max_generation", "Highest PCIe link generation the GPU and its slot support."),
    gauge("gpu_pcie_link_width_lanes", "PCIe link width now, in lanes; below the maximum, the link has downtrained."),
    gauge("gpu_pcie_link_max_width_lanes", "Widest PCIe link the GPU and its slot support."),
    gauge(
        "gpu_fabric_health_summary",
        "GPU fabric (NVLink/NVSwitch) health, NVML: 0 not supported, 1 healthy, 2 unhealthy, 3 limited capacity.",
    ),
    gauge("gpu_fabric_manager_status", "Fabric manager status as DCGM reports it (dcgmFabricManagerStatus_t)."),
    counter("gpu_xid_errors_total", "XID errors seen by the exporter."),
    counter("gpu_ecc_uncorrected_total", "Uncorrectable ECC errors."),
    counter("gpu_ecc_corrected_total", "Corrected ECC errors."),
    gauge("gpu_throttled", "1 while clocks are held down for this reason (thermal, power, hw_slowdown)."),
    gauge("gpu_busy", "1 when compute work runs on the GPU (processes, else kernel activity), 0 when it is free."),
    gauge("gpu_jobs", "Jobs on the GPU: 2 or more when jobs share it (time-slicing, MPS), 1 with one job, 0 without."),
    gauge("gpu_hardware_mfu_ratio", "Hardware MFU estimate: tensor-pipe activity x SM clock / max SM clock."),
    gauge(
        "gpu_hardware_estimate_source",
        "1 for the source the hardware estimate used: `cycle_counters` or `ratio_clock`.",
    ),
    gauge("node_info", "Node metadata; value 1."),
    gauge("node_last_seen_timestamp_seconds", "Unix time the node's exporter last pushed."),
)

#: sample counter field -> GPU metric name
COUNTER_METRICS: dict[str, str] = {
    "utilization": "mfumon_gpu_utilization_ratio",
    "sm_active": "mfumon_gpu_sm_active_ratio",
    "sm_occupancy": "mfumon_gpu_sm_occupancy_ratio",
    "tensor_active": "mfumon_gpu_tensor_active_ratio",
    "dram_active": "mfumon_gpu_dram_active_ratio",
    "hmma_active": "mfumon_gpu_tensor_precision_active_ratio",
    "imma_active": "mfumon_gpu_tensor_precision_active_ratio",
    "dmma_active": "mfumon_gpu_tensor_precision_active_ratio",
    "memory_used_bytes": "mfumon_gpu_memory_used_bytes",
    "memory_total_bytes": "mfumon_gpu_memory_total_bytes",
    "power_watts": "mfumon_gpu_power_watts",
    "temperature_celsius": "mfumon_gpu_temperature_celsius",
    "sm_clock_hz": "mfumon_gpu_sm_clock_hz",
    "max_sm_clock_hz": "mfumon_gpu_max_sm_clock_hz",
    "nvlink_tx_bytes_per_second": "mfumon_gpu_nvlink_tx_bytes_per_second",
    "nvlink_rx_bytes_per_second": "mfumon_gpu_nvlink_rx_bytes_per_second",
    "pcie_tx_bytes_per_second": "mfumon_gpu_pcie_tx_bytes_per_second",
    "pcie_rx_bytes_per_second": "mfumon_gpu_pcie_rx_bytes_per_second",
    "xid_errors_total": "mfumon_gpu_xid_errors_total",
    "ecc_uncorrected_total": "mfumon_gpu_ecc_uncorrected_total",
    "ecc_corrected_total": "mfumon_gpu_ecc_corrected_total",
    "pcie_link_gen": "mfumon_gpu_pcie_link_generation",
    "pcie_link_gen_max": "mfumon_gpu_pcie_link_max_generation",
    "pcie_link_width": "mfumon_gpu_pcie_link_width_lanes",
    "pcie_link_width_max": "mfumon_gpu_pcie_link_max_width_lanes",
    "fabric_health_summary": "mfumon_gpu_fabric_health_summary",
    "fabric_manager_status": "mfumon_gpu_fabric_manager_status",
}
# Not shown: tensor_active_exact (mfumon_gpu_hardware_estimate_source says it), fabric_health_mask (bits the summary
# sums up; in the GPU's JSON).

#: sample counter field -> the labels its line adds to the GPU's (where several fields share one family)
COUNTER_LABELS: dict[str, str] = {
    "hmma_active": 'precision="hmma"',
    "imma_active": 'precision="imma"',
    "dmma_active": 'precision="dmma"',
}

#: sample counter field -> the metric of its per-GPU line, GPU and health families alike (one lookup per counter)
GPU_LINE_METRICS: dict[str, str] = {**COUNTER_METRICS, **HEALTH_COUNTER_METRICS}

#: NVML clock-event reasons grouped into the ``reason`` label of ``mfumon_gpu_throttled``
THROTTLE_GROUPS: dict[str, frozenset[str]] = {
    "thermal": frozenset({"sw_thermal", "hw_thermal"}),
    "power": frozenset({"sw_power_cap", "hw_power_brake"}),
    "hw_slowdown": frozenset({"hw_slowdown"}),
}

#: Shapes whose templates are kept; a cluster has a few (GPUs per node, counters per model, GPUs down).
MAX_TEMPLATES = 1024
_NO_CHECKS: dict[str, bool] = {}


@dataclass(frozen=True, slots=True)
class GpuTemplate:
    """The per-GPU lines of nodes of one shape: each family's format string and what picks its arguments."""

    families: tuple[tuple[str, str, Callable[[list[Any]], tuple[Any, ...]]], ...]  # (family, format, picker)


@dataclass(frozen=True, slots=True)
class GpuLines:
    """A node's per-GPU lines as rendered from one push, kept to render its next push from."""

    template: GpuTemplate
    arguments: list[Any]  # labels and values, in line order
    chunk: dict[str, bytes]  # family -> its lines


_templates: dict[tuple[Hashable, ...], GpuTemplate] = {}


def render_node(node: NodeView, previous: GpuLines | None = None) -> tuple[dict[str, bytes], GpuLines]:
    """A node's and its GPUs' series (about 100 lines), and its GPUs' lines to render its next push from."""
    gpu_lines = render_gpu_lines(node, previous)
    lines: defaultdict[str, list[str]] = defaultdict(list)
    node_label = escape_label_value(node.name)
    lines["mfumon_node_info"].append(
        f'mfumon_node_info{{node="{node_label}",pool="{escape_label_value(node.pool or "")}"}} 1\n'
    )
    seen = f'mfumon_node_last_seen_timestamp_seconds{{node="{node_label}"}} {format_value(node.last_seen_at)}\n'
    lines["mfumon_node_last_seen_timestamp_seconds"].append(seen)

    def add(name: str, labels: str, value: float) -> None:
        lines[name].append(f"{name}{labels} {format_value(value)}\n")

    render_node_health(node, add)
    chunk = gpu_lines.chunk.copy()  # GPU and node families are apart: no family in both
    for name, chunk_lines in lines.items():
        chunk[name] = "".join(chunk_lines).encode()
    return chunk, gpu_lines


def render_gpu_lines(node: NodeView, previous: GpuLines | None) -> GpuLines:
    """The node's per-GPU lines by family; from its previous push's where the node kept its shape."""
    shape, arguments = _walk(node)
    template = _templates.get(shape)
    if template is None:
        template = _build(node)
        if len(_templates) >= MAX_TEMPLATES:
            _templates.clear()  # shapes seldom change: rebuilding the few in use costs less than tracking use
        _templates[shape] = template
    if previous is None or previous.template is not template:
        chunk = {family: (text % pick(arguments)).encode() for family, text, pick in template.families}
        return GpuLines(template, arguments, chunk)
    chunk = {}
    before, held = previous.arguments, previous.chunk
    for family, text, pick in template.families:
        now = pick(arguments)
        chunk[family] = held[family] if now == pick(before) else (text % now).encode()
    return GpuLines(template, arguments, chunk)


@functools.lru_cache(maxsize=1 << 16)  # one per model, job and MIG profile in use
def _info_labels(model: str, job_id: str | None, mig_profile: str | None) -> str:
    esc = escape_label_value
    return f'model="{esc(model)}",job_id="{esc(job_id or "")}",mig_profile="{esc(mig_profile or "")}"'


def _walk(node: NodeView) -> tuple[tuple[Hashable, ...], list[Any]]:
    """The node's shape, and its lines' arguments: per GPU its labels, then its values in line order (see
    :func:`_gpu_lines`)."""
    shape: list[Hashable] = []
    arguments: list[Any] = []
    checks_of = node.health.gpu_checks if node.health is not None else {}
    for gpu in node.gpus:
        counters = gpu.counters
        checks = checks_of.get(gpu.uuid, _NO_CHECKS)
        estimate = gpu.hardware_mfu if gpu.up else None
        shape.append((gpu.up, estimate is None, *counters, "|", *checks))
        arguments += (gpu_labels(node.name, gpu.index, gpu.uuid), _info_labels(gpu.name, gpu.job_id, gpu.mig_profile))
        arguments.append(gpu.up)
        arguments += counters.values()  # the throttle reasons among them: a list no line shows
        if gpu.up:
            arguments.append(gpu.busy)
            arguments.append(gpu.jobs)
            if estimate is not None:
                arguments.append(estimate)
                arguments.append(gpu.hardware_estimate_source)  # a label: a flip of source keeps the shape
        reasons = counters.get("throttle_reasons")
        if reasons is not None:
            active = set(reasons)
            arguments += [not active.isdisjoint(members) for members in THROTTLE_GROUPS.values()]
        arguments += checks.values()
    return tuple(shape), arguments


def _gpu_lines(gpu: GpuView, checks: dict[str, bool]) -> list[tuple[str | None, str]]:
    """One GPU's lines as (family, format): the info line, with the GPU's labels and its info labels, then one per
    value :func:`_walk` collects after them, with the GPU's labels and that value (family None: a value no line
    shows)."""
    lines: list[tuple[str | None, str]] = [("mfumon_gpu_info", "mfumon_gpu_info{%s,%s} 1\n")]
    lines.append(("mfumon_gpu_up", "mfumon_gpu_up{%s} %.15g\n"))
    for field in gpu.counters:
        metric = GPU_LINE_METRICS.get(field)
        extra = COUNTER_LABELS.get(field)
        labels = "%s" if extra is None else f"%s,{extra}"
        lines.append((metric, f"{metric}{{{labels}}} %.15g\n" if metric is not None else ""))
    if gpu.up:
        lines.append(("mfumon_gpu_busy", "mfumon_gpu_busy{%s} %.15g\n"))
        lines.append(("mfumon_gpu_jobs", "mfumon_gpu_jobs{%s} %.15g\n"))
        if gpu.hardware_mfu is not None:
            lines.append(("mfumon_gpu_hardware_mfu_ratio", "mfumon_gpu_hardware_mfu_ratio{%s} %.15g\n"))
            # Like the info line, its "value" is a label (the source, an identifier: nothing to escape).
            source = "mfumon_gpu_hardware_estimate_source"
            lines.append((source, f'{source}{{%s,source="%s"}} 1\n'))
    if "throttle_reasons" in gpu.counters:
        for group in THROTTLE_GROUPS:
            lines.append(("mfumon_gpu_throttled", f'mfumon_gpu_throttled{{%s,reason="{group}"}} %.15g\n'))
    for check in checks:  # check names are identifiers: nothing to escape
        lines.append(("mfumon_gpu_health", f'mfumon_gpu_health{{%s,check="{check}"}} %.15g\n'))
    return lines


def _build(node: NodeView) -> GpuTemplate:
    texts: dict[str, list[str]] = {}
    picks: dict[str, list[int]] = {}
    checks_of = node.health.gpu_checks if node.health is not None else {}
    labels = 0  # where the GPU's arguments start: its labels, its info labels, its values
    for gpu in node.gpus:
        value = labels + 1  # the info line takes the info labels as its "value"
        for family, text in _gpu_lines(gpu, checks_of.get(gpu.uuid, _NO_CHECKS)):
            if family is not None:
                texts.setdefault(family, []).append(text)
                picks.setdefault(family, []).extend((labels, value))
            value += 1
        labels = value
    return GpuTemplate(tuple((family, "".join(parts), itemgetter(*picks[family])) for family, parts in texts.items()))
