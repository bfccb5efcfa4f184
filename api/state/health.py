"""Fleet health: 0/1 checks per GPU and per node, the drain list, and the accounting that needs a node's history.

Checks pass (1) or fail (0); a check whose counter the node does not report is left out, never passed by default.
Some checks need a drain (the node should leave the scheduler until it is reset or repaired); the others mark it
degraded (it still runs jobs, slower). Checks on error *counters* fail while the counter has grown within the health
window (``MFUMON_HEALTH_WINDOW_SECONDS``): an increase, not a total, is what costs MFU now.

History lives in the node's view: :func:`advance` takes the view held so far and the new one, under the state lock,
and carries forward when each counter last grew, the GPUs' idle energy and idle time since the last sample, and which
GPUs just started failing a drain check (a fault). One code path serves both a replica's own writes and the ones
it reads back from the database, so it survives any rewrite of the write path that keeps per-node views.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mfumon.api.state.views import GpuView, NodeView, PortView

__all__ = [
    "CHECKS",
    "DRAIN_CHECKS",
    "RESET_XIDS",
    "Check",
    "NodeHealth",
    "advance",
    "job_health",
]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    scope: str  # gpu | node
    drain: bool
    meaning: str  # what a failure means, in the words the drain list shows


#: Every check, in the order they are shown. Names are the ``check`` label values of ``mfumon_gpu_health`` and
#: ``mfumon_node_health`` and the ``reason`` of ``mfumon_node_drain``: keep them stable.
CHECKS: dict[str, Check] = {
    c.name: c
    for c in (
        Check("responsive", "gpu", True, "the GPU does not answer (fallen off the bus, NVML_ERROR_GPU_IS_LOST)"),
        Check("ecc_uncorrectable", "gpu", True, "uncorrectable ECC errors since the driver loaded"),
        Check("row_remap_failure", "gpu", True, "an HBM row could not be remapped: no spare rows left (RMA)"),
        Check("row_remap_pending", "gpu", True, "a row remap waits for a GPU reset to take effect"),
        Check("xid", "gpu", True, "the last XID is one that needs a GPU reset"),
        Check("row_remap_uncorrectable", "gpu", True, "HBM rows remapped for uncorrectable errors grew: reset the GPU"),
        Check("ecc_deferred", "gpu", True, "deferred (poisoned) uncorrectable ECC errors grew (AMD): reset the GPU"),
        Check("nvlink_recovery", "gpu", True, "NVLink recovery errors grew: a link is flapping"),
        Check("fabric", "gpu", True, "the NVLink fabric is unhealthy or at limited capacity, or its manager failed"),
        Check("nvlink_errors", "gpu", False, "NVLink CRC or replay errors grew: retransmissions slow collectives"),
        Check("pcie_replays", "gpu", False, "PCIe replays grew: host-device transfers are retransmitted"),
        Check("pcie_downtrained", "gpu", False, "the PCIe link trained below its width (or generation, while busy)"),
        Check("thermal", "gpu", False, "clocks held down for temperature"),
        Check("hw_slowdown", "gpu", False, "clocks held down by a hardware slowdown or power brake"),
        Check("ib_ports_active", "node", True, "an InfiniBand/RoCE port is not ACTIVE"),
        Check("ib_link_flapping", "node", True, "an InfiniBand/RoCE link went down and came back (link_downed grew)"),
        Check("ib_errors", "node", False, "InfiniBand/RoCE symbol, receive or link-recovery errors grew"),
    )
}
DRAIN_CHECKS: frozenset[str] = frozenset(name for name, check in CHECKS.items() if check.drain)

#: XIDs whose immediate action is a GPU reset (or worse), from NVIDIA's Xid catalog ("Resolution Bucket (Immediate
#: Action)", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and its memory-error pages: 48 DBE,
#: 63/64 row remap recorded/failed, 74 NVLink, 79 fallen off the bus, 94/95 contained/uncontained ECC, 119/120 GSP,
#: 140 unrecovered ECC, 154 recovery action changed. Application XIDs (13, 31, 43, 45) follow the job, not the GPU.
RESET_XIDS: frozenset[int] = frozenset({48, 63, 64, 74, 79, 94, 95, 119, 120, 140, 154})

#: Rows remapped for uncorrectable errors: NVML's ``nvmlDeviceGetRemappedRows`` ``uncRows`` (field
#: ``NVML_FI_DEV_REMAPPED_UNC``), DCGM's ``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`` (shared/reference/exporters.md).
#: An uncorrectable HBM error records a remap, which "requires a GPU reset to take effect" (NVIDIA GPU Memory Error
#: Management, docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/row-remapping.html). NVIDIA lets unaffected work go on
#: meanwhile (ibid., error-recovery-and-response-flags.html); draining is this project's policy, as for
#: ``row_remap_pending`` (the same event as a flag, which dcgm-exporter's default counters lack) and XID 63. The
#: count is kept in the InfoROM and outlives resets, so, as for the other error counters, only an increase within
#: the window fails: an old remap does not keep the GPU out, and the drain lasts the window (``row_remap_pending``,
#: where reported, holds it until the reset).
_REMAP_UNCORRECTABLE = ("remapped_rows_uncorrectable_total",)
#: AMD's deferred errors (amdsmi ``deferred_count``): uncorrectable errors whose handling waits until the poisoned data
#: is used; like an uncorrectable remap, an increase needs the GPU reset (AMD RAS). NVIDIA has no such count.
_ECC_DEFERRED = ("ecc_deferred_total",)
_NVLINK_RECOVERY = ("nvlink_recovery_errors_total",)
_NVLINK_ERRORS = ("nvlink_crc_flit_errors_total", "nvlink_crc_data_errors_total", "nvlink_replay_errors_total")
_PCIE = ("pcie_replays_total",)
_IB_DOWNED = ("link_downed_total",)
_IB_ERRORS = ("symbol_errors_total", "receive_errors_total", "link_error_recovery_total")
_GPU_TRACKED = (*_REMAP_UNCORRECTABLE, *_ECC_DEFERRED, *_NVLINK_RECOVERY, *_NVLINK_ERRORS, *_PCIE)
_GPU_COUNTER_CHECKS = (  # a check on error counters, and the counters any growth of which fails it
    ("row_remap_uncorrectable", _REMAP_UNCORRECTABLE),
    ("ecc_deferred", _ECC_DEFERRED),
    ("nvlink_recovery", _NVLINK_RECOVERY),
    ("nvlink_errors", _NVLINK_ERRORS),
    ("pcie_replays", _PCIE),
)
_PORT_TRACKED = (*_IB_DOWNED, *_IB_ERRORS)
#: The GPU's NVLink fabric (``fabric``): NVML's health summary (``nvmlGpuFabricInfo_v3.healthSummary``, DCGM field
#: 175), its health mask (174) and the fabric manager's status (170, ``dcgmFabricManagerStatus_t``). A drain: on an
#: NVSwitch system (HGX, NVL72) an unhealthy or limited-capacity fabric cuts the NVLink bandwidth of every job placed
#: on the GPU, for as long as the GPU stays in the fabric, and a fabric manager that failed leaves its GPUs out of
#: the NVLink domain; nothing a job can do routes around either, and the repair (fabric manager restart, GPU reset,
#: tray or cable service) needs the node empty.
_FABRIC = ("fabric_health_summary", "fabric_health_mask", "fabric_manager_status")
_FABRIC_SUMMARY_KNOWN = frozenset({1, 2, 3})  # NVML_GPU_FABRIC_HEALTH_SUMMARY_*: 0 is "not supported"
_FABRIC_SUMMARY_FAILING = frozenset({2, 3})  # UNHEALTHY, LIMITED_CAPACITY
_FABRIC_MANAGER_KNOWN = frozenset({1, 2, 3, 4})  # NotStarted, InProgress, Success, Failure: a fabric manager runs
_FABRIC_MANAGER_FAILURE = 4
#: NVML_GPU_FABRIC_HEALTH_MASK_*: 2-bit fields (0 not supported, 1 true, 2 false) at these shifts. Bandwidth degraded
#: (shift 0) and route unhealthy (shift 4) fail the check; route recovery (2) and access-timeout recovery (6) are
#: repairs in progress, and evidence only that the mask is supported. The mask is all that drivers without the
#: summary (``nvmlGpuFabricInfo_v2``) report.
_FABRIC_MASK_FAILING = (0, 4)
_FABRIC_MASK_FIELDS = (0, 2, 4, 6)
#: The PCIe link (``pcie_downtrained``): its generation and width now and at most (NVML's maximum is that of the
#: device *and* the system: a Gen5 GPU in a Gen4 slot reports 4, so only a link that trained below what it could
#: reach fails). Width below its maximum is a downtrained link at any load. The generation is not: the GPU drops the
#: link to Gen1 at idle to save power, so a generation below its maximum is evidence only while the GPU is busy.
#: Not a drain: the GPU still computes right and at full speed, and jobs that do not stream over PCIe barely notice;
#: jobs that do (host-device copies, data loading, offload, GPUDirect RDMA to the NIC beside it) lose up to half
#: their bandwidth on that GPU. The fix (reseat, a reset or reboot to retrain the link) waits for the node to empty,
#: so the node is marked degraded for the operator to service at its next idle moment, not taken from its jobs.
_PCIE_LINK = ("pcie_link_gen", "pcie_link_gen_max", "pcie_link_width", "pcie_link_width_max")
_LINK_BUSY = ("utilization", "sm_active", "compute_processes")
_GPU_TRACKED_SET = frozenset(_GPU_TRACKED)
_THERMAL = frozenset({"sw_thermal", "hw_thermal"})
_SLOWDOWN = frozenset({"hw_slowdown", "hw_power_brake"})
#: Clock-event reasons that mean "slower than it should be" (idle, app-clock and display reasons do not).
THROTTLING = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"})
#: A gap between two samples longer than this is not counted as idle time (the node was silent).
MAX_IDLE_GAP_S = 600.0

Tracker = tuple[str, str]  # (GPU uuid or "ib:<device>:<port>", counter) -> when the counter last grew


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """A node's checks as of its latest view, and what this view added to the pool totals."""

    gpu_checks: dict[str, dict[str, bool]]  # uuid -> check -> passing
    node_checks: dict[str, bool]
    reasons: tuple[dict[str, Any], ...]  # one per failing check (and GPU): {"check", "drain", "meaning", "gpu"...}
    grew_at: dict[Tracker, float] = field(default_factory=dict)
    idle_energy_joules: float = 0.0  # added by this view
    idle_gpu_seconds: float = 0.0
    faults: int = 0  # GPUs that started failing a drain check with this view
    inputs: dict[str, tuple[object, ...]] = field(default_factory=dict)  # per GPU, what its checks read (advance)

    @property
    def healthy(self) -> bool:
        return not self.reasons

    @property
    def drain(self) -> bool:
        return any(r["drain"] for r in self.reasons)

    @property
    def drain_reasons(self) -> tuple[str, ...]:
        return tuple(sorted({r["check"] for r in self.reasons if r["drain"]}))

    def failing(self, uuid: str) -> list[str]:
        return [name for name, ok in self.gpu_checks.get(uuid, {}).items() if not ok]


