"""Simulated GPUs: realistic-looking counters for demos, tests and the overhead benchmark.

Every value is a pure function of ``(seed, GPU, time)``: smooth value noise (random knots, cosine interpolation) gives
a random walk without state, so two runs with the same seed and timestamps give the same samples, whichever thread
asks first. A workload's MFU wanders around its target; its GPUs' tensor-pipe activity follows that MFU (times a
per-profile factor: the pipe is busier than the achieved fraction of peak), and the other counters follow the load:

- ``training``: utilization ~100 %, SM active ~0.85, power near the limit, NVLink moderate, periodic checkpoint dips.
- ``comm_bound``: utilization still high, but tensor activity low and NVLink near its peak.
- ``inference``: bursty, "100 % utilized" by nvidia-smi's measure at a few percent MFU, DRAM-bound.
- ``idle``: clocks down, idle power, the ``gpu_idle`` clock-event reason.

Health counters (issue 15): energy is the integral of the simulated power (kept by :meth:`SimSource.collect`, the
only stateful part), PCIe replays and correctable remapped rows are small per-GPU constants, NVLink error totals are
zero, and :meth:`SimSource.schedule_fault` makes a GPU take an uncorrectable ECC error whose row remap then waits for
a reset (XID 63). :class:`SimIbPorts` simulates a node's InfiniBand ports, one of which may flap.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mfumon.exporter.errors import ConfigError
from mfumon.exporter.samples import GpuSample, IbPortSample, JobShare, SoftwareEntry, software_entries

__all__ = [
    "GPU_MODELS",
    "PROFILES",
    "SIM_SOFTWARE",
    "GpuModelSpec",
    "SimIbPorts",
    "SimPort",
    "SimSource",
    "SimWorkload",
    "job_mfu_at",
    "smooth_noise",
]

_MIB = 1024 * 1024
_MASK = (1 << 64) - 1
PROFILES: tuple[str, ...] = ("training", "comm_bound", "inference", "idle")

#: tensor-pipe activity per unit of MFU: the pipe runs below peak rate while active (clocks, occupancy, dtype mix).
_TENSOR_PER_MFU = {"training": 1.15, "comm_bound": 1.2, "inference": 1.6, "idle": 0.0}
#: relative amplitude of the smooth wander of a workload's MFU around its target.
_WANDER = {"training": 0.05, "comm_bound": 0.12, "inference": 0.15, "idle": 0.0}


@dataclass(frozen=True, slots=True)
class GpuModelSpec:
    """What the simulator needs to know about a GPU model (NVML name as printed by nvidia-smi)."""

    name: str
    memory_total_bytes: int
    max_sm_clock_hz: float
    idle_sm_clock_hz: float
    power_limit_watts: float
    idle_power_watts: float
    nvlink_bytes_per_second: float  # per direction, all links (XGMI on AMD)
    #: the host link's maximum PCIe generation and width (None: the source reads no link state)
    pcie_generation: int | None = None
    pcie_width: int = 16
    #: counters this vendor's source does not send (amdsmi: no tensor/SM activity, XIDs, remapped rows, energy ...)
    absent: frozenset[str] = frozenset()


#: Sample fields the amdsmi source never sends (exporter/node/sources/amdsmi.py): no matrix-core or SM activity
#: counter, no XIDs, row remapping, NVLink error counters, clock-event reasons, PCIe byte rates or energy.
AMDSMI_ABSENT: frozenset[str] = frozenset(
    {
        "sm_active",
        "sm_occupancy",
        "tensor_active",
        "pcie_tx_bytes_per_second",
        "pcie_rx_bytes_per_second",
        "throttle_reasons",
        "xid_errors_total",
        "last_xid",
        "nvlink_crc_flit_errors_total",
        "nvlink_crc_data_errors_total",
        "nvlink_replay_errors_total",
        "nvlink_recovery_errors_total",
        "remapped_rows_correctable_total",
        "remapped_rows_uncorrectable_total",
        "row_remap_pending",
        "row_remap_failure",
        "energy_joules_total",
    }
)

#: Board figures from NVIDIA datasheets (H100 SXM 700 W, NVLink4 900 GB/s, PCIe Gen5 x16; A100 SXM 400 W, NVLink3
#: 600 GB/s, PCIe Gen4 x16; HGX B200 1000 W, NVLink5 1.8 TB/s, 1965 MHz boost); memory totals and idle clocks as
#: NVML/dcgm-exporter report them (B200: memory total from nvidia-smi output, its idle clock and power assumed).
GPU_MODELS: dict[str, GpuModelSpec] = {
    spec.name: spec
    for spec in (
        GpuModelSpec("NVIDIA H100 80GB HBM3", 81559 * _MIB, 1980e6, 345e6, 700.0, 70.0, 450e9, pcie_generation=5),
        GpuModelSpec("NVIDIA H200", 143771 * _MIB, 1980e6, 345e6, 700.0, 75.0, 450e9, pcie_generation=5),
        GpuModelSpec("NVIDIA A100-SXM4-80GB", 81920 * _MIB, 1410e6, 210e6, 400.0, 55.0, 300e9, pcie_generation=4),
        GpuModelSpec("NVIDIA A100-SXM4-40GB", 40960 * _MIB, 1410e6, 210e6, 400.0, 50.0, 300e9, pcie_generation=4),
        GpuModelSpec("NVIDIA B200", 183359 * _MIB, 1965e6, 600e6, 1000.0, 140.0, 900e9, pcie_generation=5),
        # AMD MI300X page: 192 GB HBM3, 2100 MHz peak engine clock, 750 W; Infinity Fabric 7 x 128 GB/s links,
        # 448 GB/s per direction. Read through amdsmi: what that source cannot send is absent.
        GpuModelSpec("AMD Instinct MI300X", 196608 * _MIB, 2100e6, 132e6, 750.0, 140.0, 448e9, absent=AMDSMI_ABSENT),
    )
}


#: The software a simulated node reports (issue 59), per vendor: an R550 driver with the CUDA 12.4 it supports and a
#: Hopper VBIOS as nvidia-smi prints them; ROCm 6.2's amdgpu and an MI300X VBIOS as amd-smi prints them.
SIM_SOFTWARE: dict[str, dict[str, str]] = {
    "nvidia": {"driver": "550.54.15", "cuda_driver": "12.4", "vbios": "96.00.74.00.01"},
    "amd": {"driver": "6.8.5", "vbios": "022.040.003.042.000001"},
}


@dataclass(frozen=True, slots=True)
class SimWorkload:
    """What runs on a simulated GPU. GPUs sharing a ``job_id`` share the job's MFU curve."""

    profile: str = "idle"
    target_mfu: float = 0.0
    job_id: str | None = None
    step_seconds: float = 2.0
    checkpoint_every_seconds: float | None = 900.0
    checkpoint_seconds: float = 30.0
    #: executed tensor work per unit of model FLOPs: 4/3 with full activation recompute (HFU = MFU x 8/6)
    tensor_scale: float = 1.0
    #: SM clock ÷ max SM clock of a GPU held down for heat (a straggler): below 1 the same work keeps its tensor
    #: pipes busy for longer (activity ÷ this fraction) and it reports the hardware thermal slowdown
    clock_fraction: float = 1.0

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ConfigError(f"unknown workload profile {self.profile!r} (choose from {', '.join(PROFILES)})")
        if not 0.0 <= self.target_mfu <= 1.0:
            raise ConfigError(f"target_mfu must be within 0-1, got {self.target_mfu}")
        if not 0.0 < self.clock_fraction <= 1.0:
            raise ConfigError(f"clock_fraction must be within 0-1, got {self.clock_fraction}")


