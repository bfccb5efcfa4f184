"""The only module that imports AMD's ``amdsmi`` (ROCm's Python binding), lazily.

Every call goes through :meth:`AmdSmiApi._call`, which translates ``AmdSmiLibraryException`` into
:mod:`mfumon.exporter.errors` (``CounterUnsupported`` for NOT_SUPPORTED / NOT_YET_IMPLEMENTED / NO_PERM, else
``DeviceError``). A value the driver does not report comes back from amdsmi as ``"N/A"`` inside a good answer; it
leaves this module as ``None`` (left out of the sample, never sent as 0), and an answer with nothing but ``"N/A"``
raises ``CounterUnsupported``. Units are converted here: % -> ratio, MHz -> Hz, kB -> bytes; amdsmi already gives
W, bytes and whole degrees Celsius. Names and shapes: amdsmi for ROCm 6.3 (``py-interface/README.md``).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from mfumon.exporter.errors import CounterUnsupported, DeviceError, SourceUnavailable

__all__ = ["AmdDevice", "AmdSmiApi", "EccCounts"]

T = TypeVar("T")

#: amdsmi_status_t values (``amdsmi_wrapper.py``) that mean "this device cannot tell", not "the read failed".
_UNSUPPORTED = frozenset({2, 3, 10})  # AMDSMI_STATUS_NOT_SUPPORTED, _NOT_YET_IMPLEMENTED, _NO_PERM
_NA = "N/A"
_KB = 1024  # the XGMI accumulators count kB (amdsmi.h: "accumulated data transfer size (KiloBytes)")


@dataclass(frozen=True, slots=True)
class AmdDevice:
    """One AMD GPU (or partition the driver exposes as one) as enumerated."""

    index: int
    uuid: str
    name: str  # asic_info market_name, e.g. "MI300X" or "AMD Instinct MI300X"
    bdf: str | None  # PCI address: what the Kubernetes AMD device plugin names devices by
    handle: Any = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class EccCounts:
    correctable: int
    uncorrectable: int
    deferred: int  # uncorrectable errors whose handling is deferred until the data is used (poison)


def _number(value: Any) -> float | None:
    return None if value is None or value == _NA else float(value)


class AmdSmiApi:
    """Thin, typed wrapper over the amdsmi functions the exporter uses."""

    def __init__(self, module: ModuleType) -> None:
        self._smi = module

    @classmethod
    def load(cls) -> AmdSmiApi:
        """Import amdsmi and initialise it for AMD GPUs; ``SourceUnavailable`` when either fails."""
        try:
            module = importlib.import_module("amdsmi")
        except ImportError as exc:
            raise SourceUnavailable("amdsmi is not installed (it ships with ROCm: /opt/rocm/share/amd_smi)") from exc
        try:
            module.amdsmi_init(module.AmdSmiInitFlags.INIT_AMD_GPUS)
        except module.AmdSmiException as exc:
            raise SourceUnavailable(f"amdsmi could not be initialised: {exc}") from exc
        return cls(module)

    def shutdown(self) -> None:
        with contextlib.suppress(self._smi.AmdSmiException):
            self._smi.amdsmi_shut_down()

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except self._smi.AmdSmiLibraryException as exc:
            code = exc.get_error_code()
            name = getattr(fn, "__name__", "amdsmi")
            if code in _UNSUPPORTED:
                raise CounterUnsupported(f"{name}: {exc.get_error_info()}", code) from exc
            raise DeviceError(f"{name}: {exc.get_error_info()}", code) from exc
        except self._smi.AmdSmiException as exc:  # parameter and key errors: a bug or an unexpected binding
            raise DeviceError(f"{getattr(fn, '__name__', 'amdsmi')}: {exc}") from exc

    # -- enumeration ---------------------------------------------------------------------------------------------

    def devices(self) -> list[AmdDevice]:
        smi = self._smi
        out = []
        for index, handle in enumerate(self._call(smi.amdsmi_get_processor_handles)):
            uuid = self._call(smi.amdsmi_get_gpu_device_uuid, handle)
            asic = self._call(smi.amdsmi_get_gpu_asic_info, handle)
            try:
                bdf: str | None = str(self._call(smi.amdsmi_get_gpu_device_bdf, handle)).lower()
            except DeviceError:
                bdf = None
            name = str(asic.get("market_name") or _NA)
            out.append(AmdDevice(index, str(uuid), "AMD GPU" if name == _NA else name, bdf, handle))
        return out

    # -- software (issue 59): read once, at enumeration ----------------------------------------------------------

    def driver_version(self, handle: Any) -> str:
        """The amdgpu driver's version (``amdsmi_get_gpu_driver_info``: ``driver_name``, ``driver_version``,
        ``driver_date``)."""
        info = self._call(self._smi.amdsmi_get_gpu_driver_info, handle)
        version = info.get("driver_version")
        if version is None or version in ("", _NA):
            raise CounterUnsupported("amdsmi_get_gpu_driver_info: driver_version is N/A")
        return str(version)

    def vbios_version(self, handle: Any) -> str:
        """The VBIOS version (``amdsmi_get_gpu_vbios_info``: ``name``, ``build_date``, ``part_number``,
        ``version``), else its part number where the version is empty."""
        info = self._call(self._smi.amdsmi_get_gpu_vbios_info, handle)
        for key in ("version", "part_number"):
            value = info.get(key)
            if value is not None and str(value).strip() not in ("", _NA):
                return str(value)
        raise CounterUnsupported("amdsmi_get_gpu_vbios_info: version and part_number are N/A")

    # -- counters ------------------------------------------------------------------------------------------------

    def activity(self, handle: Any) -> tuple[float | None, float | None]:
        """(GFX engine busy, memory controller busy) as ratios; either None where the driver says N/A."""
        usage = self._call(self._smi.amdsmi_get_gpu_activity, handle)
        gfx, umc = _number(usage.get("gfx_activity")), _number(usage.get("umc_activity"))
        if gfx is None and umc is None:
            raise CounterUnsupported("amdsmi_get_gpu_activity: gfx_activity and umc_activity are N/A")
        return (None if gfx is None else gfx / 100.0, None if umc is None else umc / 100.0)

    def power_watts(self, handle: Any) -> float:
        """The socket's current power, else its average (MI300 reports only the average)."""
        info = self._call(self._smi.amdsmi_get_power_info, handle)
        for key in ("current_socket_power", "average_socket_power"):
            value = _number(info.get(key))
            if value is not None:
                return value
        raise CounterUnsupported("amdsmi_get_power_info: socket power is N/A")

    def temperature_celsius(self, handle: Any) -> float:
        """The hotspot (junction) temperature, else the edge: MI300 has no edge sensor."""
        smi = self._smi
        last: CounterUnsupported | None = None
        for sensor in (smi.AmdSmiTemperatureType.HOTSPOT, smi.AmdSmiTemperatureType.EDGE):
            try:
                return float(
                    self._call(smi.amdsmi_get_temp_metric, handle, sensor, smi.AmdSmiTemperatureMetric.CURRENT)
                )
            except CounterUnsupported as exc:
                last = exc
        raise last or CounterUnsupported("amdsmi_get_temp_metric: no sensor")

    def memory_bytes(self, handle: Any) -> tuple[int, int]:
        vram = self._smi.AmdSmiMemoryType.VRAM
        used = self._call(self._smi.amdsmi_get_gpu_memory_usage, handle, vram)
        total = self._call(self._smi.amdsmi_get_gpu_memory_total, handle, vram)
        return int(used), int(total)

    def gfx_clock_hz(self, handle: Any) -> tuple[float, float | None]:
        """(current GFX clock, its maximum) in Hz."""
        info = self._call(self._smi.amdsmi_get_clock_info, handle, self._smi.AmdSmiClkType.GFX)
        current, maximum = _number(info.get("clk")), _number(info.get("max_clk"))
        if current is None:
            raise CounterUnsupported("amdsmi_get_clock_info: GFX clock is N/A")
        return current * 1e6, None if maximum is None else maximum * 1e6

    def ecc(self, handle: Any) -> EccCounts:
        counts = self._call(self._smi.amdsmi_get_gpu_total_ecc_count, handle)
        return EccCounts(
            int(counts["correctable_count"]), int(counts["uncorrectable_count"]), int(counts["deferred_count"])
        )

    def ras_states(self, handle: Any) -> dict[str, str]:
        """RAS block -> its state name (``ENABLED``, ``DISABLED``, ...)."""
        listed = self._call(self._smi.amdsmi_get_gpu_ras_block_features_enabled, handle)
        return {str(entry["block"]): str(entry["status"]) for entry in listed}

    def pcie_replays(self, handle: Any) -> int:
        return int(self._call(self._smi.amdsmi_get_gpu_pci_replay_counter, handle))

    def xgmi_bytes(self, handle: Any) -> tuple[int, int]:
        """Cumulative XGMI (read, write) bytes over the links that report; unsupported when none does."""
        metrics = self._call(self._smi.amdsmi_get_gpu_metrics_info, handle)
        reads = [v for v in metrics.get("xgmi_read_data_acc") or [] if v != _NA]
        writes = [v for v in metrics.get("xgmi_write_data_acc") or [] if v != _NA]
        if not reads and not writes:
            raise CounterUnsupported("amdsmi_get_gpu_metrics_info: no XGMI link reports")
        return int(sum(reads)) * _KB, int(sum(writes)) * _KB

    def processes(self, handle: Any) -> list[tuple[int, int | None, int | None]]:
        """``(pid, VRAM bytes, cumulative GFX engine ns)`` of the processes on the GPU."""
        listed = self._call(self._smi.amdsmi_get_gpu_process_list, handle)
        out = []
        for proc in listed:
            engine = proc.get("engine_usage") or {}
            memory = proc.get("memory_usage") or {}
            vram = _number(memory.get("vram_mem"))
            gfx = _number(engine.get("gfx"))
            out.append((int(proc["pid"]), None if vram is None else int(vram), None if gfx is None else int(gfx)))
        return out