def _ports(node: NodeView | None) -> dict[str, PortView]:
    """A node's InfiniBand/RoCE ports by tracker key."""
    if node is None:
        return {}
    return {p.key: p for p in node.ib_ports or ()}


def _grew(
    key: str,
    names: Iterable[str],
    now: Mapping[str, Any],
    before: Mapping[str, Any] | None,
    held: Mapping[Tracker, float],
    at: float,
    out: dict[Tracker, float],
) -> None:
    """Record when each counter last grew: now if it grew since the held view, else when the held view said."""
    for name in names:
        value = now.get(name)
        if value is None:
            continue
        previous = None if before is None else before.get(name)
        if previous is not None and value > previous:
            out[(key, name)] = at
        elif (key, name) in held:
            out[(key, name)] = held[(key, name)]


def _quiet(key: str, names: Iterable[str], present: Mapping[str, Any], grew_at: Mapping[Tracker, float]) -> bool | None:
    """``None`` when none of the counters is reported, else whether none grew within the window (``grew_at`` holds
    only growth within it)."""
    quiet = None
    for name in names:
        if present.get(name) is not None:
            if (key, name) in grew_at:
                return False
            quiet = True
    return quiet


def _fabric_ok(c: Mapping[str, Any]) -> bool | None:
    """``None`` when nothing the GPU sends speaks for its fabric (none sent, summary 0, no mask field supported),
    else whether the fabric and its manager are healthy."""
    summary = c.get("fabric_health_summary")
    manager = c.get("fabric_manager_status")
    mask = c.get("fabric_health_mask") or 0
    if (
        summary not in _FABRIC_SUMMARY_KNOWN
        and manager not in _FABRIC_MANAGER_KNOWN
        and not any((mask >> shift) & 3 for shift in _FABRIC_MASK_FIELDS)
    ):
        return None
    if summary in _FABRIC_SUMMARY_FAILING or manager == _FABRIC_MANAGER_FAILURE:
        return False
    return not any((mask >> shift) & 3 == 1 for shift in _FABRIC_MASK_FAILING)