def _unit(seed: int, stream: int, knot: int) -> float:
    """Deterministic uniform value in [-1, 1) for one knot of one stream (splitmix64)."""
    x = (seed * 0x9E3779B97F4A7C15 + stream * 0xBF58476D1CE4E5B9 + knot * 0x94D049BB133111EB) & _MASK
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _MASK
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _MASK
    x ^= x >> 31
    return x / 2**63 - 1.0


def smooth_noise(seed: int, stream: int, t: float, period_seconds: float) -> float:
    """A smooth random walk in [-1, 1]: random knots every ``period_s`` seconds, cosine-interpolated."""
    u = t / period_seconds
    knot = math.floor(u)
    w = (1.0 - math.cos(math.pi * (u - knot))) / 2.0
    return _unit(seed, stream, knot) * (1.0 - w) + _unit(seed, stream, knot + 1) * w


def _stream(label: str) -> int:
    return int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "big")


def job_mfu_at(workload: SimWorkload, seed: int, t: float) -> float:
    """The workload's MFU at time ``t``: target x smooth wander x step ripple x checkpoint dips."""
    if workload.profile == "idle" or workload.target_mfu <= 0:
        return 0.0
    stream = _stream(workload.job_id or workload.profile)
    wander = 0.7 * smooth_noise(seed, stream, t, 180.0) + 0.3 * smooth_noise(seed, stream + 1, t, 23.0)
    level = workload.target_mfu * (1.0 + _WANDER[workload.profile] * wander)
    # Step periodicity: a small ripple with the period of a logging/eval cycle (25 steps).
    level *= 1.0 + 0.02 * math.sin(2 * math.pi * t / (25 * workload.step_seconds))
    if workload.checkpoint_every_seconds and workload.profile != "inference":
        phase = (t + (stream % 997)) % workload.checkpoint_every_seconds
        if phase < workload.checkpoint_seconds:
            level *= 0.15  # checkpoint write: the GPUs wait on storage
    return min(0.95, max(0.0, level))


