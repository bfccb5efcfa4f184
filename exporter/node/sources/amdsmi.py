"""The AMD counter source: per-GPU samples of AMD Instinct nodes through ``amdsmi`` (ROCm), with attribution.

What each counter is on AMD (docs/operators/exporter.md has the table per source):

- ``utilization``: GFX engine activity; ``dram_active``: memory-controller (UMC) activity;
- ``power_watts``, ``temperature_celsius`` (hotspot), ``memory_*_bytes`` (VRAM), ``sm_clock_hz`` /
  ``max_sm_clock_hz`` (the GFX clock: the compute clock, as the SM clock is on NVIDIA);
- ``nvlink_tx/rx_bytes_per_second``: XGMI, the GPU-to-GPU fabric in the NVLink role, from the accumulated kB per link;
- ``ecc_*_total`` (only while the UMC RAS block is enabled: with it disabled the counts say nothing),
  ``ecc_deferred_total`` (AMD's deferred, poisoned errors), ``pcie_replays_total``;
- ``compute_processes`` and job attribution: the same rules as NVML (process environment, Kubernetes pod-resources
  ``amd.com/gpu``, the Slurm mapping directory). A GPU that several jobs' processes use is split by each process's
  GFX engine time since the last cycle (``process_utilization``), else equally.

There is no matrix-core (MFMA) activity counter in amdsmi, so no ``tensor_active``: the aggregator has no hardware
MFU estimate for AMD GPUs, says so in the cross-check ("no hardware counter"), and the job's reported MFU stands
alone. A counter the device refuses (NOT_SUPPORTED, NO_PERM) or reports as "N/A" is left out for good and logged
once, never sent as 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mfumon.exporter.errors import CounterUnsupported, DeviceError
from mfumon.exporter.node.attribution import GpuProcess, JobResolver
from mfumon.exporter.node.sharing import split_gpu
from mfumon.exporter.node.sources.amdsmi_api import AmdDevice, AmdSmiApi
from mfumon.exporter.samples import GpuSample, JobShare, SoftwareEntry, software_entries

__all__ = ["AmdSmiSource"]

logger = logging.getLogger(__name__)

#: RAS block states in which the block's error counting works (amd-smi static prints ENABLED; others are errors).
_RAS_COUNTING = frozenset({"ENABLED", "SING_C", "MULT_UC", "POISON", "PARITY"})


@dataclass
class _DeviceState:
    unsupported: set[str] = field(default_factory=set)
    max_clock_hz: float | None = None
    xgmi_prev: tuple[float, int, int] | None = None  # (monotonic time, read bytes, write bytes)
    gfx_ns: dict[int, int] = field(default_factory=dict)  # pid -> cumulative GFX engine ns at the last cycle


class AmdSmiSource:
    """Reads every AMD GPU through :class:`AmdSmiApi` once per :meth:`collect`."""

    name = "amdsmi"

    def __init__(
        self, api: AmdSmiApi, resolver: JobResolver | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._api = api
        self._resolver = resolver
        self._clock = clock
        self.error_count = 0
        self._devices = api.devices()
        self._state: dict[str, _DeviceState] = {}
        self._software = self._read_software()

    @property
    def devices(self) -> list[AmdDevice]:
        return list(self._devices)

    def close(self) -> None:
        self._api.shutdown()

    def collect(self) -> list[GpuSample]:
        return [self._sample(device, self._state.setdefault(device.uuid, _DeviceState())) for device in self._devices]

    def software(self) -> tuple[SoftwareEntry, ...]:
        """The node's amdgpu driver and each distinct VBIOS, as read when the GPUs were enumerated."""
        return self._software

    def _read_software(self) -> tuple[SoftwareEntry, ...]:
        """The driver (one per node: the first GPU that answers) and the VBIOS of each GPU; whatever amdsmi refuses
        is left out, and nothing here fails the source."""
        driver: str | None = None
        vbios: set[str] = set()
        for device in self._devices:
            if driver is None:
                driver = self._software_part(device, "driver", self._api.driver_version)
            version = self._software_part(device, "VBIOS", self._api.vbios_version)
            if version is not None:
                vbios.add(version)
        pairs = [] if driver is None else [("driver", driver)]
        return software_entries(pairs + [("vbios", version) for version in sorted(vbios)])

    def _software_part(self, device: AmdDevice, what: str, read: Callable[[Any], str]) -> str | None:
        try:
            return read(device.handle)
        except Exception as exc:  # an amdsmi error, or a binding that answers otherwise: left out
            logger.info("AMD GPU %d: %s version unavailable, not reported: %s", device.index, what, exc)
            return None

    # -- internals -----------------------------------------------------------------------------------------------

    def _read(self, device: AmdDevice, state: _DeviceState, counter: str, fn: Callable[[], Any]) -> Any:
        if counter in state.unsupported:
            return None
        try:
            return fn()
        except CounterUnsupported as exc:
            state.unsupported.add(counter)
            logger.info(
                "AMD GPU %d (%s): %s unavailable, left out of its samples: %s", device.index, device.uuid, counter, exc
            )
        except DeviceError as exc:
            self.error_count += 1
            logger.debug("AMD GPU %d: reading %s failed: %s", device.index, counter, exc)
        return None

    def _sample(self, device: AmdDevice, state: _DeviceState) -> GpuSample:
        api, h = self._api, device.handle
        out: dict[str, Any] = {}
        activity = self._read(device, state, "activity", lambda: api.activity(h))
        if activity is not None:
            out["utilization"], out["dram_active"] = activity
        out["power_watts"] = self._read(device, state, "power", lambda: api.power_watts(h))
        out["temperature_celsius"] = self._read(device, state, "temperature", lambda: api.temperature_celsius(h))
        memory = self._read(device, state, "memory", lambda: api.memory_bytes(h))
        if memory is not None:
            out["memory_used_bytes"], out["memory_total_bytes"] = memory
        clocks = self._read(device, state, "gfx_clock", lambda: api.gfx_clock_hz(h))
        if clocks is not None:
            out["sm_clock_hz"], maximum = clocks
            state.max_clock_hz = maximum or state.max_clock_hz
            out["max_sm_clock_hz"] = state.max_clock_hz
        out.update(self._errors(device, state))
        out.update(self._xgmi(device, state))
        listed = self._read(device, state, "processes", lambda: api.processes(h))
        out["compute_processes"] = None if listed is None else len(listed)
        job_id, shares = self._attribute(device, state, listed)
        return GpuSample.build(device.uuid, device.index, device.name, out, job_id=job_id, shares=shares)

    def _errors(self, device: AmdDevice, state: _DeviceState) -> dict[str, Any]:
        """ECC counts while the UMC (memory) RAS block counts errors, and PCIe replays."""
        api, h, out = self._api, device.handle, {}
        ras = self._read(device, state, "ras", lambda: api.ras_states(h))
        if ras is None or ras.get("UMC") in _RAS_COUNTING:
            ecc = self._read(device, state, "ecc", lambda: api.ecc(h))
            if ecc is not None:
                out["ecc_corrected_total"] = ecc.correctable
                out["ecc_uncorrected_total"] = ecc.uncorrectable
                out["ecc_deferred_total"] = ecc.deferred
        out["pcie_replays_total"] = self._read(device, state, "pcie_replays", lambda: api.pcie_replays(h))
        return out

    def _xgmi(self, device: AmdDevice, state: _DeviceState) -> dict[str, float]:
        totals = self._read(device, state, "xgmi", lambda: self._api.xgmi_bytes(device.handle))
        if totals is None:
            return {}
        now = self._clock()
        previous, state.xgmi_prev = state.xgmi_prev, (now, *totals)
        if previous is None:
            return {}
        elapsed = now - previous[0]
        read, write = totals[0] - previous[1], totals[1] - previous[2]
        if elapsed <= 0 or read < 0 or write < 0:
            return {}
        return {"nvlink_rx_bytes_per_second": read / elapsed, "nvlink_tx_bytes_per_second": write / elapsed}

    def _attribute(
        self, device: AmdDevice, state: _DeviceState, listed: list[tuple[int, int | None, int | None]] | None
    ) -> tuple[str | None, tuple[JobShare, ...] | None]:
        if self._resolver is None:
            return None, None
        processes = [GpuProcess(pid=pid, used_memory_bytes=vram) for pid, vram, _ in listed or ()]
        job_id = self._resolver.resolve(str(device.index), processes, device.uuid, bdf=device.bdf)
        gfx_now = {pid: ns for pid, _, ns in listed or () if ns is not None}
        before, state.gfx_ns = state.gfx_ns, gfx_now
        if len(processes) < 2:
            return job_id, None
        jobs = {p.pid: job for p in processes if (job := self._resolver.process_job(p.pid)) is not None}

        def busy() -> dict[int, float] | None:
            deltas = {
                pid: float(ns - before[pid]) for pid, ns in gfx_now.items() if pid in before and ns >= before[pid]
            }
            return deltas or None

        shares = split_gpu(jobs, [("process_utilization", busy)], prefer=job_id)
        return (shares[0].job_id if shares else job_id), shares