def _link_gen_ok(c: Mapping[str, Any]) -> bool | None:
    """Whether the PCIe link runs at its top generation; ``None`` when unknown, or below it on an idle GPU (power
    saving, not evidence). Busy: any utilization or SM activity, or a compute process. Part of a GPU's health inputs
    (:func:`advance`): the busy-ness it reads changes every push, this verdict seldom does."""
    gen, top = c.get("pcie_link_gen"), c.get("pcie_link_gen_max")
    if gen is None or not top:
        return None
    if gen >= top:
        return True
    return False if any((c.get(name) or 0) > 0 for name in _LINK_BUSY) else None


def _pcie_link_ok(c: Mapping[str, Any], gen_ok: bool | None) -> bool | None:
    """``None`` when neither the width nor the generation (``gen_ok``, :func:`_link_gen_ok`) can be judged."""
    width, top = c.get("pcie_link_width"), c.get("pcie_link_width_max")
    width_ok = None if width is None or not top else width >= top
    if gen_ok is None:
        return width_ok
    return gen_ok and width_ok is not False


def _gpu_checks(gpu: GpuView, grew_at: Mapping[Tracker, float], tracked: bool = True) -> dict[str, bool]:
    """``tracked``: whether the GPU reports any error counter a check tracks (without one, no such check applies)."""
    if not gpu.up:
        return {"responsive": False}
    c = gpu.counters
    checks = {"responsive": True}
    if c.get("ecc_uncorrected_total") is not None:
        checks["ecc_uncorrectable"] = c["ecc_uncorrected_total"] == 0
    if c.get("row_remap_failure") is not None:
        checks["row_remap_failure"] = not c["row_remap_failure"]
    if c.get("row_remap_pending") is not None:
        checks["row_remap_pending"] = not c["row_remap_pending"]
    if c.get("last_xid") is not None:
        checks["xid"] = int(c["last_xid"]) not in RESET_XIDS
    if tracked:
        for check, counters in _GPU_COUNTER_CHECKS:
            quiet = _quiet(gpu.uuid, counters, c, grew_at)
            if quiet is not None:
                checks[check] = quiet
    fabric = _fabric_ok(c)
    if fabric is not None:
        checks["fabric"] = fabric
    link = _pcie_link_ok(c, _link_gen_ok(c))
    if link is not None:
        checks["pcie_downtrained"] = link
    reasons = c.get("throttle_reasons")
    if reasons is not None:
        checks["thermal"] = not (_THERMAL & set(reasons))
        checks["hw_slowdown"] = not (_SLOWDOWN & set(reasons))
    return checks


