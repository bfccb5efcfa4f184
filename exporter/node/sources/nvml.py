"""The NVML counter source: per-GPU (and per-MIG-instance) samples, GPM on Hopper+, XIDs, NVLink, attribution.

Capabilities are probed per device by trying each counter: one that answers NOT_SUPPORTED / NO_PERMISSION is left out
of that device's samples for good and logged once; it is never sent as zero. A device that answers GPU_IS_LOST is
reported ``up: false`` with no counters (never with its last values) until it answers again.

GPM metrics (SM active, SM occupancy, tensor active, DRAM bandwidth, NVLink and PCIe rates) need two samples at least
100 ms apart ("the interval between two nvmlGpmSampleGet() calls should be greater than 100ms"); the source keeps a
previous and a current sample per device and rotates them, so each cycle's values cover the time since the last one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from mfumon.exporter.errors import CounterUnsupported, DeviceError, GpuLost
from mfumon.exporter.node.attribution import GpuProcess, JobResolver
from mfumon.exporter.node.sharing import split_gpu
from mfumon.exporter.node.sources.nvml_api import DeviceInfo, NvlinkTotals, NvmlApi, PcieLink
from mfumon.exporter.node.sources.xid import XidWatcher
from mfumon.exporter.samples import GpuSample, JobShare, SoftwareEntry, software_entries

__all__ = ["GPM_MIN_INTERVAL_S", "NvmlSource"]

logger = logging.getLogger(__name__)

GPM_MIN_INTERVAL_S = 0.1
"""NVML's documented minimum spacing of two GPM samples."""


@dataclass
class _DeviceState:
    """What the source remembers about one device between cycles."""

    unsupported: set[str] = field(default_factory=set)
    lost: bool = False
    max_sm_clock_hz: float | None = None
    pcie_link_max: PcieLink | None = None
    gpm_samples: list[Any] = field(default_factory=list)
    gpm_taken_at: float | None = None
    nvlink_prev: NvlinkTotals | None = None
    process_samples_since_us: int = 0  # newest per-process utilization sample read so far (NVML's timeStamp)


