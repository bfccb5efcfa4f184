"""``/metrics`` series of fleet health: per-GPU error counters and checks, InfiniBand ports, the drain list, and the
pool counters of idle energy, idle time and faults. Kept apart from ``render`` so the node chunk only calls in."""

from __future__ import annotations

from collections.abc import Callable

from mfumon.api.metrics._text import labels_text, sample_line
from mfumon.api.metrics.families import HEALTH_SUMMARY_FAMILIES, IB_PORT_METRICS
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import NodeView

Add = Callable[[str, str, float], None]


def render_node_health(node: NodeView, add: Add) -> None:
    """Add one node's own health series to its chunk (``add(metric, labels, value)``): its ports and checks. Its
    GPUs' checks and error counters are GPU lines (:mod:`mfumon.api.metrics.gpu_lines`)."""
    for port in node.ib_ports or ():
        port_ident = [("node", node.name), ("device", str(port["device"])), ("port", str(port["port"]))]
        labels = labels_text(port_ident)
        add("mfumon_ib_port_info", labels_text([*port_ident, ("link_layer", str(port.get("link_layer", "")))]), 1)
        if port.get("state") is not None:
            add("mfumon_ib_port_active", labels, 1 if port["state"] == "ACTIVE" else 0)
        for field, metric in IB_PORT_METRICS.items():
            if port.get(field) is not None:
                add(metric, labels, port[field])
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
    families = HEALTH_SUMMARY_FAMILIES

    def emit(metric: str, rows: list[tuple[list[tuple[str, str]], float]]) -> None:
        out.append(families[metric].header() + "".join(sample_line(metric, labels_text(lb), v) for lb, v in rows))

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