def _node_checks(node: NodeView, grew_at: Mapping[Tracker, float]) -> dict[str, bool]:
    ports = _ports(node)
    if not ports:
        return {}
    checks: dict[str, bool] = {}
    states = [p.state for p in ports.values() if p.state is not None]
    if states:
        checks["ib_ports_active"] = all(s == "ACTIVE" for s in states)
    flapping = [_quiet(key, _IB_DOWNED, p.counters, grew_at) for key, p in ports.items()]
    if any(q is not None for q in flapping):
        checks["ib_link_flapping"] = all(q is not False for q in flapping)
    errors = [_quiet(key, _IB_ERRORS, p.counters, grew_at) for key, p in ports.items()]
    if any(q is not None for q in errors):
        checks["ib_errors"] = all(q is not False for q in errors)
    return checks


def _reasons(node: NodeView, gpu_checks: dict[str, dict[str, bool]], node_checks: dict[str, bool]) -> list[dict]:
    out: list[dict[str, Any]] = []
    for name, ok in node_checks.items():
        if not ok:
            failing = [p for p in node.ib_ports or () if name != "ib_ports_active" or p.state != "ACTIVE"]
            detail = {"ports": [f"{p.device}:{p.port}" for p in failing]} if name == "ib_ports_active" else {}
            out.append({"check": name, "drain": CHECKS[name].drain, "meaning": CHECKS[name].meaning, **detail})
    for gpu in node.gpus:
        for name, ok in gpu_checks.get(gpu.uuid, {}).items():
            if not ok:
                check = CHECKS[name]
                out.append(
                    {"check": name, "drain": check.drain, "meaning": check.meaning, "gpu": gpu.index, "uuid": gpu.uuid}
                )
    return out