class NvmlSource:
    """Reads every GPU through :class:`NvmlApi` once per :meth:`collect`.

    Args:
        api: an initialised NVML wrapper (``NvmlApi.load()``).
        resolver: maps a device's compute processes / mapping file to a job id; ``None`` disables attribution.
        rescan_s: how often the device list (and MIG layout) is enumerated again.
        clock: monotonic clock, injectable for tests of the GPM spacing.
    """

    name = "nvml"

    def __init__(
        self,
        api: NvmlApi,
        resolver: JobResolver | None = None,
        *,
        rescan_seconds: float = 60.0,
        xid_poll_ms: int = 500,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._resolver = resolver
        self._rescan_seconds = rescan_seconds
        self._clock = clock
        self.error_count = 0
        self._state: dict[str, _DeviceState] = {}
        self._devices = api.devices()
        self._software_told: set[str] = set()  # software NVML refused: logged once, then at debug level
        self._software = self._read_software(self._devices)
        self._scanned_at = clock()
        physical = {d.physical_uuid: d.parent_handle or d.handle for d in self._devices}
        self._xid = XidWatcher(api, sorted(physical.items()), poll_ms=xid_poll_ms)
        self._xid.start()
        for device in self._devices:
            self._prime_gpm(device, self._state_of(device))

    @property
    def devices(self) -> list[DeviceInfo]:
        """The devices enumerated at the last scan."""
        return list(self._devices)

    def close(self) -> None:
        """Stop the XID thread, free GPM samples and shut NVML down."""
        self._xid.stop()
        for state in self._state.values():
            for sample in state.gpm_samples:
                self._api.gpm_free(sample)
            state.gpm_samples.clear()
        self._api.shutdown()

    def collect(self) -> list[GpuSample]:
        """One sample per device; never raises for a single device's failure."""
        self._maybe_rescan()
        return [self._sample(device, self._state_of(device)) for device in self._devices]

    def software(self) -> tuple[SoftwareEntry, ...]:
        """The node's driver, the CUDA version it supports and each distinct VBIOS, as read at the last enumeration."""
        return self._software

    def _read_software(self, devices: list[DeviceInfo]) -> tuple[SoftwareEntry, ...]:
        """Read once per enumeration (a driver changes only with a reload, which a rescan sees). Whatever NVML
        refuses (NOT_SUPPORTED, a lost GPU, a pynvml without the call) is left out; nothing here fails a sample."""
        api = self._api
        pairs: list[tuple[str, str]] = []
        for component, read in (("driver", api.driver_version), ("cuda_driver", api.cuda_driver_version)):
            try:
                pairs.append((component, read()))
            except Exception as exc:  # an NVML error, or a binding that answers otherwise: left out
                self._software_unavailable(f"{component} version", exc)
        boards = {device.physical_uuid: device.parent_handle or device.handle for device in devices}
        vbios: set[str] = set()
        for uuid, board in boards.items():
            try:
                vbios.add(api.vbios_version(board))
            except Exception as exc:
                self._software_unavailable(f"GPU {uuid}: VBIOS version", exc)
        pairs.extend(("vbios", version) for version in sorted(vbios))
        return software_entries(pairs)

    def _software_unavailable(self, what: str, exc: Exception) -> None:
        level = logging.DEBUG if what in self._software_told else logging.INFO
        self._software_told.add(what)
        logger.log(level, "%s unavailable, not reported: %s", what, exc)

    # -- internals -----------------------------------------------------------------------------------------------

    def _state_of(self, device: DeviceInfo) -> _DeviceState:
        state = self._state.get(device.uuid)
        if state is None:
            state = self._state[device.uuid] = _DeviceState()
        return state

    def _maybe_rescan(self) -> None:
        if self._clock() - self._scanned_at < self._rescan_seconds:
            return
        self._scanned_at = self._clock()
        try:
            devices = self._api.devices()
        except DeviceError as exc:
            self.error_count += 1
            logger.warning("re-enumerating GPUs failed, keeping the previous list: %s", exc)
            return
        known = {d.uuid for d in devices}
        for uuid in [u for u in self._state if u not in known]:
            for sample in self._state.pop(uuid).gpm_samples:
                self._api.gpm_free(sample)
        self._devices = devices
        self._software = self._read_software(devices)
        for device in devices:
            state = self._state_of(device)
            if not state.gpm_samples:
                self._prime_gpm(device, state)

    def _unsupported(self, device: DeviceInfo, state: _DeviceState, counter: str, exc: Exception) -> None:
        state.unsupported.add(counter)
        logger.info("GPU %s (%s): %s unavailable, left out of its samples: %s", device.key, device.uuid, counter, exc)

    def _read(self, device: DeviceInfo, state: _DeviceState, counter: str, fn: Callable[[], Any]) -> Any:
        """Run one counter read; ``None`` when unsupported (remembered) or failed (counted). Lost propagates."""
        if counter in state.unsupported:
            return None
        try:
            return fn()
        except CounterUnsupported as exc:
            self._unsupported(device, state, counter, exc)
        except GpuLost:
            raise
        except DeviceError as exc:
            self.error_count += 1
            logger.debug("GPU %s: reading %s failed: %s", device.key, counter, exc)
        return None

    def _sample(self, device: DeviceInfo, state: _DeviceState) -> GpuSample:
        try:
            counters = self._counters(device, state)
        except GpuLost as exc:
            if not state.lost:
                logger.error("GPU %s (%s) is lost: %s", device.key, device.uuid, exc)
            state.lost = True
            state.gpm_taken_at = None
            state.nvlink_prev = None
            return GpuSample(device.uuid, device.index, device.name, mig_profile=device.mig_profile, up=False)
        if state.lost:
            logger.warning("GPU %s (%s) answers again", device.key, device.uuid)
            state.lost = False
        processes = self._processes(device, state)
        counters["compute_processes"] = None if processes is None else len(processes)
        job_id = None
        shares = None
        if self._resolver is not None:
            job_id = self._resolver.resolve(device.key, processes or (), device.uuid, device.physical_uuid)
            shares = self._shares(device, state, processes or [], job_id)
            if shares is not None:
                job_id = shares[0].job_id  # the largest: what an aggregator that ignores shares attributes
        return GpuSample.build(
            device.uuid,
            device.index,
            device.name,
            counters,
            job_id=job_id,
            mig_profile=device.mig_profile,
            shares=shares,
        )

    def _shares(
        self, device: DeviceInfo, state: _DeviceState, processes: list[GpuProcess], resolved: str | None
    ) -> tuple[JobShare, ...] | None:
        """Each job's share of a GPU that two or more jobs' processes use (:mod:`~mfumon.exporter.node.sharing`);
        None for a GPU with one job, and always for a MIG instance (a slice is attributed whole)."""
        if device.mig_profile is not None or len(processes) < 2 or self._resolver is None:
            return None
        jobs = {p.pid: job for p in processes if (job := self._resolver.process_job(p.pid)) is not None}
        if len(set(jobs.values())) < 2:
            return None
        api, h = self._api, device.handle

        def sampled() -> dict[int, float] | None:
            read = self._read(
                device, state, "process_utilization", lambda: api.process_utilization(h, state.process_samples_since_us)
            )
            if read is None:
                return None
            busy, state.process_samples_since_us = read
            return busy

        try:
            return split_gpu(
                jobs,
                [
                    ("process_utilization", sampled),
                    (
                        "accounting",
                        lambda: self._read(device, state, "accounting", lambda: api.accounting_utilization(h)),
                    ),
                ],
                prefer=resolved,
            )
        except GpuLost:
            return None

    def _counters(self, device: DeviceInfo, state: _DeviceState) -> dict[str, Any]:
        api, h = self._api, device.handle
        # Clocks, temperature and throttle reasons belong to the physical GPU; power/memory/ECC to the handle.
        board = device.parent_handle or h
        out: dict[str, Any] = {}
        memory = self._read(device, state, "memory", lambda: api.memory_bytes(h))
        if memory is not None:
            out["memory_used_bytes"], out["memory_total_bytes"] = memory
        out["utilization"] = self._read(device, state, "utilization", lambda: api.utilization(h))
        out["power_watts"] = self._read(device, state, "power", lambda: api.power_watts(h))
        out["temperature_celsius"] = self._read(device, state, "temperature", lambda: api.temperature_celsius(board))
        out["sm_clock_hz"] = self._read(device, state, "sm_clock", lambda: api.sm_clock_hz(board))
        if state.max_sm_clock_hz is None:  # static: read once
            state.max_sm_clock_hz = self._read(
                device, state, "max_sm_clock", lambda: api.sm_clock_hz(board, maximum=True)
            )
        out["max_sm_clock_hz"] = state.max_sm_clock_hz
        out["throttle_reasons"] = self._read(device, state, "throttle_reasons", lambda: api.throttle_reasons(board))
        out["ecc_uncorrected_total"] = self._read(
            device, state, "ecc_uncorrected", lambda: api.ecc_total(h, corrected=False)
        )
        out["ecc_corrected_total"] = self._read(
            device, state, "ecc_corrected", lambda: api.ecc_total(h, corrected=True)
        )
        out.update(self._gpm(device, state))
        if "nvlink_tx_bytes_per_second" not in out:
            out.update(self._nvlink_rates(device, state))
        out["xid_errors_total"] = self._xid.total(device.physical_uuid, device.gpu_instance_id)
        out.update(self._health(device, state, board))
        return out

    def _health(self, device: DeviceInfo, state: _DeviceState, board: Any) -> dict[str, Any]:
        """Error counters that explain a slow or failing GPU, and energy; each left out where unsupported.

        Remapped rows, PCIe replays and link, NVLink errors and the fabric belong to the board, so a MIG instance
        reports its parent's (each instance of a failing board is unhealthy). Energy is read on the device's own
        handle: a MIG instance has none, so its idle energy is not counted twice; it sends its board's energy and
        power as ``board_*``, which the aggregator splits by the instance's share of the GPU. The link's maximum is
        static: read once.
        """
        api, out = self._api, {}
        out["energy_joules_total"] = self._read(device, state, "energy", lambda: api.energy_joules(device.handle))
        if device.parent_handle is not None:  # a MIG instance: the board's, which the aggregator apportions
            out["board_energy_joules_total"] = self._read(
                device, state, "board_energy", lambda: api.energy_joules(board)
            )
            out["board_power_watts"] = self._read(device, state, "board_power", lambda: api.power_watts(board))
        out["pcie_replays_total"] = self._read(device, state, "pcie_replays", lambda: api.pcie_replays(board))
        rows = self._read(device, state, "remapped_rows", lambda: api.remapped_rows(board))
        if rows is not None:
            out["remapped_rows_correctable_total"] = rows.correctable
            out["remapped_rows_uncorrectable_total"] = rows.uncorrectable
            out["row_remap_pending"] = rows.pending
            out["row_remap_failure"] = rows.failure
        out.update(self._read(device, state, "nvlink_errors", lambda: api.nvlink_errors(board)) or {})
        link = self._read(device, state, "pcie_link", lambda: api.pcie_link(board))
        if link is not None:
            out["pcie_link_gen"], out["pcie_link_width"] = link.generation, link.width
            if state.pcie_link_max is None:
                state.pcie_link_max = self._read(
                    device, state, "pcie_link_max", lambda: api.pcie_link(board, maximum=True)
                )
            top = state.pcie_link_max
            if top is not None:
                out["pcie_link_gen_max"], out["pcie_link_width_max"] = top.generation, top.width
        fabric = self._read(device, state, "fabric", lambda: api.fabric_health(board))
        if fabric is not None:
            out.update(fabric.counters())
        if device.physical_uuid in self._xid.registered:  # 0: no XID since the exporter started
            out["last_xid"] = self._xid.last_xid(device.physical_uuid) or 0
        return out

    def _prime_gpm(self, device: DeviceInfo, state: _DeviceState) -> None:
        """Allocate the two GPM samples of a device and take the first one."""
        if not device.gpm_supported or "gpm" in state.unsupported:
            return
        try:
            state.gpm_samples = [self._api.gpm_alloc(), self._api.gpm_alloc()]
            self._api.gpm_sample(device, state.gpm_samples[0])
            state.gpm_taken_at = self._clock()
        except DeviceError as exc:
            self._unsupported(device, state, "gpm", exc)

    def _gpm(self, device: DeviceInfo, state: _DeviceState) -> dict[str, Any]:
        if not state.gpm_samples or "gpm" in state.unsupported:
            return {}
        now = self._clock()
        if state.gpm_taken_at is not None and now - state.gpm_taken_at < GPM_MIN_INTERVAL_S:
            return {}  # too soon: keep the older sample so the next cycle has a valid interval
        previous, current = state.gpm_samples
        try:
            if state.gpm_taken_at is None:  # first interval after a loss or a failed read: start it now
                self._api.gpm_sample(device, previous)
                state.gpm_taken_at = now
                return {}
            self._api.gpm_sample(device, current)
            metrics, refused = self._api.gpm_metrics(previous, current)
        except CounterUnsupported as exc:
            self._unsupported(device, state, "gpm", exc)
            return {}
        except GpuLost:
            raise
        except DeviceError as exc:
            self.error_count += 1
            state.gpm_taken_at = None
            logger.debug("GPU %s: GPM read failed: %s", device.key, exc)
            return {}
        state.gpm_samples = [current, previous]
        state.gpm_taken_at = now
        for metric_id in refused:
            name = f"gpm_metric_{metric_id}"
            if name not in state.unsupported:
                self._unsupported(device, state, name, CounterUnsupported("NVML returned an error for it"))
        return {name: value for name, value in asdict(metrics).items() if value is not None}

    def _nvlink_rates(self, device: DeviceInfo, state: _DeviceState) -> dict[str, float]:
        """Bytes/s from the cumulative NVLink field counters (Ampere and older, or GPM without NVLink)."""
        totals = self._read(device, state, "nvlink", lambda: self._api.nvlink_totals(device.handle))
        if totals is None:
            return {}
        previous, state.nvlink_prev = state.nvlink_prev, totals
        if previous is None:
            return {}
        elapsed_seconds = (totals.timestamp_us - previous.timestamp_us) / 1e6
        tx, rx = totals.tx_bytes - previous.tx_bytes, totals.rx_bytes - previous.rx_bytes
        if elapsed_seconds <= 0 or tx < 0 or rx < 0:  # no new reading, or the counters reset
            return {}
        return {"nvlink_tx_bytes_per_second": tx / elapsed_seconds, "nvlink_rx_bytes_per_second": rx / elapsed_seconds}

    def _processes(self, device: DeviceInfo, state: _DeviceState) -> list[GpuProcess] | None:
        """The device's compute processes (their count is sent; they name the job), None when NVML cannot list them."""
        try:
            listed = self._read(device, state, "processes", lambda: self._api.compute_processes(device.handle))
        except GpuLost:
            return None
        if listed is None:
            return None
        return [GpuProcess(pid=pid, used_memory_bytes=used) for pid, used in listed]
