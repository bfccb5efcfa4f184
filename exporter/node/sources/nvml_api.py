"""The only module that imports pynvml (from the ``nvidia-ml-py`` package), lazily.

Every call goes through :meth:`NvmlApi._call`, which translates ``NVMLError`` into :mod:`mfumon.exporter.errors`
(``GpuLost``, ``CounterUnsupported``, ``DeviceError``), and every result leaves this module as a plain number or a
frozen dataclass with units in its field names, converted at the source: mW -> W, MHz -> Hz, % -> ratio,
MiB/s -> B/s, KiB -> bytes. Handles stay opaque to the rest of the exporter.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from mfumon.exporter.errors import CounterUnsupported, DeviceError, GpuLost, SourceUnavailable
from mfumon.exporter.samples import THROTTLE_REASONS

__all__ = ["DeviceInfo", "FabricHealth", "GpmMetrics", "NvmlApi", "PcieLink", "RemappedRows", "XidEvent"]

T = TypeVar("T")

_MIB = 1024 * 1024
_XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
_NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS (Hopper: 18 links)
_FI_NVLINK_DATA_TX = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, cumulative KiB
_FI_NVLINK_DATA_RX = 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
_ALL_INSTANCES = 0xFFFFFFFF
#: NVLink error totals over all links: counter -> field ids to try, in order (nvml.h NVML_FI_DEV_*). The
#: ``*_COUNT_TOTAL`` fields (38/45/52/59) answer on Volta-Ampere; Hopper adds the data-link-layer totals
#: ``NVLINK_ERROR_DL_REPLAY/RECOVERY/CRC`` (161-163). Both answer per field: nvmlReturn 3 (NOT_SUPPORTED) arrives in
#: the field's own ``nvmlReturn`` (seen on a single-GPU H200 VM, bench/results/h200-2026-11-30/nvml_calls.json).
_NVLINK_ERROR_FIELDS: dict[str, tuple[int, ...]] = {
    "nvlink_crc_flit_errors_total": (38, 163),  # CRC_FLIT_ERROR_COUNT_TOTAL, else ERROR_DL_CRC
    "nvlink_crc_data_errors_total": (45,),  # CRC_DATA_ERROR_COUNT_TOTAL
    "nvlink_replay_errors_total": (52, 161),  # REPLAY_ERROR_COUNT_TOTAL, else ERROR_DL_REPLAY
    "nvlink_recovery_errors_total": (59, 162),  # RECOVERY_ERROR_COUNT_TOTAL, else ERROR_DL_RECOVERY
}
#: nvmlGpuFabricState_t (NVML_GPU_FABRIC_STATE_*) of a GPU outside any NVLink fabric, and of a finished probe
_FABRIC_STATE_NOT_SUPPORTED = 0
_FABRIC_STATE_COMPLETED = 3
#: The probe's state as dcgmFabricManagerStatus_t, the way DCGM derives its DCGM_FI_DEV_FABRIC_MANAGER_STATUS from the
#: same struct: not started 1, in progress 2, completed 3 (Success) unless its status is an error (4, Failure)
_FABRIC_MANAGER_STATUS = {1: 1, 2: 2}
_FABRIC_MANAGER_SUCCESS, _FABRIC_MANAGER_FAILURE, _FABRIC_MANAGER_UNRECOGNIZED = 3, 4, 5
_ARGUMENT_VERSION_MISMATCH = 25  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH: the driver does not know this struct version
#: nvmlValueType_t -> the member of c_nvmlValue_t that holds the value
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
_MIG_NAME = re.compile(r"\bMIG\s+(\S+)\s*$")

#: GPM metric id -> (field, scale). Ids from nvmlGpmMetricId_t (pynvml NVML_GPM_METRIC_*); utils are 0-100 %.
_GPM_METRICS: dict[int, tuple[str, float]] = {
    2: ("sm_active", 0.01),  # SM_UTIL
    3: ("sm_occupancy", 0.01),  # SM_OCCUPANCY
    5: ("tensor_active", 0.01),  # ANY_TENSOR_UTIL
    10: ("dram_active", 0.01),  # DRAM_BW_UTIL
    20: ("pcie_tx_bytes_per_second", _MIB),  # PCIE_TX_PER_SEC, MiB/s
    21: ("pcie_rx_bytes_per_second", _MIB),  # PCIE_RX_PER_SEC
    60: ("nvlink_rx_bytes_per_second", _MIB),  # NVLINK_TOTAL_RX_PER_SEC
    61: ("nvlink_tx_bytes_per_second", _MIB),  # NVLINK_TOTAL_TX_PER_SEC
}


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """A GPU, or a MIG instance of one, as enumerated this cycle."""

    index: int
    uuid: str
    name: str
    handle: Any = field(compare=False, repr=False)
    parent_handle: Any = field(default=None, compare=False, repr=False)
    mig_profile: str | None = None
    gpu_instance_id: int | None = None
    parent_uuid: str | None = None
    gpm_supported: bool = False

    @property
    def physical_uuid(self) -> str:
        """The UUID of the physical GPU (the parent's for a MIG instance): what XID events name."""
        return self.parent_uuid or self.uuid

    @property
    def key(self) -> str:
        """The mapping-file name of this device: ``"0"``, or ``"0.3"`` (GPU.GI) for a MIG instance."""
        return str(self.index) if self.gpu_instance_id is None else f"{self.index}.{self.gpu_instance_id}"


@dataclass(frozen=True, slots=True)
class GpmMetrics:
    """GPM metrics over the interval between two samples; a metric NVML did not return is ``None``."""

    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None
    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    nvlink_rx_bytes_per_second: float | None = None
    nvlink_tx_bytes_per_second: float | None = None


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One XID reported through the NVML event set."""

    uuid: str
    xid: int
    gpu_instance_id: int | None


@dataclass(frozen=True, slots=True)
class NvlinkTotals:
    """Cumulative NVLink data bytes over all links, with the NVML timestamp (µs) of the reading."""

    tx_bytes: int
    rx_bytes: int
    timestamp_us: int


@dataclass(frozen=True, slots=True)
class RemappedRows:
    """``nvmlDeviceGetRemappedRows``: HBM rows remapped to spares (Ampere+), and whether a remap waits for a reset."""

    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


@dataclass(frozen=True, slots=True)
class PcieLink:
    """A GPU's PCIe link: generation (1-6) and lane width (x1-x16), now or at most."""

    generation: int
    width: int


@dataclass(frozen=True, slots=True)
class FabricHealth:
    """``nvmlDeviceGetGpuFabricInfoV``: the GPU's standing in its NVLink fabric, as the sample's fabric fields.

    ``manager_status`` is the registration probe's state and status as ``dcgmFabricManagerStatus_t``;
    ``health_mask`` the NVML_GPU_FABRIC_HEALTH_MASK_* fields; ``health_summary`` NVML_GPU_FABRIC_HEALTH_SUMMARY_*
    (``nvmlGpuFabricInfo_v3`` only). NVML's 0, "not supported", is ``None``: left out, like an unsupported counter.
    """

    manager_status: int
    health_mask: int | None
    health_summary: int | None

    def counters(self) -> dict[str, int | None]:
        return {
            "fabric_manager_status": self.manager_status,
            "fabric_health_mask": self.health_mask,
            "fabric_health_summary": self.health_summary,
        }


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlApi:
    """Thin, typed wrapper over the pynvml functions the exporter uses."""

    def __init__(self, module: ModuleType) -> None:
        self._nvml = module
        self._ok = module.NVML_SUCCESS
        self._lost = {module.NVML_ERROR_GPU_IS_LOST}
        self._unsupported = {
            module.NVML_ERROR_NOT_SUPPORTED,
            module.NVML_ERROR_NO_PERMISSION,
            module.NVML_ERROR_FUNCTION_NOT_FOUND,
        }
        self._timeout = module.NVML_ERROR_TIMEOUT
        # nvmlGpuFabricInfo versions to try, newest first; one the driver does not know is dropped for every device
        structs = (getattr(module, "c_nvmlGpuFabricInfo_v3_t", None), getattr(module, "c_nvmlGpuFabricInfoV_t", None))
        self._fabric_structs = [struct for struct in dict.fromkeys(structs) if struct is not None]

    @classmethod
    def load(cls) -> NvmlApi:
        """Import pynvml and initialise NVML; ``SourceUnavailable`` when either fails."""
        try:
            module = importlib.import_module("pynvml")
        except ImportError as exc:
            raise SourceUnavailable("pynvml is not installed (pip install 'mfu-monitor[nvml]')") from exc
        try:
            module.nvmlInit()
        except module.NVMLError as exc:
            raise SourceUnavailable(f"NVML could not be initialised: {exc}") from exc
        return cls(module)

    def shutdown(self) -> None:
        """Release NVML (safe to call more than once)."""
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Call one pynvml function, translating its errors at this single boundary."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            name = getattr(fn, "__name__", "nvml")
            if code in self._lost:
                raise GpuLost(f"{name}: {exc}", code) from exc
            if code in self._unsupported:
                raise CounterUnsupported(f"{name}: {exc}", code) from exc
            raise DeviceError(f"{name}: {exc}", code) from exc

    # -- enumeration ---------------------------------------------------------------------------------------------

    def device_count(self) -> int:
        return int(self._call(self._nvml.nvmlDeviceGetCount))

    def devices(self) -> list[DeviceInfo]:
        """Every GPU; a GPU in MIG mode is replaced by its MIG instances (each with its profile and GI id).

        A GPU that is lost during enumeration is still listed (with whatever identity was readable) so that it is
        reported ``up: false`` instead of vanishing.
        """
        nvml = self._nvml
        out: list[DeviceInfo] = []
        for index in range(self.device_count()):
            handle = self._call(nvml.nvmlDeviceGetHandleByIndex, index)
            try:
                uuid = _text(self._call(nvml.nvmlDeviceGetUUID, handle))
                name = _text(self._call(nvml.nvmlDeviceGetName, handle))
            except GpuLost:
                out.append(DeviceInfo(index=index, uuid=f"lost-gpu-{index}", name="unknown", handle=handle))
                continue
            gpm = self._gpm_supported(handle)
            migs = self._mig_devices(index, handle, uuid, name, gpm) if self._mig_enabled(handle) else []
            if migs:
                out.extend(migs)
            else:
                out.append(DeviceInfo(index=index, uuid=uuid, name=name, handle=handle, gpm_supported=gpm))
        return out

    def _mig_enabled(self, handle: Any) -> bool:
        try:
            current, _pending = self._call(self._nvml.nvmlDeviceGetMigMode, handle)
        except DeviceError:
            return False
        return bool(current == getattr(self._nvml, "NVML_DEVICE_MIG_ENABLE", 1))

    def _mig_devices(self, index: int, parent: Any, parent_uuid: str, parent_name: str, gpm: bool) -> list[DeviceInfo]:
        nvml = self._nvml
        out: list[DeviceInfo] = []
        for slot in range(int(self._call(nvml.nvmlDeviceGetMaxMigDeviceCount, parent))):
            try:
                mig = self._call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, parent, slot)
            except DeviceError:
                continue  # empty slot (NVML_ERROR_NOT_FOUND)
            name = _text(self._call(nvml.nvmlDeviceGetName, mig))
            match = _MIG_NAME.search(name)
            out.append(
                DeviceInfo(
                    index=index,
                    uuid=_text(self._call(nvml.nvmlDeviceGetUUID, mig)),
                    name=parent_name,
                    handle=mig,
                    parent_handle=parent,
                    mig_profile=match.group(1) if match else None,
                    gpu_instance_id=int(self._call(nvml.nvmlDeviceGetGpuInstanceId, mig)),
                    parent_uuid=parent_uuid,
                    gpm_supported=gpm,
                )
            )
        return out

    def _gpm_supported(self, handle: Any) -> bool:
        query = getattr(self._nvml, "nvmlGpmQueryDeviceSupport", None)
        if query is None:
            return False
        try:
            return bool(self._call(query, handle).isSupportedDevice)
        except DeviceError:
            return False

    # -- software (issue 59): read once per enumeration ---------------------------------------------------------

    def driver_version(self) -> str:
        """The installed driver's version, e.g. ``"550.54.15"`` (nvmlSystemGetDriverVersion)."""
        return _text(self._call(self._nvml.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self) -> str:
        """The newest CUDA version the driver supports, ``"12.4"``: nvmlSystemGetCudaDriverVersion_v2 answers
        1000 x major + 10 x minor (nvml.h NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR). ``CounterUnsupported`` with a pynvml
        that lacks both versions of the call."""
        nvml = self._nvml
        fn = getattr(nvml, "nvmlSystemGetCudaDriverVersion_v2", None) or getattr(
            nvml, "nvmlSystemGetCudaDriverVersion", None
        )
        if fn is None:
            raise CounterUnsupported("nvmlSystemGetCudaDriverVersion: not in this pynvml")
        version = int(self._call(fn))
        return f"{version // 1000}.{version % 1000 // 10}"

    def vbios_version(self, handle: Any) -> str:
        """The board's VBIOS version, e.g. ``"96.00.74.00.01"`` (nvmlDeviceGetVbiosVersion)."""
        return _text(self._call(self._nvml.nvmlDeviceGetVbiosVersion, handle))

    # -- plain counters ------------------------------------------------------------------------------------------

    def utilization(self, handle: Any) -> float:
        return float(self._call(self._nvml.nvmlDeviceGetUtilizationRates, handle).gpu) / 100.0

    def memory_bytes(self, handle: Any) -> tuple[int, int]:
        """``(used, total)`` framebuffer bytes."""
        info = self._call(self._nvml.nvmlDeviceGetMemoryInfo, handle)
        return int(info.used), int(info.total)

    def power_watts(self, handle: Any) -> float:
        return float(self._call(self._nvml.nvmlDeviceGetPowerUsage, handle)) / 1000.0

    def temperature_celsius(self, handle: Any) -> float:
        return float(self._call(self._nvml.nvmlDeviceGetTemperature, handle, self._nvml.NVML_TEMPERATURE_GPU))

    def sm_clock_hz(self, handle: Any, *, maximum: bool = False) -> float:
        fn = self._nvml.nvmlDeviceGetMaxClockInfo if maximum else self._nvml.nvmlDeviceGetClockInfo
        return float(self._call(fn, handle, self._nvml.NVML_CLOCK_SM)) * 1e6

    def throttle_reasons(self, handle: Any) -> tuple[str, ...]:
        """Active clock-event reasons, by the documented bits 0x1 (GpuIdle) ... 0x100 (DisplayClockSetting)."""
        nvml = self._nvml  # the ...ThrottleReasons name is the deprecated one of older bindings
        fn = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        mask = int(self._call(fn, handle))
        return tuple(name for bit, name in enumerate(THROTTLE_REASONS) if mask & (1 << bit))

    def ecc_total(self, handle: Any, *, corrected: bool) -> int:
        """Volatile (since driver load) ECC error count; a counter that resets when the driver reloads."""
        nvml = self._nvml
        kind = nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED if corrected else nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        return int(self._call(nvml.nvmlDeviceGetTotalEccErrors, handle, kind, nvml.NVML_VOLATILE_ECC))

    def nvlink_totals(self, handle: Any) -> NvlinkTotals:
        """Cumulative NVLink data bytes summed over the links that answer (scopeId = link number)."""
        ids = [(fid, link) for link in range(_NVLINK_MAX_LINKS) for fid in (_FI_NVLINK_DATA_TX, _FI_NVLINK_DATA_RX)]
        values = self._call(self._nvml.nvmlDeviceGetFieldValues, handle, ids)
        tx = rx = 0
        answered = 0
        stamp = 0
        for value in values:
            if value.nvmlReturn != self._ok:
                continue
            answered += 1
            stamp = max(stamp, int(value.timestamp))
            if value.fieldId == _FI_NVLINK_DATA_TX:
                tx += int(value.value.ullVal)
            else:
                rx += int(value.value.ullVal)
        if not answered:
            raise CounterUnsupported("nvmlDeviceGetFieldValues: no NVLink throughput field answered")
        return NvlinkTotals(tx_bytes=tx * 1024, rx_bytes=rx * 1024, timestamp_us=stamp)

    # -- health counters (issue 15) ------------------------------------------------------------------------------

    def energy_joules(self, handle: Any) -> float:
        """Energy drawn since the driver was last loaded (NVML answers millijoules)."""
        return float(self._call(self._nvml.nvmlDeviceGetTotalEnergyConsumption, handle)) / 1000.0

    def pcie_replays(self, handle: Any) -> int:
        """PCIe replays (link-level retransmissions) counted by the GPU."""
        return int(self._call(self._nvml.nvmlDeviceGetPcieReplayCounter, handle))

    def pcie_link(self, handle: Any, *, maximum: bool = False) -> PcieLink:
        """The PCIe link now, or at most: ``maximum`` is what the device *and* the system can reach (a Gen5 GPU in a
        Gen4 slot: 4). The current generation drops at idle to save power (nvmlDeviceGetCurrPcieLinkGeneration)."""
        nvml = self._nvml
        if maximum:
            generation, width = nvml.nvmlDeviceGetMaxPcieLinkGeneration, nvml.nvmlDeviceGetMaxPcieLinkWidth
        else:
            generation, width = nvml.nvmlDeviceGetCurrPcieLinkGeneration, nvml.nvmlDeviceGetCurrPcieLinkWidth
        return PcieLink(int(self._call(generation, handle)), int(self._call(width, handle)))

    def fabric_health(self, handle: Any) -> FabricHealth:
        """The GPU's NVLink fabric health (Hopper and newer on an NVSwitch system), through the versioned query:
        ``nvmlGpuFabricInfo_v3`` (health summary) where the driver knows it, else ``_v2`` (mask only).

        ``CounterUnsupported`` for a GPU outside any fabric (probe state NOT_SUPPORTED), on a driver that knows
        neither version, or with a pynvml that lacks the query.
        """
        nvml = self._nvml
        query = getattr(nvml, "nvmlDeviceGetGpuFabricInfoV", None)
        if query is None or not self._fabric_structs:
            raise CounterUnsupported("nvmlDeviceGetGpuFabricInfoV: not in this pynvml, or no struct version known")
        mismatch = getattr(nvml, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", _ARGUMENT_VERSION_MISMATCH)
        while True:
            info = self._fabric_structs[0]()  # its constructor sets ``version``
            try:
                self._call(query, handle, ctypes.byref(info))  # an out-parameter, as in C
                break
            except DeviceError as exc:
                if exc.code != mismatch:
                    raise
                self._fabric_structs.pop(0)  # a driver older than this version: the previous one, from now on
                if not self._fabric_structs:
                    raise CounterUnsupported("nvmlDeviceGetGpuFabricInfoV: the driver knows no struct version") from exc
        state = int(info.state) & 0xFF  # nvml.h: an unsigned char; pynvml declares a c_uint over its padding
        if state == _FABRIC_STATE_NOT_SUPPORTED:
            raise CounterUnsupported("nvmlDeviceGetGpuFabricInfoV: the GPU is in no NVLink fabric")
        if state == _FABRIC_STATE_COMPLETED:
            failed = int(info.status) != self._ok
            manager = _FABRIC_MANAGER_FAILURE if failed else _FABRIC_MANAGER_SUCCESS
        else:
            manager = _FABRIC_MANAGER_STATUS.get(state, _FABRIC_MANAGER_UNRECOGNIZED)
        summary = int(getattr(info, "healthSummary", 0))
        return FabricHealth(manager, int(info.healthMask) or None, summary or None)

    def remapped_rows(self, handle: Any) -> RemappedRows:
        """Remapped HBM rows; NOT_SUPPORTED before Ampere (those parts retire pages instead)."""
        correctable, uncorrectable, pending, failure = self._call(self._nvml.nvmlDeviceGetRemappedRows, handle)
        return RemappedRows(int(correctable), int(uncorrectable), bool(pending), bool(failure))

    def nvlink_errors(self, handle: Any) -> dict[str, int]:
        """NVLink error totals over all links; a counter whose fields all answer an error is left out.

        ``CounterUnsupported`` when none answers (no NVLink, or a GPU without these counters).
        """
        ids = sorted({fid for candidates in _NVLINK_ERROR_FIELDS.values() for fid in candidates})
        values = self._call(self._nvml.nvmlDeviceGetFieldValues, handle, ids)
        answered: dict[int, int] = {}
        for value in values:
            if value.nvmlReturn == self._ok:
                member = _VALUE_MEMBERS.get(int(value.valueType), "ullVal")
                answered[int(value.fieldId)] = int(getattr(value.value, member))
        out: dict[str, int] = {}
        for counter, candidates in _NVLINK_ERROR_FIELDS.items():
            for fid in candidates:
                if fid in answered:
                    out[counter] = answered[fid]
                    break
        if not out:
            raise CounterUnsupported("nvmlDeviceGetFieldValues: no NVLink error field answered")
        return out

    def process_utilization(self, handle: Any, since_us: int) -> tuple[dict[int, float], int]:
        """Σ SM utilization (0-1 per sample) of each process over NVML's samples newer than ``since_us``, and the
        newest sample's time (to pass next cycle). No sample since then (NVML_ERROR_NOT_FOUND): ``({}, since_us)``."""
        try:
            samples = self._call(self._nvml.nvmlDeviceGetProcessUtilization, handle, since_us)
        except DeviceError as exc:
            if exc.code == self._nvml.NVML_ERROR_NOT_FOUND and not isinstance(exc, CounterUnsupported):
                return {}, since_us
            raise
        busy: dict[int, float] = {}
        newest = since_us
        for sample in samples:
            busy[int(sample.pid)] = busy.get(int(sample.pid), 0.0) + int(sample.smUtil) / 100.0
            newest = max(newest, int(sample.timeStamp))
        return busy, newest

    def accounting_utilization(self, handle: Any) -> dict[int, float]:
        """GPU utilization (0-1, over each process's lifetime) of the running processes accounting knows.

        Raises ``CounterUnsupported`` when accounting mode is off (``nvidia-smi -am 1`` turns it on) or unsupported.
        """
        if self._call(self._nvml.nvmlDeviceGetAccountingMode, handle) != self._nvml.NVML_FEATURE_ENABLED:
            raise CounterUnsupported("accounting mode is disabled")
        out: dict[int, float] = {}
        for pid in self._call(self._nvml.nvmlDeviceGetAccountingPids, handle):
            try:
                stats = self._call(self._nvml.nvmlDeviceGetAccountingStats, handle, pid)
            except DeviceError as exc:
                if exc.code == self._nvml.NVML_ERROR_NOT_FOUND:  # the process ended between the two calls
                    continue
                raise
            utilization = int(stats.gpuUtilization)
            if stats.isRunning and utilization <= 100:  # NVML_VALUE_NOT_AVAILABLE (0xFFFFFFFF): not measured
                out[int(pid)] = utilization / 100.0
        return out

    def compute_processes(self, handle: Any) -> list[tuple[int, int | None]]:
        """``(pid, used GPU memory bytes or None)`` of the compute processes on the device."""
        procs = self._call(self._nvml.nvmlDeviceGetComputeRunningProcesses, handle)
        return [(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory)) for p in procs]

    # -- GPM (Hopper+) -------------------------------------------------------------------------------------------

    def gpm_alloc(self) -> Any:
        return self._call(self._nvml.nvmlGpmSampleAlloc)

    def gpm_free(self, sample: Any) -> None:
        with contextlib.suppress(DeviceError):
            self._call(self._nvml.nvmlGpmSampleFree, sample)

    def gpm_sample(self, device: DeviceInfo, sample: Any) -> None:
        """Fill ``sample`` for the device (``nvmlGpmMigSampleGet`` on the parent for a MIG instance)."""
        if device.gpu_instance_id is not None:
            self._call(self._nvml.nvmlGpmMigSampleGet, device.parent_handle, device.gpu_instance_id, sample)
        else:
            self._call(self._nvml.nvmlGpmSampleGet, device.handle, sample)

    def gpm_metrics(self, first: Any, second: Any) -> tuple[GpmMetrics, list[int]]:
        """The metrics between two samples, and the ids NVML refused (to be logged once by the caller)."""
        nvml = self._nvml
        ids = list(_GPM_METRICS)
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        request.sample1 = first
        request.sample2 = second
        for i, metric_id in enumerate(ids):
            request.metrics[i].metricId = metric_id
        self._call(nvml.nvmlGpmMetricsGet, request)
        values: dict[str, float] = {}
        refused: list[int] = []
        for i, metric_id in enumerate(ids):
            entry = request.metrics[i]
            if entry.nvmlReturn != self._ok:
                refused.append(metric_id)
                continue
            name, scale = _GPM_METRICS[metric_id]
            values[name] = float(entry.value) * scale
        return GpmMetrics(**values), refused

    # -- XID events ----------------------------------------------------------------------------------------------

    def xid_event_set(self, gpus: Sequence[tuple[str, Any]]) -> tuple[Any, set[str]]:
        """An event set with XID events registered on each ``(uuid, handle)`` that supports them.

        Returns the set and the UUIDs registered (XID totals are reported only for those).
        """
        nvml = self._nvml
        event_set = self._call(nvml.nvmlEventSetCreate)
        registered: set[str] = set()
        for uuid, handle in gpus:
            try:
                if not int(self._call(nvml.nvmlDeviceGetSupportedEventTypes, handle)) & _XID_EVENT:
                    continue
                self._call(nvml.nvmlDeviceRegisterEvents, handle, _XID_EVENT, event_set)
            except DeviceError:
                continue
            registered.add(uuid)
        return event_set, registered

    def wait_xid(self, event_set: Any, timeout_ms: int) -> XidEvent | None:
        """The next XID event, or ``None`` after ``timeout_ms`` without one."""
        nvml = self._nvml
        try:
            data = self._call(nvml.nvmlEventSetWait_v2, event_set, timeout_ms)
        except DeviceError as exc:
            if exc.code == self._timeout:
                return None
            raise
        if not int(data.eventType) & _XID_EVENT:
            return None
        uuid = _text(self._call(nvml.nvmlDeviceGetUUID, data.device))
        gi = int(data.gpuInstanceId)
        return XidEvent(uuid=uuid, xid=int(data.eventData), gpu_instance_id=None if gi == _ALL_INSTANCES else gi)

    def free_event_set(self, event_set: Any) -> None:
        with contextlib.suppress(DeviceError):
            self._call(self._nvml.nvmlEventSetFree, event_set)