def _fails_drain(checks: Mapping[str, bool]) -> bool:
    return not all(checks.values()) and any(not ok and name in DRAIN_CHECKS for name, ok in checks.items())


#: What a GPU's checks depend on besides the window: up, the values the checks read and every tracked counter; and,
#: appended by :func:`advance`, the verdict on the link's generation (:func:`_link_gen_ok`), the only way the checks
#: read the generation and the GPU's busy-ness (the raw utilization would differ on nearly every push and defeat
#: the shortcut).
_INPUTS = (
    "ecc_uncorrected_total",
    "row_remap_failure",
    "row_remap_pending",
    "last_xid",
    "throttle_reasons",
    *_GPU_TRACKED,
    *_FABRIC,
    "pcie_link_width",
    "pcie_link_width_max",
)
_INPUTS_SET = frozenset((*_INPUTS, *_PCIE_LINK))


def advance(held: NodeView | None, view: NodeView, window_seconds: float) -> NodeView:
    """``view`` with its health, given the view held before it (``None`` for a node seen for the first time).

    ``view`` is one no reader holds yet: its health is set on it. Nearly always, no tracked counter grew within the
    window and every GPU sends what its checks read as it did last time: then its checks are the very dict its
    previous view held, and this costs a tuple per GPU."""
    at = view.updated_at
    old = held.health if held is not None else None
    old_grew = old.grew_at if old is not None else {}
    old_checks = old.gpu_checks if old is not None else {}
    old_inputs = old.inputs if old is not None else {}
    inputs = {
        # A GPU that reports none of them: a constant tuple, shared by every such GPU
        gpu.uuid: ((True,) if gpu.up else (False,))
        if _INPUTS_SET.isdisjoint(gpu.counters)
        else (
            gpu.up,
            *map(gpu.counters.get, _INPUTS),
            _link_gen_ok(gpu.counters) if "pcie_link_gen" in gpu.counters else None,
        )
        for gpu in view.gpus
    }
    settled = not old_grew and all(old_inputs.get(uuid) == values for uuid, values in inputs.items())
    before = {g.uuid: g for g in held.gpus} if held is not None else {}
    grew_at: dict[Tracker, float] = {}
    # The GPUs that report any tracked error counter: for the others (counters absent, not zero) nothing can grow
    # and no counter check applies.
    tracked = set() if settled else {g.uuid for g in view.gpus if not _GPU_TRACKED_SET.isdisjoint(g.counters)}
    for gpu in view.gpus:
        if gpu.uuid not in tracked:
            continue
        prior = before.get(gpu.uuid)
        _grew(
            gpu.uuid, _GPU_TRACKED, gpu.counters, prior.counters if prior is not None else None, old_grew, at, grew_at
        )
    if view.ib_ports:
        old_ports = _ports(held)
        for key, port in _ports(view).items():
            held_port = old_ports.get(key)
            _grew(key, _PORT_TRACKED, port.counters, held_port.counters if held_port else None, old_grew, at, grew_at)
    since = at - window_seconds
    grew_at = {k: t for k, t in grew_at.items() if t >= since}  # bounded: only what can still fail a check
    if settled:  # the checks of each GPU's previous view: the same values, nothing grew then or now
        gpu_checks = {uuid: old_checks[uuid] for uuid in inputs}
    else:
        gpu_checks = {gpu.uuid: _gpu_checks(gpu, grew_at, gpu.uuid in tracked) for gpu in view.gpus}
    node_checks = _node_checks(view, grew_at)

    energy = seconds = 0.0
    faults = 0
    for gpu in view.gpus if not settled else ():  # settled: every GPU's checks are its previous ones
        if gpu.uuid not in before:
            continue
        checks, checks_before = gpu_checks[gpu.uuid], old_checks.get(gpu.uuid, {})
        if checks is not checks_before and _fails_drain(checks) and not _fails_drain(checks_before):
            faults += 1
    if view.gpus_idle and held is not None and held.gpus_idle:  # idle time and energy: idle now and before
        for gpu in view.gpus:
            prior = before.get(gpu.uuid)
            gap = gpu.sample_timestamp - prior.sample_timestamp if prior is not None else 0.0
            if gpu.idle and prior is not None and prior.idle and 0 < gap <= MAX_IDLE_GAP_S:
                seconds += gap
                now_j, then_j = gpu.counters.get("energy_joules_total"), prior.counters.get("energy_joules_total")
                if now_j is not None and then_j is not None and now_j >= then_j:
                    energy += now_j - then_j
    # With the same checks as before, a GPU fails one only if the previous view listed it among its reasons.
    gpus_failing = (old is not None and bool(old.reasons)) if settled else None
    if gpus_failing is None or gpus_failing:
        gpus_failing = any(False in checks.values() for checks in gpu_checks.values())
    failing = gpus_failing or False in node_checks.values()
    view.health = NodeHealth(
        gpu_checks=gpu_checks,
        node_checks=node_checks,
        reasons=tuple(_reasons(view, gpu_checks, node_checks)) if failing else (),
        grew_at=grew_at,
        idle_energy_joules=energy,
        idle_gpu_seconds=seconds,
        faults=faults,
        inputs=inputs,
    )
    return view