class SimSource:
    """``count`` simulated GPUs of one model on one node.

    Args:
        node: node name (part of the deterministic UUIDs).
        model: NVML device name, a key of :data:`GPU_MODELS`.
        workload: what every GPU runs until :meth:`assign` changes one.
        clock: wall clock giving the sample time (injectable for deterministic tests).
    """

    name = "sim"

    def __init__(
        self,
        *,
        node: str,
        model: str = "NVIDIA H100 80GB HBM3",
        count: int = 8,
        seed: int = 0,
        workload: SimWorkload | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        spec = GPU_MODELS.get(model)
        if spec is None:
            raise ConfigError(f"unknown simulated GPU model {model!r} (known: {', '.join(GPU_MODELS)})")
        if count < 1:
            raise ConfigError("a simulated node needs at least one GPU")
        self.spec = spec
        self.error_count = 0
        self._seed = seed
        self._clock = clock
        self._workloads = [workload or SimWorkload()] * count
        self._lost = [False] * count
        self._link_width = [spec.pcie_width] * count  # a GPU's PCIe link may train at fewer lanes than it has
        self._uuids = [self._uuid(node, i) for i in range(count)]
        self._streams = [_stream(uuid) for uuid in self._uuids]
        self._faults: dict[int, float] = {}  # GPU index -> time its uncorrectable error happens
        self._shares: dict[int, tuple[JobShare, ...]] = {}  # GPU index -> the jobs sharing it
        # Energy since the (simulated) driver load: a day of idle draw, then the integral of the power sampled.
        self._energy = [spec.idle_power_watts * 86400.0] * count
        self._energy_at: float | None = None
        self._energy_lock = threading.Lock()
        self._software = software_entries(SIM_SOFTWARE["amd" if spec.name.startswith("AMD") else "nvidia"].items())

    def _uuid(self, node: str, index: int) -> str:
        h = hashlib.sha1(f"{self._seed}/{node}/{index}".encode()).hexdigest()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    @property
    def uuids(self) -> list[str]:
        return list(self._uuids)

    def assign(self, index: int, workload: SimWorkload) -> None:
        """Run ``workload`` on GPU ``index`` from now on."""
        self._workloads[index] = workload

    def share(self, index: int, shares: tuple[JobShare, ...]) -> None:
        """GPU ``index`` is shared by these jobs (time-slicing) from now on; its workload is their sum."""
        self._shares[index] = shares

    def downtrain(self, index: int, width: int) -> None:
        """GPU ``index``'s PCIe link trains at ``width`` lanes (a reseat or a bad riser), at any load."""
        self._link_width[index] = width

    def set_lost(self, index: int, lost: bool = True) -> None:
        """Make GPU ``index`` fall off the bus (or come back)."""
        self._lost[index] = lost

    def schedule_fault(self, index: int, at: float) -> None:
        """From ``at`` on, GPU ``index`` has had an uncorrectable ECC error whose row remap waits for a reset."""
        self._faults[index] = at

    def software(self) -> tuple[SoftwareEntry, ...]:
        """The node's driver and firmware, as a real source reads them at enumeration."""
        return self._software

    def set_software(self, versions: Mapping[str, str]) -> None:
        """Report these versions from now on (an upgrade): component -> version, e.g. ``{"driver": "560.35.03"}``."""
        self._software = software_entries(versions.items())

    def close(self) -> None:
        """Nothing to release."""

    def collect(self) -> list[GpuSample]:
        """The samples now, with energy integrated from the power since the previous call."""
        t = self._clock()
        samples = self.sample_at(t)
        with self._energy_lock:
            elapsed = 0.0 if self._energy_at is None else max(0.0, t - self._energy_at)
            self._energy_at = t
            out = []
            for i, sample in enumerate(samples):
                if not sample.up or "energy_joules_total" in self.spec.absent:
                    out.append(sample)
                    continue
                self._energy[i] += (sample.power_watts or 0.0) * elapsed
                out.append(replace(sample, energy_joules_total=self._energy[i]))
        return out

    def sample_at(self, t: float) -> list[GpuSample]:
        """The samples of every GPU at time ``t`` (pure: no state changes)."""
        return [self._gpu_at(i, t) for i in range(len(self._workloads))]

    def _gpu_at(self, index: int, t: float) -> GpuSample:
        spec, work, stream = self.spec, self._workloads[index], self._streams[index]
        uuid, name = self._uuids[index], spec.name
        if self._lost[index]:
            return GpuSample(uuid=uuid, index=index, name=name, up=False, job_id=work.job_id)
        jitter = smooth_noise(self._seed, stream, t, 7.0)
        slow = smooth_noise(self._seed, stream + 1, t, 300.0)
        x = job_mfu_at(work, self._seed, t) * _TENSOR_PER_MFU[work.profile] * work.tensor_scale * (1.0 + 0.03 * jitter)
        if work.clock_fraction < 1.0:
            x = min(0.98, x / work.clock_fraction)
        counters: dict[str, Any] = dict(_profile_counters(work.profile, x, jitter, spec))
        load = counters.pop("_load")
        power = spec.idle_power_watts + (spec.power_limit_watts - spec.idle_power_watts) * load
        power *= 1.0 + 0.015 * jitter
        capped = power >= 0.97 * spec.power_limit_watts
        clock_hz = spec.idle_sm_clock_hz if work.profile == "idle" else spec.max_sm_clock_hz
        if capped:
            clock_hz *= 0.93 + 0.02 * jitter
        throttle = ("gpu_idle",) if work.profile == "idle" else ("sw_power_cap",) if capped else ()
        if work.clock_fraction < 1.0 and work.profile != "idle":
            clock_hz = spec.max_sm_clock_hz * work.clock_fraction
            throttle = ("hw_thermal",)
        counters.update(
            tensor_active=x,
            power_watts=min(power, spec.power_limit_watts),
            temperature_celsius=31.0 + 44.0 * load + 1.5 * slow + (15.0 if work.clock_fraction < 1.0 else 0.0),
            sm_clock_hz=clock_hz,
            max_sm_clock_hz=spec.max_sm_clock_hz,
            memory_total_bytes=float(spec.memory_total_bytes),
            memory_used_bytes=counters.pop("_memory_fraction") * spec.memory_total_bytes,
            throttle_reasons=throttle,
            xid_errors_total=0,
            ecc_uncorrected_total=0,
            ecc_corrected_total=0,
            compute_processes=0 if work.profile == "idle" else 1,
            nvlink_crc_flit_errors_total=0,
            nvlink_crc_data_errors_total=0,
            nvlink_replay_errors_total=0,
            nvlink_recovery_errors_total=0,
            pcie_replays_total=stream % 4,
            remapped_rows_correctable_total=(stream >> 8) % 3,
            remapped_rows_uncorrectable_total=0,
            row_remap_pending=0,
            row_remap_failure=0,
            last_xid=0,
        )
        if spec.pcie_generation is not None:
            # An idle GPU drops its link to Gen1 to save power; it trains back up to its maximum under load.
            counters.update(
                pcie_link_gen=1 if work.profile == "idle" else spec.pcie_generation,
                pcie_link_gen_max=spec.pcie_generation,
                pcie_link_width=self._link_width[index],
                pcie_link_width_max=spec.pcie_width,
            )
        fault_at = self._faults.get(index)
        if fault_at is not None and t >= fault_at:  # a DBE: XID 48, then the row remap is recorded (XID 63)
            counters.update(
                xid_errors_total=2,
                ecc_uncorrected_total=1,
                remapped_rows_uncorrectable_total=1,
                row_remap_pending=1,
                last_xid=63,
            )
        if spec.absent:
            counters = {k: v for k, v in counters.items() if k not in spec.absent}
            counters["ecc_deferred_total"] = 0
        shares = self._shares.get(index)
        if shares:
            return GpuSample.build(uuid, index, name, counters, job_id=shares[0].job_id, shares=shares)
        return GpuSample.build(uuid, index, name, counters, job_id=work.job_id)


def _profile_counters(profile: str, x: float, jitter: float, spec: GpuModelSpec) -> dict[str, float]:
    """Counters that follow tensor activity ``x`` for one profile (plus ``_load`` and ``_memory_fraction``)."""
    nvlink = spec.nvlink_bytes_per_second
    if profile == "training":
        sm = min(0.98, 0.25 + 1.2 * x)
        out = {"utilization": min(1.0, 0.3 + 1.6 * x), "sm_active": sm, "dram_active": 0.15 + 0.5 * x}
        out |= {"nvlink": nvlink * (0.04 + 0.1 * x), "pcie": 2e9 * x, "_load": min(1.0, 0.35 + 1.05 * x)}
        out["_memory_fraction"] = 0.88
    elif profile == "comm_bound":
        sm = min(0.98, 0.2 + 1.0 * x)
        out = {"utilization": min(1.0, 0.55 + 1.5 * x), "sm_active": sm, "dram_active": 0.1 + 0.5 * x}
        out |= {"nvlink": nvlink * (0.45 + 0.1 * jitter), "pcie": 1e9 * x, "_load": min(1.0, 0.25 + 0.8 * x)}
        out["_memory_fraction"] = 0.8
    elif profile == "inference":
        sm = min(0.98, 0.15 + 1.5 * x)
        out = {"utilization": min(1.0, 0.35 + 4.0 * x), "sm_active": sm, "dram_active": min(0.95, 0.35 + 2 * x)}
        out |= {"nvlink": nvlink * 0.02, "pcie": 3e8 + 1e9 * x, "_load": min(1.0, 0.2 + 1.5 * x)}
        out["_memory_fraction"] = 0.92
    else:
        sm = 0.0
        out = {"utilization": 0.0, "sm_active": 0.0, "dram_active": 0.0, "nvlink": 0.0, "pcie": 1e5, "_load": 0.0}
        out["_memory_fraction"] = 512 * _MIB / spec.memory_total_bytes
    out["sm_occupancy"] = 0.45 * sm
    link, bus = out.pop("nvlink"), out.pop("pcie")
    out |= {"nvlink_tx_bytes_per_second": link, "nvlink_rx_bytes_per_second": link * (1.0 + 0.01 * jitter)}
    out |= {"pcie_tx_bytes_per_second": bus, "pcie_rx_bytes_per_second": bus * 1.3}
    return out


@dataclass(frozen=True, slots=True)
class SimPort:
    """A simulated InfiniBand port: its rate, its traffic, and whether (how often) its link flaps."""

    device: str
    port: int = 1
    rate_gbps: float = 400.0
    traffic_bytes_per_second: float = 2e9
    flap_every_seconds: float | None = None  # the link goes down and retrains this often
    down_for_seconds: float = 2.0


class SimIbPorts:
    """A node's simulated InfiniBand ports as the sysfs reader reports them (bytes, states, error counters).

    Counters are pure functions of time since ``started`` (deterministic, monotonic). A flapping port counts one
    ``link_downed`` per period, reports ``DOWN``/``Polling`` for the first ``down_for_s`` of each, and picks up
    symbol errors and link recoveries with it: the signature of a bad cable or transceiver.
    """

    name = "sim-infiniband"

    def __init__(
        self, ports: Sequence[SimPort], *, started: float | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.ports = tuple(ports)
        self._clock = clock
        self.started = clock() if started is None else started

    def available(self) -> bool:
        return bool(self.ports)

    def collect(self) -> list[IbPortSample]:
        return self.sample_at(self._clock())

    def sample_at(self, t: float) -> list[IbPortSample]:
        elapsed = max(0.0, t - self.started)
        out = []
        for spec in self.ports:
            flaps, down = 0, False
            if spec.flap_every_seconds:
                flaps = int(elapsed // spec.flap_every_seconds)
                down = flaps > 0 and elapsed % spec.flap_every_seconds < spec.down_for_seconds
            moved = int(spec.traffic_bytes_per_second * elapsed) // 4 * 4  # whole 4-byte words
            out.append(
                IbPortSample(
                    device=spec.device,
                    port=spec.port,
                    link_layer="InfiniBand",
                    state="DOWN" if down else "ACTIVE",
                    phys_state="Polling" if down else "LinkUp",
                    rate_bytes_per_second=spec.rate_gbps * 1e9 / 8,
                    link_downed_total=flaps,
                    symbol_errors_total=37 * flaps,
                    receive_errors_total=5 * flaps,
                    link_error_recovery_total=2 * flaps,
                    transmit_discards_total=11 * flaps,
                    transmit_bytes_total=(1 << 40) + moved,
                    receive_bytes_total=(1 << 40) + moved,
                )
            )
        return out
