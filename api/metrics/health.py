"""Fleet health (issue 15) on ``/metrics``: its families and how they are rendered, side by side.

Per-GPU error counters and checks are GPU lines, filled in by :mod:`mfumon.api.metrics.node` from the metric names
declared here; a node's InfiniBand ports, its checks and the drain list join the node's chunk
(:func:`render_node_health`); the pool counters of idle energy, idle time and faults and the nodes by health status
are rendered on every scrape (:func:`render_health_summary`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from mfumon.api.metrics._text import Rows, counter, declare, family_text, gauge, labels_text
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import NodeView
from mfumon.exporter.samples import COUNTER_FIELDS, IbPortSample

# Per GPU, per InfiniBand/RoCE port and per node: rendered with the node's chunk, after the GPU families.
HEALTH_FAMILIES = declare(
    counter("gpu_nvlink_crc_flit_errors_total", "NVLink flow-control (flit) CRC errors, all links."),
    counter("gpu_nvlink_crc_data_errors_total", "NVLink data CRC errors, all links."),
    counter("gpu_nvlink_replay_errors_total", "NVLink replays (retransmissions), all links."),
    counter("gpu_nvlink_recovery_errors_total", "NVLink recoveries (link retrained), all links."),
    counter("gpu_pcie_replays_total", "PCIe replays (link-level retransmissions)."),
    counter("gpu_remapped_rows_correctable_total", "HBM rows remapped for correctable errors."),
    counter("gpu_remapped_rows_uncorrectable_total", "HBM rows remapped for uncorrectable errors."),
    counter("gpu_ecc_deferred_total", "Deferred (poisoned) uncorrectable ECC errors (AMD RAS; amdsmi only)."),
    gauge("gpu_row_remap_pending", "1 while a row remap waits for a GPU reset to take effect."),
    gauge("gpu_row_remap_failure", "1 once a row remap has failed (no spare rows left)."),
    counter("gpu_energy_joules_total", "Energy the GPU drew since its driver loaded."),
    gauge("gpu_last_xid", "The last XID the GPU reported since the exporter started (0: none)."),
    gauge("gpu_health", "1 while the GPU passes the health check, 0 while it fails it; absent where unsupported."),
    gauge("ib_port_info", "InfiniBand/RoCE port identity; value 1."),
    gauge("ib_port_active", "1 while the port's state is ACTIVE."),
    gauge("ib_port_rate_bytes_per_second", "Port signalling rate (active width x speed)."),
    counter("ib_port_link_downed_total", "Times the link failed to recover from an error and went down."),
    counter("ib_port_symbol_errors_total", "Minor link errors detected on physical lanes."),
    counter("ib_port_receive_errors_total", "Packets received with an error."),
    counter("ib_port_link_error_recovery_total", "Link retrains that recovered without going down."),
    counter("ib_port_transmit_discards_total", "Outbound packets discarded (port down or congested)."),
    counter("ib_port_transmit_bytes_total", "Data bytes transmitted (the kernel's 4-byte words x 4)."),
    counter("ib_port_receive_bytes_total", "Data bytes received (the kernel's 4-byte words x 4)."),
    gauge("node_health", "1 while the node passes the health check, 0 while it fails it."),
    gauge("node_healthy", "1 while every GPU and node check of the node passes."),
    gauge("node_drain", "1 for each reason the node should leave the scheduler (the drain list); absent otherwise."),
)

#: sample counter field -> health metric name: the family named after the field (a GPU line, like COUNTER_METRICS)
HEALTH_COUNTER_METRICS: dict[str, str] = {
    field: f"mfumon_gpu_{field}" for field in COUNTER_FIELDS if f"mfumon_gpu_{field}" in HEALTH_FAMILIES
}

#: InfiniBand port field -> metric name: the family named after the field
IB_PORT_METRICS: dict[str, str] = {
    f.name: f"mfumon_ib_port_{f.name}" for f in fields(IbPortSample) if f"mfumon_ib_port_{f.name}" in HEALTH_FAMILIES
}

# Per pool and cluster: rendered on every scrape after the cluster and self families. The pool counters count from
# this process's start (use rate()/increase(), which handle restarts; replicas agree on rates, not on totals).
HEALTH_SUMMARY_FAMILIES = declare(
    counter("pool_idle_energy_joules_total", "Energy drawn by the pool's idle GPUs (up, no job, no compute work)."),
    counter("pool_idle_gpu_seconds_total", "GPU-seconds the pool's GPUs spent in state idle."),
    counter("pool_gpu_faults_total", "GPUs of the pool that started failing a check that needs a drain."),
    gauge("cluster_nodes_by_health", "Nodes by health status: healthy, degraded (a check fails), drain."),
)

Add = Callable[[str, str, float], None]


def render_node_health(node: NodeView, add: Add) -> None:
    """Add one node's own health series to its chunk (``add(metric, labels, value)``): its ports and checks. Its
    GPUs' checks and error counters are GPU lines (:mod:`mfumon.api.metrics.node`)."""
    for port in node.ib_ports or ():
        port_ident = [("node", node.name), ("device", port.device), ("port", str(port.port))]
        labels = labels_text(port_ident)
        add("mfumon_ib_port_info", labels_text([*port_ident, ("link_layer", port.link_layer or "")]), 1)
        if port.state is not None:
            add("mfumon_ib_port_active", labels, 1 if port.state == "ACTIVE" else 0)
        for field, metric in IB_PORT_METRICS.items():
            value = port.counters.get(field)
            if value is not None:
                add(metric, labels, value)
    if node.health is None:
        return
    name = [("node", node.name)]
    for check, ok in node.health.node_checks.items():
        add("mfumon_node_health", labels_text([*name, ("check", check)]), 1 if ok else 0)
    add("mfumon_node_healthy", labels_text(name), 1 if node.health.healthy else 0)
    for reason in node.health.drain_reasons:
        add("mfumon_node_drain", labels_text([*name, ("reason", reason)]), 1)


def render_health_summary(snapshot: Snapshot) -> str:
    """The pool counters and the cluster's nodes by health status."""
    out: list[str] = []

    def emit(name: str, rows: Rows) -> None:
        out.append(family_text(HEALTH_SUMMARY_FAMILIES[name], rows))

    pools = sorted(snapshot.pool_health.items())
    emit("mfumon_pool_idle_energy_joules_total", [([("pool", p)], t.idle_energy_joules) for p, t in pools])
    emit("mfumon_pool_idle_gpu_seconds_total", [([("pool", p)], t.idle_gpu_seconds) for p, t in pools])
    emit("mfumon_pool_gpu_faults_total", [([("pool", p)], t.gpu_faults) for p, t in pools])
    status = {"healthy": 0, "degraded": 0, "drain": 0}
    for node in snapshot.nodes:
        if node.health is not None:
            status["drain" if node.health.drain else "healthy" if node.health.healthy else "degraded"] += 1
    emit("mfumon_cluster_nodes_by_health", [([("status", s)], n) for s, n in status.items()])
    return "".join(out)