def job_health(job_id: str, nodes: Iterable[NodeView]) -> dict[str, Any]:
    """The health of a job's GPUs and nodes: what the job JSON shows next to its MFU.

    ``unhealthy_gpus`` fail a check, ``throttled_gpus`` run below their clocks for power or heat, and
    ``unhealthy_nodes`` fail a node check (an erroring or flapping link slows every rank that talks through it).
    """
    gpus: list[dict[str, Any]] = []
    throttled: list[dict[str, Any]] = []
    node_rows: list[dict[str, Any]] = []
    for node in nodes:
        health = node.health
        if health is None:
            continue
        mine = [g for g in node.gpus if g.job_id == job_id]
        for gpu in mine:
            failing = health.failing(gpu.uuid)
            ident = {"node": node.name, "gpu": gpu.index, "uuid": gpu.uuid}
            if failing:
                gpus.append({**ident, "failing": failing, "drain": any(f in DRAIN_CHECKS for f in failing)})
            reasons = sorted(THROTTLING & set(gpu.counters.get("throttle_reasons") or ()))
            if reasons:
                throttled.append({**ident, "reasons": reasons})
        failing_node = [name for name, ok in health.node_checks.items() if not ok]
        if mine and failing_node:
            node_rows.append(
                {"node": node.name, "failing": failing_node, "drain": any(f in DRAIN_CHECKS for f in failing_node)}
            )
    return {
        "healthy": not (gpus or node_rows),
        "unhealthy_gpus": gpus,
        "throttled_gpus": throttled,
        "unhealthy_nodes": node_rows,
    }
