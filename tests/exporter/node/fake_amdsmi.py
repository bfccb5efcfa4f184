"""A stand-in for AMD's ``amdsmi`` Python package (ROCm), for tests at the hardware boundary.

Installed as ``sys.modules["amdsmi"]`` by the ``fake_amd`` fixture, so the exporter's real collection code runs
unchanged. Built from amdsmi for ROCm 6.3.0 (github.com/ROCm/amdsmi at 0ceca28, MIT licence): the function names,
arguments and returned dictionaries of ``py-interface/README.md`` and ``py-interface/amdsmi_interface.py``; the
exceptions of ``py-interface/amdsmi_exception.py`` (``AmdSmiLibraryException(err_code)`` with
``get_error_code()``) and the status codes of ``amdsmi_wrapper.py`` (``AMDSMI_STATUS_NOT_SUPPORTED = 2``, ...).
What the real binding does that the fake copies:

- a value the driver does not report comes back as the string ``"N/A"`` inside an otherwise good answer (activity,
  power: the C struct's 0xFFFF; ``amdsmi_get_gpu_metrics_info``: the field's max uint), and a call the device cannot
  answer at all raises ``AmdSmiLibraryException`` with ``AMDSMI_STATUS_NOT_SUPPORTED``;
- ``amdsmi_get_temp_metric`` returns whole degrees Celsius (``amd_smi.cc`` divides rocm-smi's millidegrees by 1000,
  although the header still says millidegrees); EDGE is not supported on MI300 (``tests/python_unittest``), HOTSPOT is;
- clocks in MHz, memory in bytes, power in W, XGMI accumulators in kB per link, process ``engine_usage.gfx`` in ns;
- ``amdsmi_get_gpu_ras_block_features_enabled`` lists every block of ``AmdSmiGpuBlock`` with its
  ``AmdSmiRasErrState`` name; the defaults are the MI300A of ``amdsmi_cli/README.md``'s ``amd-smi static`` example
  (market name ``MI300A``, BDF ``0000:01:00.0``, UUID ``7eff74a0-0000-1000-808f-7e20764e2714``, UMC ECC DISABLED).

- ``amdsmi_get_gpu_driver_info`` returns ``driver_name``, ``driver_version`` and ``driver_date``;
  ``amdsmi_get_gpu_vbios_info`` ``name``, ``build_date``, ``part_number`` and ``version`` (strings decoded from the C
  struct); the defaults are the MI300X of ``amdsmi_cli/README.md``'s ``amd-smi static`` example, on ROCm 6.2's amdgpu.

Devices are :class:`FakeAmdGpu` dataclasses a test builds and mutates through :func:`reset` and :data:`STATE`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

# -- amdsmi_wrapper.py status codes (ROCm 6.3) ----------------------------------------------------------------------
AMDSMI_STATUS_SUCCESS = 0
AMDSMI_STATUS_INVAL = 1
AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NOT_YET_IMPLEMENTED = 3
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_NOT_FOUND = 31
AMDSMI_STATUS_NOT_INIT = 32
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34
AMDSMI_STATUS_NO_DATA = 40

_INFO = {
    AMDSMI_STATUS_INVAL: "AMDSMI_STATUS_INVAL - Invalid parameters",
    AMDSMI_STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
    AMDSMI_STATUS_NOT_YET_IMPLEMENTED: "AMDSMI_STATUS_NOT_YET_IMPLEMENTED - Feature not yet implemented",
    AMDSMI_STATUS_NO_PERM: "AMDSMI_STATUS_NO_PERM - Permission Denied",
    AMDSMI_STATUS_NOT_FOUND: "AMDSMI_STATUS_NOT_FOUND - Device Not found",
    AMDSMI_STATUS_NOT_INIT: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
    AMDSMI_STATUS_DRIVER_NOT_LOADED: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
    AMDSMI_STATUS_NO_DATA: "AMDSMI_STATUS_NO_DATA - No data was found for given input",
}


class AmdSmiException(Exception):
    """Base smi exception class"""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = _INFO.get(err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred")

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"

    def get_error_info(self) -> str:
        return self.err_info

    def get_error_code(self) -> int:
        return self.err_code


class AmdSmiParameterException(AmdSmiException):
    def __init__(self, received: Any, expected: Any) -> None:
        super().__init__(f"Invalid parameter: {received!r} (expected {expected!r})")


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1 << 0
    INIT_AMD_GPUS = 1 << 1
    INIT_NON_AMD_CPUS = 1 << 2
    INIT_NON_AMD_GPUS = 1 << 3
    INIT_AMD_APUS = INIT_AMD_CPUS | INIT_AMD_GPUS


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4
    PCIE = 5
    VCLK0 = 6
    VCLK1 = 7
    DCLK0 = 8
    DCLK1 = 9


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2
    HBM_0 = 3
    HBM_1 = 4
    HBM_2 = 5
    HBM_3 = 6
    PLX = 7


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    CRITICAL = 5


class AmdSmiMemoryType(IntEnum):
    VRAM = 0
    VIS_VRAM = 1
    GTT = 2


class AmdSmiGpuBlock(IntEnum):
    INVALID = 0
    UMC = 1 << 0
    SDMA = 1 << 1
    GFX = 1 << 2
    MMHUB = 1 << 3
    ATHUB = 1 << 4
    PCIE_BIF = 1 << 5
    HDP = 1 << 6
    XGMI_WAFL = 1 << 7
    DF = 1 << 8
    SMN = 1 << 9
    SEM = 1 << 10
    MP0 = 1 << 11
    MP1 = 1 << 12
    FUSE = 1 << 13
    MCA = 1 << 14
    VCN = 1 << 15
    JPEG = 1 << 16
    IH = 1 << 17
    MPIO = 1 << 18
    RESERVED = 1 << 63


class AmdSmiRasErrState(IntEnum):
    NONE = 0
    DISABLED = 1
    PARITY = 2
    SING_C = 3
    MULT_UC = 4
    POISON = 5
    ENABLED = 6
    INVALID = 0xFFFFFFFF


#: The MI300A of amd-smi static's example: ECC_BLOCK_STATE as printed there.
MI300A_RAS: dict[str, str] = {
    "UMC": "DISABLED",
    "SDMA": "ENABLED",
    "GFX": "ENABLED",
    "MMHUB": "ENABLED",
    **{
        b: "DISABLED"
        for b in ("ATHUB", "PCIE_BIF", "HDP", "XGMI_WAFL", "DF", "SMN", "SEM", "MP0", "MP1", "FUSE", "MCA", "VCN")
    },
    "JPEG": "DISABLED",
    "IH": "DISABLED",
    "MPIO": "DISABLED",
}
_NA = "N/A"


@dataclass
class FakeAmdGpu:
    """One GPU; fields hold what amdsmi returns, in its units ("N/A" where the driver reports nothing)."""

    uuid: str = "7eff74a0-0000-1000-808f-7e20764e2714"
    bdf: str = "0000:01:00.0"
    market_name: str = "MI300A"
    gfx_activity: int | str = 0
    umc_activity: int | str = 0
    mm_activity: int | str = _NA
    current_socket_power: int | str = _NA  # W; MI300 reports the average only
    average_socket_power: int | str = 120
    temperatures: dict[str, int] = field(default_factory=lambda: {"HOTSPOT": 41, "VRAM": 35})  # EDGE: N/A on MI300
    vram_total: int = 64289 * 1024 * 1024
    vram_used: int = 0
    gfx_clk_mhz: int = 132
    gfx_max_clk_mhz: int = 2100
    ecc: tuple[int, int, int] = (0, 0, 0)  # correctable, uncorrectable, deferred
    pcie_replays: int = 0
    xgmi_read_kb: list[int | str] = field(default_factory=lambda: [0] * 8)
    xgmi_write_kb: list[int | str] = field(default_factory=lambda: [0] * 8)
    ras: dict[str, str] = field(default_factory=lambda: dict(MI300A_RAS))
    processes: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, vram bytes, gfx engine ns)
    unsupported: set[str] = field(default_factory=set)  # function names that raise NOT_SUPPORTED
    driver_version: str = "6.8.5"
    vbios_version: str = "022.040.003.042.000001"
    vbios_part_number: str = "113-M3000100-102"


@dataclass
class FakeState:
    gpus: list[FakeAmdGpu] = field(default_factory=list)
    initialized: bool = False
    init_error: int | None = None
    calls: dict[str, int] = field(default_factory=dict)


STATE = FakeState()


class amdsmi_processor_handle:  # the binding's ctypes type name
    """An opaque handle: a new object per enumeration, as the real binding returns."""

    def __init__(self, index: int) -> None:
        self.index = index


def reset(gpus: list[FakeAmdGpu], *, init_error: int | None = None) -> FakeState:
    STATE.gpus, STATE.initialized, STATE.init_error, STATE.calls = list(gpus), False, init_error, {}
    return STATE


def _gpu(handle: Any, fn: str) -> FakeAmdGpu:
    STATE.calls[fn] = STATE.calls.get(fn, 0) + 1
    if not STATE.initialized:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    if not isinstance(handle, amdsmi_processor_handle):
        raise AmdSmiParameterException(handle, amdsmi_processor_handle)
    if handle.index >= len(STATE.gpus):
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_FOUND)
    gpu = STATE.gpus[handle.index]
    if fn in gpu.unsupported:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return gpu


def amdsmi_init(flag: AmdSmiInitFlags = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
    if STATE.init_error is not None:
        raise AmdSmiLibraryException(STATE.init_error)
    STATE.initialized = True


def amdsmi_shut_down() -> None:
    if not STATE.initialized:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    STATE.initialized = False


def amdsmi_get_processor_handles() -> list[amdsmi_processor_handle]:
    if not STATE.initialized:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    return [amdsmi_processor_handle(i) for i in range(len(STATE.gpus))]


def amdsmi_get_gpu_device_uuid(processor_handle: Any) -> str:
    return _gpu(processor_handle, "amdsmi_get_gpu_device_uuid").uuid


def amdsmi_get_gpu_device_bdf(processor_handle: Any) -> str:
    return _gpu(processor_handle, "amdsmi_get_gpu_device_bdf").bdf


def amdsmi_get_gpu_asic_info(processor_handle: Any) -> dict[str, Any]:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_asic_info")
    return {
        "market_name": gpu.market_name,
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "subvendor_id": "0x1002",
        "device_id": "0x74a0",
        "rev_id": "0x00",
        "asic_serial": "0x7EFF74A0808F7E20",
        "oam_id": processor_handle.index,
        "num_of_compute_units": 228,
        "target_graphics_version": "gfx942",
    }


def amdsmi_get_gpu_activity(processor_handle: Any) -> dict[str, Any]:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_activity")
    return {"gfx_activity": gpu.gfx_activity, "umc_activity": gpu.umc_activity, "mm_activity": gpu.mm_activity}


def amdsmi_get_power_info(processor_handle: Any) -> dict[str, Any]:
    gpu = _gpu(processor_handle, "amdsmi_get_power_info")
    return {
        "current_socket_power": gpu.current_socket_power,
        "average_socket_power": gpu.average_socket_power,
        "gfx_voltage": _NA,
        "soc_voltage": _NA,
        "mem_voltage": _NA,
        "power_limit": 550000000,
    }


def amdsmi_get_temp_metric(processor_handle: Any, sensor_type: Any, metric: Any) -> int:
    gpu = _gpu(processor_handle, "amdsmi_get_temp_metric")
    if not isinstance(sensor_type, AmdSmiTemperatureType):
        raise AmdSmiParameterException(sensor_type, AmdSmiTemperatureType)
    if not isinstance(metric, AmdSmiTemperatureMetric):
        raise AmdSmiParameterException(metric, AmdSmiTemperatureMetric)
    if sensor_type.name not in gpu.temperatures or metric != AmdSmiTemperatureMetric.CURRENT:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return gpu.temperatures[sensor_type.name]


def amdsmi_get_gpu_memory_total(processor_handle: Any, mem_type: Any) -> int:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_memory_total")
    if mem_type != AmdSmiMemoryType.VRAM:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return gpu.vram_total


def amdsmi_get_gpu_memory_usage(processor_handle: Any, mem_type: Any) -> int:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_memory_usage")
    if mem_type != AmdSmiMemoryType.VRAM:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return gpu.vram_used


def amdsmi_get_clock_info(processor_handle: Any, clock_type: Any) -> dict[str, int]:
    gpu = _gpu(processor_handle, "amdsmi_get_clock_info")
    if not isinstance(clock_type, AmdSmiClkType):
        raise AmdSmiParameterException(clock_type, AmdSmiClkType)
    if clock_type != AmdSmiClkType.GFX:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return {
        "clk": gpu.gfx_clk_mhz,
        "min_clk": 500,
        "max_clk": gpu.gfx_max_clk_mhz,
        "clk_locked": 0,
        "clk_deep_sleep": 0,
    }


def amdsmi_get_gpu_total_ecc_count(processor_handle: Any) -> dict[str, int]:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_total_ecc_count")
    correctable, uncorrectable, deferred = gpu.ecc
    return {"correctable_count": correctable, "uncorrectable_count": uncorrectable, "deferred_count": deferred}


def amdsmi_get_gpu_ras_block_features_enabled(processor_handle: Any) -> list[dict[str, Any]]:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_ras_block_features_enabled")
    blocks = [b for b in AmdSmiGpuBlock if b.name not in ("RESERVED", "INVALID")]
    return [{"block": b.name, "status": gpu.ras.get(b.name, "DISABLED")} for b in blocks]


def amdsmi_get_gpu_pci_replay_counter(processor_handle: Any) -> int:
    return _gpu(processor_handle, "amdsmi_get_gpu_pci_replay_counter").pcie_replays


def amdsmi_get_gpu_metrics_info(processor_handle: Any) -> dict[str, Any]:
    """A subset of the 90-odd fields: the XGMI accumulators (kB per link, "N/A" for an absent link)."""
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_metrics_info")
    return {
        "temperature_hotspot": gpu.temperatures.get("HOTSPOT", _NA),
        "average_gfx_activity": gpu.gfx_activity,
        "xgmi_link_width": 16,
        "xgmi_link_speed": 32,
        "xgmi_read_data_acc": list(gpu.xgmi_read_kb),
        "xgmi_write_data_acc": list(gpu.xgmi_write_kb),
        "pcie_replay_count_acc": gpu.pcie_replays,
    }


def amdsmi_get_gpu_process_list(processor_handle: Any) -> list[dict[str, Any]]:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_process_list")
    return [
        {
            "name": "N/A",  # without root, as the README says
            "pid": pid,
            "mem": vram,
            "engine_usage": {"gfx": gfx_ns, "enc": 0},
            "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": vram},
        }
        for pid, vram, gfx_ns in gpu.processes
    ]


def amdsmi_get_gpu_driver_info(processor_handle: Any) -> dict[str, Any]:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_driver_info")
    return {"driver_name": "amdgpu", "driver_version": gpu.driver_version, "driver_date": "2015/01/01 00:00"}


def amdsmi_get_gpu_vbios_info(processor_handle: Any) -> dict[str, Any]:
    gpu = _gpu(processor_handle, "amdsmi_get_gpu_vbios_info")
    return {
        "name": "AMD MI300X_HW_SRIOV_CVS_1VF",
        "build_date": "2023/05/10 08:29",
        "part_number": gpu.vbios_part_number,
        "version": gpu.vbios_version,
    }
