"""A stand-in for the ``pynvml`` module of nvidia-ml-py, for tests at the hardware boundary.

Installed as ``sys.modules["pynvml"]`` by the ``fake_nvml`` fixture, so the exporter's real collection code runs
unchanged. What is copied from nvidia-ml-py 13.615.71 (``pynvml.py``): the function names and signatures used, the
return structures (ctypes ``c_nvmlMemory_t``, ``c_nvmlUtilization_t``, ``c_nvmlFieldValue_t``, ``c_nvmlEventData_t``,
the GPM structs, ``nvmlFriendlyObject`` processes), opaque ``POINTER`` handles (a new Python object per call, as the
real binding returns), the constants, and the ``NVMLError`` mechanics: ``NVMLError(code)`` builds the
``NVMLError_<Name>`` subclass generated for every ``NVML_ERROR_*`` constant.

Per-process utilization and accounting (issue 35) follow the NVML API Reference Guide vR590 (last updated
January 12, 2026; docs.nvidia.com/deploy/nvml-api, "Device Queries" and "Accounting Statistics"):
``nvmlDeviceGetProcessUtilization`` returns the ``nvmlProcessUtilizationSample_t`` samples (pid, timeStamp in us,
smUtil, memUtil, encUtil, decUtil) newer than ``lastSeenTimeStamp``; "if no valid sample entries are found since the
lastSeenTimeStamp, NVML_ERROR_NOT_FOUND is returned", and ``NVML_ERROR_NOT_SUPPORTED`` on a device without the
feature. ``nvmlDeviceGetAccountingMode`` answers ``NVML_FEATURE_ENABLED``/``DISABLED``; ``nvmlDeviceGetAccountingPids``
and ``nvmlDeviceGetAccountingStats`` raise ``NVML_ERROR_NOT_SUPPORTED`` "if the device doesn't support this feature or
accounting mode is disabled", and ``GetAccountingStats`` ``NVML_ERROR_NOT_FOUND`` "if process stats were not found";
a stat the device cannot measure is ``NVML_VALUE_NOT_AVAILABLE`` (0xFFFFFFFF as an unsigned int); on a MIG-enabled GPU
accounting is disabled. The pynvml wrappers' names and arguments are nvidia-ml-py's
(``nvmlDeviceGetProcessUtilization(handle, timeStamp)`` returns a list, empty when the count is 0;
``nvmlDeviceGetAccountingStats(handle, pid)`` returns a ``c_nvmlAccountingStats_t``).

PCIe link and NVLink fabric (issue 53) follow the same guide and nvidia-ml-py 13.615.71: the four
``nvmlDevice{Get,}{Curr,Max}PcieLink{Generation,Width}(handle)`` return an unsigned int ("max" is what the device *and*
the system can reach) and raise ``NVML_ERROR_NOT_SUPPORTED`` "if PCIe link information is not available";
``nvmlDeviceGetGpuFabricInfoV(device, gpuFabricInfo)`` fills the struct the caller passes by reference, whose first
field, ``version``, it must set (``nvmlGpuFabricInfo_v2`` = 0x02000024, ``_v3`` = 0x3000028: the struct's size | the
version << 24); a version the driver does not know answers ``NVML_ERROR_ARGUMENT_VERSION_MISMATCH``, a device without
fabric support ``NVML_ERROR_NOT_SUPPORTED``. v3 adds ``healthSummary`` (NVML_GPU_FABRIC_HEALTH_SUMMARY_*) to v2's
``healthMask`` (2-bit NVML_GPU_FABRIC_HEALTH_MASK_* fields: 0 not supported, 1 true, 2 false); ``status`` matters only
once ``state`` is COMPLETED. nvml.h declares ``state`` an unsigned char, pynvml a ``c_uint`` (the padding after it).

The node's software (issue 59) follows the same guide ("System Queries", "Device Queries") and nvidia-ml-py
13.615.71: ``nvmlSystemGetDriverVersion()`` and ``nvmlDeviceGetVbiosVersion(handle)`` return a ``str`` (the binding's
``convertStrBytes`` decodes the C buffer; older bindings returned ``bytes``), ``nvmlSystemGetCudaDriverVersion()`` and
``nvmlSystemGetCudaDriverVersion_v2()`` an ``int`` (1000 x major + 10 x minor: 12040 is CUDA 12.4; ``_v2`` reads it
from the kernel driver, the first from libcuda, answering ``NVML_ERROR_LIBRARY_NOT_FOUND`` without it). Each raises
``NVML_ERROR_UNINITIALIZED`` before ``nvmlInit``; where a device or driver cannot answer, the fake raises
``NVML_ERROR_NOT_SUPPORTED`` (a function name in ``FakeGpu.unsupported`` or ``FakeState.system_unsupported``). The
defaults are what the H200 answered (bench/results/h200-2026-11-30/nvidia-smi.txt: driver 580.159.04, CUDA 13.0,
VBIOS 96.00.A5.00.1A); the driver string stays the one the fake always answered.

The devices are plain dataclasses (:class:`FakeGpu`, :class:`FakeMig`) a test builds and mutates through
:func:`reset` and the module-level :data:`STATE`.
"""

from __future__ import annotations

import string
import sys
import threading
import time
from ctypes import (
    POINTER,
    Structure,
    Union,
    addressof,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_longlong,
    c_uint,
    c_uint8,
    c_uint32,
    c_ulong,
    c_ulonglong,
    c_ushort,
    pointer,
    sizeof,
)
from dataclasses import dataclass, field
from typing import Any

# -- constants (values as in nvidia-ml-py) --------------------------------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_VALUE_NOT_AVAILABLE = 0xFFFFFFFF  # as an unsigned int (nvml.h: (unsigned long long)-1, truncated)
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1
NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG = 2
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL = 38
NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL = 45
NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL = 52
NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL = 59
NVML_FI_DEV_NVLINK_LINK_COUNT = 91
NVML_FI_DEV_PCIE_REPLAY_COUNTER = 94
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139
NVML_FI_DEV_REMAPPED_COR = 142
NVML_FI_DEV_REMAPPED_UNC = 143
NVML_FI_DEV_REMAPPED_PENDING = 144
NVML_FI_DEV_REMAPPED_FAILURE = 145
NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY = 161
NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY = 162
NVML_FI_DEV_NVLINK_ERROR_DL_CRC = 163
NVML_NVLINK_ERROR_DL_REPLAY = 0
NVML_NVLINK_ERROR_DL_RECOVERY = 1
NVML_NVLINK_ERROR_DL_CRC_FLIT = 2
NVML_NVLINK_ERROR_DL_CRC_DATA = 3
NVML_NVLINK_ERROR_DL_ECC_DATA = 4

nvmlEventTypeXidCriticalError = 0x0000000000000008
nvmlClocksEventReasonGpuIdle = 0x0000000000000001
nvmlClocksEventReasonSwPowerCap = 0x0000000000000004
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040

NVML_GPM_METRIC_GRAPHICS_UTIL = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7
NVML_GPM_METRIC_DRAM_BW_UTIL = 10
NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60
NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61
NVML_GPM_METRIC_MAX = 477
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_SUPPORT_VERSION = 1
_NVML_NVLINK_MAX_LINKS = 18

NVML_GPU_FABRIC_UUID_LEN = 16
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW = 0
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW = 0x3
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY = 2
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY = 4
NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE = 2
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY = 6
NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY = 1
NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY = 2
NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY = 3
nvmlGpuFabricInfo_v2 = 0x02000024
nvmlGpuFabricInfo_v3 = 0x3000028


# -- errors: the mechanics of nvidia-ml-py -------------------------------------------------------------------------
class NVMLError(Exception):
    _valClassMapping: dict[int, type[NVMLError]] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }
    value: int

    def __new__(cls, value: int) -> NVMLError:
        if cls == NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return NVMLError._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return self.value == getattr(other, "value", None)

    __hash__ = Exception.__hash__


def nvmlExceptionClass(nvmlErrorCode: int) -> type[NVMLError]:
    if nvmlErrorCode not in NVMLError._valClassMapping:
        raise ValueError(f"nvmlErrorCode {nvmlErrorCode} is not valid")
    return NVMLError._valClassMapping[nvmlErrorCode]


def _extractNVMLErrorsAsClasses() -> None:
    """NVML_ERROR_ALREADY_INITIALIZED -> NVMLError_AlreadyInitialized, as nvidia-ml-py generates them."""
    this_module = sys.modules[__name__]
    for err_name in [x for x in dir(this_module) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        err_val = getattr(this_module, err_name)

        def gen_new(val: int) -> Any:
            def new(typ: type[NVMLError], *args: Any) -> NVMLError:
                return NVMLError.__new__(typ, val)

            return new

        new_error_class = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        new_error_class.__module__ = __name__
        setattr(this_module, class_name, new_error_class)
        NVMLError._valClassMapping[err_val] = new_error_class


_extractNVMLErrorsAsClasses()


def _nvmlCheckReturn(ret: int) -> int:
    if ret != NVML_SUCCESS:
        raise NVMLError(ret)
    return ret


# -- structures (fields as in nvidia-ml-py) -----------------------------------------------------------------------
class _PrintableStructure(Structure):
    _fmt_: dict[str, str] = {}

    def __str__(self) -> str:
        parts = [f"{name}: {getattr(self, name)}" for name, *_ in self._fields_]
        return f"{type(self).__name__}({', '.join(parts)})"


class struct_c_nvmlDevice_t(Structure):
    pass  # opaque handle


c_nvmlDevice_t = POINTER(struct_c_nvmlDevice_t)


class struct_c_nvmlEventSet_t(Structure):
    pass  # opaque handle


c_nvmlEventSet_t = POINTER(struct_c_nvmlEventSet_t)


class c_nvmlMemory_t(_PrintableStructure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class c_nvmlUtilization_t(_PrintableStructure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class c_nvmlValue_t(Union):
    _fields_ = [
        ("dVal", c_double),
        ("uiVal", c_uint),
        ("ulVal", c_ulong),
        ("ullVal", c_ulonglong),
        ("sllVal", c_longlong),
        ("siVal", c_int),
        ("usVal", c_ushort),
    ]


class c_nvmlFieldValue_t(_PrintableStructure):
    _fields_ = [
        ("fieldId", c_uint32),
        ("scopeId", c_uint32),
        ("timestamp", c_int64),
        ("latencyUsec", c_int64),
        ("valueType", c_uint),
        ("nvmlReturn", c_uint),
        ("value", c_nvmlValue_t),
    ]


class c_nvmlProcessInfo_v2_t(_PrintableStructure):
    _fields_ = [
        ("pid", c_uint),
        ("usedGpuMemory", c_ulonglong),
        ("gpuInstanceId", c_uint),
        ("computeInstanceId", c_uint),
    ]


c_nvmlProcessInfo_v3_t = c_nvmlProcessInfo_v2_t


class c_nvmlEventData_t(_PrintableStructure):
    _fields_ = [
        ("device", c_nvmlDevice_t),
        ("eventType", c_ulonglong),
        ("eventData", c_ulonglong),
        ("gpuInstanceId", c_uint),
        ("computeInstanceId", c_uint),
    ]


class struct_c_nvmlGpmSample_t(Structure):
    pass  # opaque handle


c_nvmlGpmSample_t = POINTER(struct_c_nvmlGpmSample_t)


class c_metricInfo_t(Structure):
    _fields_ = [("shortName", c_char_p), ("longName", c_char_p), ("unit", c_char_p)]


class c_nvmlGpmMetric_t(_PrintableStructure):
    _fields_ = [
        ("metricId", c_uint),
        ("nvmlReturn", c_uint),
        ("value", c_double),
        ("metricInfo", c_metricInfo_t),
    ]


class c_nvmlGpmMetricsGet_t(_PrintableStructure):
    _fields_ = [
        ("version", c_uint),
        ("numMetrics", c_uint),
        ("sample1", c_nvmlGpmSample_t),
        ("sample2", c_nvmlGpmSample_t),
        ("metrics", c_nvmlGpmMetric_t * NVML_GPM_METRIC_MAX),
    ]


class c_nvmlGpmSupport_t(_PrintableStructure):
    _fields_ = [("version", c_uint), ("isSupportedDevice", c_uint)]


_nvmlReturn_t = c_uint
_nvmlGpuFabricState_t = c_uint


class c_nvmlGpuFabricInfo_v2_t(_PrintableStructure):
    _fields_ = [
        ("version", c_uint),
        ("clusterUuid", c_uint8 * NVML_GPU_FABRIC_UUID_LEN),
        ("status", _nvmlReturn_t),
        ("cliqueId", c_uint32),
        ("state", _nvmlGpuFabricState_t),
        ("healthMask", c_uint32),
    ]

    def __init__(self) -> None:
        super().__init__(version=nvmlGpuFabricInfo_v2)


c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfo_v2_t


class c_nvmlGpuFabricInfo_v3_t(_PrintableStructure):
    _fields_ = [
        ("version", c_uint),
        ("clusterUuid", c_uint8 * NVML_GPU_FABRIC_UUID_LEN),
        ("status", _nvmlReturn_t),
        ("cliqueId", c_uint32),
        ("state", _nvmlGpuFabricState_t),
        ("healthMask", c_uint32),
        ("healthSummary", c_uint8),
    ]

    def __init__(self) -> None:
        super().__init__(version=nvmlGpuFabricInfo_v3)


class nvmlFriendlyObject:
    def __init__(self, dictionary: dict[str, Any]) -> None:
        for key, value in dictionary.items():
            setattr(self, key, value)


def nvmlStructToFriendlyObject(struct: Structure) -> nvmlFriendlyObject:
    return nvmlFriendlyObject({name: getattr(struct, name) for name, *_ in struct._fields_})


# -- the simulated hardware ---------------------------------------------------------------------------------------
@dataclass
class FakeMig:
    """A MIG instance: profile name, GPU instance id, its own memory, processes and GPM values."""

    uuid: str
    profile: str
    gpu_instance_id: int
    memory_total_bytes: int = 10 * 1024**3
    memory_used_bytes: int = 0
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    gpm_values: dict[int, float] = field(default_factory=dict)


def fabric_mask(
    degraded_bw: int = NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE,
    route_recovery: int = NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_RECOVERY_FALSE,
    route_unhealthy: int = NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE,
    access_timeout_recovery: int = NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_FALSE,
) -> int:
    """A health mask from its fields (each NOT_SUPPORTED 0, TRUE 1 or FALSE 2), as NVML_GPU_FABRIC_HEALTH_GET reads."""
    return (
        degraded_bw << NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW
        | route_recovery << NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY
        | route_unhealthy << NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY
        | access_timeout_recovery << NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY
    )


@dataclass
class FakeFabric:
    """A GPU's place in an NVLink fabric (NVSwitch systems): the registration probe and the fabric's health."""

    state: int = NVML_GPU_FABRIC_STATE_COMPLETED
    status: int = NVML_SUCCESS  # the probe's error, once COMPLETED
    clique_id: int = 32766
    health_mask: int = field(default_factory=fabric_mask)
    health_summary: int = NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY


@dataclass
class FakeGpu:
    """One physical GPU; fields hold what NVML would return (in NVML's own units)."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    memory_total_bytes: int = 85520809984
    memory_used_bytes: int = 0
    utilization_gpu_pct: int = 0
    power_mw: int = 70000
    temperature_c: int = 30
    sm_clock_mhz: int = 1980
    max_sm_clock_mhz: int = 1980
    clock_event_reasons: int = 0
    ecc_uncorrected: int = 0
    ecc_corrected: int = 0
    nvlink_links: int = 18
    nvlink_tx_kib: int = 0
    nvlink_rx_kib: int = 0
    gpm_supported: bool = True
    gpm_values: dict[int, float] = field(default_factory=dict)
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)
    no_permission: set[str] = field(default_factory=set)
    lost: bool = False
    mig: list[FakeMig] | None = None
    supported_events: int = nvmlEventTypeXidCriticalError
    # Health counters. Defaults are what the H200 answered on 2026-11-30 (bench/results/h200-2026-11-30/): energy in
    # mJ, no PCIe replays, no remapped rows, and no NVLink error field answering (a single-GPU VM: each field comes
    # back with nvmlReturn NOT_SUPPORTED). ``nvlink_error_fields`` maps a field id to its value where it answers.
    energy_mj: int = 2674357
    pcie_replays: int = 0
    remapped_rows: tuple[int, int, int, int] = (0, 0, 0, 0)  # (correctable, uncorrectable, isPending, failureOccurred)
    nvlink_error_fields: dict[int, int] = field(default_factory=dict)
    # Per-process utilization samples (pid, timeStamp us, smUtil %, memUtil %) NVML keeps in its ring buffer, and
    # accounting: mode on/off and per pid (gpuUtilization %, isRunning). Unsupported: "process_utilization" or
    # "accounting" in ``unsupported``.
    process_samples: list[tuple[int, int, int, int]] = field(default_factory=list)
    accounting_enabled: bool = False
    accounting: dict[int, tuple[int, bool]] = field(default_factory=dict)
    # PCIe link (generation, width) now and at most: the H200's answers (nvml_calls.json), Gen5 x16 in P0. The fabric:
    # None is a GPU in no NVLink fabric, answering NOT_SUPPORTED (the H200 VM: nvidia-smi's "Fabric" section all
    # N/A); ``fabric_versions`` are the nvmlGpuFabricInfo versions the driver knows (v3 added the health summary).
    pcie_link: tuple[int, int] = (5, 16)
    pcie_link_max: tuple[int, int] = (5, 16)
    fabric: FakeFabric | None = None
    fabric_versions: tuple[int, ...] = (nvmlGpuFabricInfo_v2, nvmlGpuFabricInfo_v3)
    vbios_version: str = "96.00.A5.00.1A"  # nvmlDeviceGetVbiosVersion (MIG instances answer their parent's)


@dataclass
class _EventSet:
    pending: list[tuple[int, int, int]] = field(default_factory=list)
    devices: set[int] = field(default_factory=set)
    cond: threading.Condition = field(default_factory=threading.Condition)


@dataclass
class FakeState:
    gpus: list[FakeGpu] = field(default_factory=list)
    initialized: bool = False
    init_error: int | None = None
    count_error: int | None = None
    calls: dict[str, int] = field(default_factory=dict)
    gpm_taken: dict[int, tuple[int, int, float]] = field(default_factory=dict)
    gpm_pairs: list[tuple[float, float]] = field(default_factory=list)
    event_sets: list[_EventSet] = field(default_factory=list)
    handles: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)
    # System queries: the driver's version string and the CUDA version it supports (1000 x major + 10 x minor);
    # a function name in ``system_unsupported`` answers NVML_ERROR_NOT_SUPPORTED.
    driver_version: str = "570.86.15"
    cuda_driver_version: int = 13000
    system_unsupported: set[str] = field(default_factory=set)


STATE = FakeState()


def reset(gpus: list[FakeGpu], *, init_error: int | None = None) -> FakeState:
    """Start a test with these GPUs; ``init_error`` makes ``nvmlInit`` fail with that code."""
    global STATE
    STATE = FakeState(gpus=gpus, init_error=init_error)
    return STATE


def inject_xid(gpu_index: int, xid: int, gpu_instance_id: int = 0xFFFFFFFF) -> None:
    """Deliver an XID event to every event set registered for the GPU."""
    for event_set in STATE.event_sets:
        if gpu_index in event_set.devices:
            with event_set.cond:
                event_set.pending.append((gpu_index, xid, gpu_instance_id))
                event_set.cond.notify_all()


def _handle(gpu_index: int, mig_slot: int | None = None) -> Any:
    """A new pointer object to the one opaque struct of this device, as the real binding returns."""
    for address, key in STATE.handles.items():
        if key == (gpu_index, mig_slot):
            return pointer(struct_c_nvmlDevice_t.from_address(address))
    struct = struct_c_nvmlDevice_t()
    STATE.keep.append(struct)
    STATE.handles[addressof(struct)] = (gpu_index, mig_slot)
    return pointer(struct)


def _resolve(handle: Any, fn: str) -> tuple[FakeGpu, FakeMig | None, int]:
    STATE.calls[fn] = STATE.calls.get(fn, 0) + 1
    if not STATE.initialized:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    key = STATE.handles.get(addressof(handle.contents))
    if key is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    gpu = STATE.gpus[key[0]]
    if gpu.lost:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    if fn in gpu.unsupported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if fn in gpu.no_permission:
        raise NVMLError(NVML_ERROR_NO_PERMISSION)
    mig = None if key[1] is None or gpu.mig is None else gpu.mig[key[1]]
    return gpu, mig, key[0]


# -- the API ------------------------------------------------------------------------------------------------------
def nvmlInitWithFlags(flags: int) -> None:
    if STATE.init_error is not None:
        raise NVMLError(STATE.init_error)
    STATE.initialized = True


def nvmlInit() -> None:
    nvmlInitWithFlags(0)


def nvmlShutdown() -> None:
    if not STATE.initialized:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    STATE.initialized = False


def _system(fn: str) -> None:
    STATE.calls[fn] = STATE.calls.get(fn, 0) + 1
    if not STATE.initialized:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    if fn in STATE.system_unsupported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)


def nvmlSystemGetDriverVersion() -> str:
    _system("nvmlSystemGetDriverVersion")
    return STATE.driver_version


def nvmlSystemGetCudaDriverVersion() -> int:
    _system("nvmlSystemGetCudaDriverVersion")
    return STATE.cuda_driver_version


def nvmlSystemGetCudaDriverVersion_v2() -> int:
    _system("nvmlSystemGetCudaDriverVersion_v2")
    return STATE.cuda_driver_version


def nvmlDeviceGetVbiosVersion(handle: Any) -> str:
    gpu, _mig, _ = _resolve(handle, "nvmlDeviceGetVbiosVersion")
    return gpu.vbios_version


def nvmlDeviceGetCount() -> int:
    if not STATE.initialized:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    if STATE.count_error is not None:
        raise NVMLError(STATE.count_error)
    return len(STATE.gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> Any:
    if not STATE.initialized:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    if not 0 <= index < len(STATE.gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _handle(index)


def nvmlDeviceGetName(handle: Any) -> str:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetName")
    return gpu.name if mig is None else f"{gpu.name} MIG {mig.profile}"


def nvmlDeviceGetUUID(handle: Any) -> str:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetUUID")
    return gpu.uuid if mig is None else mig.uuid


def nvmlDeviceGetUtilizationRates(handle: Any) -> c_nvmlUtilization_t:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetUtilizationRates")
    if mig is not None:  # not available on MIG instances (dcgm-exporter#430)
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return c_nvmlUtilization_t(gpu=gpu.utilization_gpu_pct, memory=0)


def nvmlDeviceGetMemoryInfo(handle: Any, version: int | None = None) -> c_nvmlMemory_t:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetMemoryInfo")
    total, used = (
        (gpu.memory_total_bytes, gpu.memory_used_bytes)
        if mig is None
        else (
            mig.memory_total_bytes,
            mig.memory_used_bytes,
        )
    )
    return c_nvmlMemory_t(total=total, free=total - used, used=used)


def nvmlDeviceGetPowerUsage(handle: Any) -> int:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetPowerUsage")
    if mig is not None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu.power_mw


def nvmlDeviceGetTemperature(handle: Any, sensor: int) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetTemperature")
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return gpu.temperature_c


def nvmlDeviceGetClockInfo(handle: Any, type: int) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetClockInfo")
    return gpu.sm_clock_mhz if type == NVML_CLOCK_SM else 1593


def nvmlDeviceGetMaxClockInfo(handle: Any, type: int) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetMaxClockInfo")
    return gpu.max_sm_clock_mhz if type == NVML_CLOCK_SM else 2619


def nvmlDeviceGetCurrentClocksEventReasons(handle: Any) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetCurrentClocksEventReasons")
    return gpu.clock_event_reasons


def nvmlDeviceGetTotalEccErrors(handle: Any, errorType: int, counterType: int) -> int:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetTotalEccErrors")
    if mig is not None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu.ecc_corrected if errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED else gpu.ecc_uncorrected


def _field_answer(gpu: FakeGpu, mig: FakeMig | None, field_id: int, link: int) -> tuple[int, int, int]:
    """``(nvmlReturn, valueType, value)`` of one field, as NVML fills them in per field."""
    if mig is not None:
        return NVML_ERROR_NOT_SUPPORTED, NVML_VALUE_TYPE_DOUBLE, 0
    if field_id in (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX):
        if gpu.nvlink_links == 0:  # no NVLink at all: the H200 VM answered NOT_SUPPORTED per field
            return NVML_ERROR_NOT_SUPPORTED, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 0
        if link >= gpu.nvlink_links:
            return NVML_ERROR_INVALID_ARGUMENT, NVML_VALUE_TYPE_DOUBLE, 0
        total = gpu.nvlink_tx_kib if field_id == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX else gpu.nvlink_rx_kib
        share = total // gpu.nvlink_links + (1 if link < total % gpu.nvlink_links else 0)
        return NVML_SUCCESS, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, share
    if field_id == NVML_FI_DEV_PCIE_REPLAY_COUNTER:  # the H200 answers it as an unsigned int
        return NVML_SUCCESS, NVML_VALUE_TYPE_UNSIGNED_INT, gpu.pcie_replays
    remapped = (NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_UNC, NVML_FI_DEV_REMAPPED_PENDING)
    if field_id in (*remapped, NVML_FI_DEV_REMAPPED_FAILURE):
        return NVML_SUCCESS, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, gpu.remapped_rows[field_id - NVML_FI_DEV_REMAPPED_COR]
    if field_id in gpu.nvlink_error_fields:
        return NVML_SUCCESS, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, gpu.nvlink_error_fields[field_id]
    return NVML_ERROR_NOT_SUPPORTED, NVML_VALUE_TYPE_DOUBLE, 0  # valueType left 0, as the H200 returned it


def nvmlDeviceGetFieldValues(handle: Any, fieldIds: list[Any]) -> Any:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetFieldValues")
    values = (c_nvmlFieldValue_t * len(fieldIds))()
    now_us = int(time.time() * 1e6)
    for i, field_id in enumerate(fieldIds):
        try:
            values[i].fieldId, values[i].scopeId = field_id
        except TypeError:
            values[i].fieldId = field_id
        values[i].timestamp = now_us
        ret, value_type, value = _field_answer(gpu, mig, values[i].fieldId, values[i].scopeId)
        values[i].nvmlReturn, values[i].valueType = ret, value_type
        if ret == NVML_SUCCESS:
            member = "uiVal" if value_type == NVML_VALUE_TYPE_UNSIGNED_INT else "ullVal"
            setattr(values[i].value, member, value)
    return values


def nvmlDeviceGetTotalEnergyConsumption(handle: Any) -> int:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetTotalEnergyConsumption")
    if mig is not None:  # a board reading: assumed unavailable on a MIG instance's handle, like power
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu.energy_mj


def nvmlDeviceGetPcieReplayCounter(handle: Any) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetPcieReplayCounter")
    return gpu.pcie_replays


def nvmlDeviceGetCurrPcieLinkGeneration(handle: Any) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetCurrPcieLinkGeneration")
    return gpu.pcie_link[0]


def nvmlDeviceGetMaxPcieLinkGeneration(handle: Any) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
    return gpu.pcie_link_max[0]


def nvmlDeviceGetCurrPcieLinkWidth(handle: Any) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetCurrPcieLinkWidth")
    return gpu.pcie_link[1]


def nvmlDeviceGetMaxPcieLinkWidth(handle: Any) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetMaxPcieLinkWidth")
    return gpu.pcie_link_max[1]


def nvmlDeviceGetGpuFabricInfoV(device: Any, gpuFabricInfo: Any) -> int:
    gpu, _, _ = _resolve(device, "nvmlDeviceGetGpuFabricInfoV")
    info = getattr(gpuFabricInfo, "_obj", None)  # byref(struct)
    if info is None and hasattr(gpuFabricInfo, "contents"):  # pointer(struct)
        info = gpuFabricInfo.contents
    if not isinstance(info, c_nvmlGpuFabricInfo_v2_t | c_nvmlGpuFabricInfo_v3_t):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # C reads a pointer: a struct by value is garbage to it
    if gpu.fabric is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if info.version not in gpu.fabric_versions:
        raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    if sizeof(info) < info.version & 0xFFFFFF:  # the driver would write past the caller's struct
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    fabric = gpu.fabric
    info.state, info.status, info.cliqueId, info.healthMask = (
        fabric.state,
        fabric.status,
        fabric.clique_id,
        fabric.health_mask,
    )
    if info.version == nvmlGpuFabricInfo_v3:
        info.healthSummary = fabric.health_summary
    return NVML_SUCCESS


def nvmlDeviceGetRemappedRows(device: Any) -> tuple[int, int, int, int]:
    gpu, _, _ = _resolve(device, "nvmlDeviceGetRemappedRows")
    return tuple(gpu.remapped_rows)  # type: ignore[return-value]


def nvmlDeviceGetRetiredPagesPendingStatus(device: Any) -> int:
    _resolve(device, "nvmlDeviceGetRetiredPagesPendingStatus")
    raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # Hopper: row remapping replaced page retirement


def nvmlDeviceGetNvLinkState(device: Any, link: int) -> int:
    gpu, _, _ = _resolve(device, "nvmlDeviceGetNvLinkState")
    if not gpu.nvlink_error_fields:  # the H200 VM: every per-link call answered NOT_SUPPORTED
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if link >= gpu.nvlink_links:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return 1


def nvmlDeviceGetNvLinkErrorCounter(device: Any, link: int, counter: int) -> int:
    gpu, _, _ = _resolve(device, "nvmlDeviceGetNvLinkErrorCounter")
    if not gpu.nvlink_error_fields:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if link >= gpu.nvlink_links:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    total_field = {
        NVML_NVLINK_ERROR_DL_REPLAY: NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL,
        NVML_NVLINK_ERROR_DL_RECOVERY: NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL,
        NVML_NVLINK_ERROR_DL_CRC_FLIT: NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL,
        NVML_NVLINK_ERROR_DL_CRC_DATA: NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL,
    }.get(counter)
    total = gpu.nvlink_error_fields.get(total_field or -1, 0)
    return total // gpu.nvlink_links + (1 if link < total % gpu.nvlink_links else 0)


class c_nvmlProcessUtilizationSample_t(_PrintableStructure):
    _fields_ = [
        ("pid", c_uint),
        ("timeStamp", c_ulonglong),
        ("smUtil", c_uint),
        ("memUtil", c_uint),
        ("encUtil", c_uint),
        ("decUtil", c_uint),
    ]


class c_nvmlAccountingStats_t(_PrintableStructure):
    _fields_ = [
        ("gpuUtilization", c_uint),
        ("memoryUtilization", c_uint),
        ("maxMemoryUsage", c_ulonglong),
        ("time", c_ulonglong),
        ("startTime", c_ulonglong),
        ("isRunning", c_uint),
        ("reserved", c_uint * 5),
    ]


def nvmlDeviceGetProcessUtilization(handle: Any, timeStamp: int) -> list[c_nvmlProcessUtilizationSample_t]:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetProcessUtilization")
    if "process_utilization" in gpu.unsupported or mig is not None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    newer = [s for s in gpu.process_samples if s[1] > timeStamp]
    if not newer:
        raise NVMLError(NVML_ERROR_NOT_FOUND)  # "if sample entries are not found"
    return [
        c_nvmlProcessUtilizationSample_t(pid=pid, timeStamp=ts, smUtil=sm, memUtil=mem, encUtil=0, decUtil=0)
        for pid, ts, sm, mem in newer
    ]


def _accounting(handle: Any, fn: str) -> FakeGpu:
    gpu, mig, _ = _resolve(handle, fn)
    if "accounting" in gpu.unsupported or mig is not None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu


def nvmlDeviceGetAccountingMode(handle: Any) -> int:
    gpu = _accounting(handle, "nvmlDeviceGetAccountingMode")
    return NVML_FEATURE_ENABLED if gpu.accounting_enabled else NVML_FEATURE_DISABLED


def nvmlDeviceGetAccountingPids(handle: Any) -> list[int]:
    gpu = _accounting(handle, "nvmlDeviceGetAccountingPids")
    if not gpu.accounting_enabled:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # "or accounting mode is disabled"
    return list(gpu.accounting)


def nvmlDeviceGetAccountingStats(handle: Any, pid: int) -> c_nvmlAccountingStats_t:
    gpu = _accounting(handle, "nvmlDeviceGetAccountingStats")
    if not gpu.accounting_enabled:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if pid not in gpu.accounting:
        raise NVMLError(NVML_ERROR_NOT_FOUND)  # "if process stats were not found"
    util, running = gpu.accounting[pid]
    return c_nvmlAccountingStats_t(gpuUtilization=util, memoryUtilization=0, isRunning=int(running))


def nvmlDeviceGetComputeRunningProcesses(handle: Any) -> list[nvmlFriendlyObject]:
    gpu, mig, _ = _resolve(handle, "nvmlDeviceGetComputeRunningProcesses")
    listed = gpu.processes if mig is None else mig.processes
    gi = 0xFFFFFFFF if mig is None else mig.gpu_instance_id
    out = []
    for pid, used in listed:
        info = c_nvmlProcessInfo_v3_t(pid=pid, usedGpuMemory=used if used is not None else 2**64 - 1)
        info.gpuInstanceId, info.computeInstanceId = gi, 0
        obj = nvmlStructToFriendlyObject(info)
        if obj.usedGpuMemory == 2**64 - 1:
            obj.usedGpuMemory = None
        out.append(obj)
    return out


def nvmlDeviceGetMigMode(device: Any) -> list[int]:
    gpu, _, _ = _resolve(device, "nvmlDeviceGetMigMode")
    if gpu.mig is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    mode = NVML_DEVICE_MIG_ENABLE if gpu.mig else NVML_DEVICE_MIG_DISABLE
    return [mode, mode]


def nvmlDeviceGetMaxMigDeviceCount(device: Any) -> int:
    _resolve(device, "nvmlDeviceGetMaxMigDeviceCount")
    return 7


def nvmlDeviceGetMigDeviceHandleByIndex(device: Any, index: int) -> Any:
    gpu, _, gpu_index = _resolve(device, "nvmlDeviceGetMigDeviceHandleByIndex")
    if not gpu.mig or index >= len(gpu.mig):
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return _handle(gpu_index, index)


def nvmlDeviceGetGpuInstanceId(device: Any) -> int:
    _, mig, _ = _resolve(device, "nvmlDeviceGetGpuInstanceId")
    if mig is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return mig.gpu_instance_id


def nvmlDeviceGetSupportedEventTypes(handle: Any) -> int:
    gpu, _, _ = _resolve(handle, "nvmlDeviceGetSupportedEventTypes")
    return gpu.supported_events


def nvmlEventSetCreate() -> Any:
    event_set = _EventSet()
    STATE.event_sets.append(event_set)
    struct = struct_c_nvmlEventSet_t()
    STATE.keep.append((struct, event_set))
    return pointer(struct)


def _event_set(handle: Any) -> _EventSet:
    for item in STATE.keep:
        if isinstance(item, tuple) and addressof(item[0]) == addressof(handle.contents):
            return item[1]
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


def nvmlDeviceRegisterEvents(handle: Any, eventTypes: int, eventSet: Any) -> None:
    gpu, _, gpu_index = _resolve(handle, "nvmlDeviceRegisterEvents")
    if not eventTypes & gpu.supported_events:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    _event_set(eventSet).devices.add(gpu_index)


def nvmlEventSetWait_v2(eventSet: Any, timeoutms: int) -> c_nvmlEventData_t:
    event_set = _event_set(eventSet)
    with event_set.cond:
        if not event_set.pending:
            event_set.cond.wait(timeoutms / 1000)
        if not event_set.pending:
            raise NVMLError(NVML_ERROR_TIMEOUT)
        gpu_index, xid, gi = event_set.pending.pop(0)
    data = c_nvmlEventData_t()
    data.device = _handle(gpu_index)
    data.eventType, data.eventData = nvmlEventTypeXidCriticalError, xid
    data.gpuInstanceId, data.computeInstanceId = gi, 0xFFFFFFFF
    return data


def nvmlEventSetWait(eventSet: Any, timeoutms: int) -> c_nvmlEventData_t:
    return nvmlEventSetWait_v2(eventSet, timeoutms)


def nvmlEventSetFree(eventSet: Any) -> None:
    STATE.event_sets.remove(_event_set(eventSet))


def nvmlGpmQueryDeviceSupport(device: Any) -> c_nvmlGpmSupport_t:
    gpu, _, _ = _resolve(device, "nvmlGpmQueryDeviceSupport")
    support = c_nvmlGpmSupport_t()
    support.version = NVML_GPM_SUPPORT_VERSION
    support.isSupportedDevice = int(gpu.gpm_supported)
    return support


def nvmlGpmSampleAlloc() -> Any:
    struct = struct_c_nvmlGpmSample_t()
    STATE.keep.append(struct)
    return pointer(struct)


def nvmlGpmSampleFree(gpmSample: Any) -> None:
    STATE.gpm_taken.pop(addressof(gpmSample.contents), None)


def _take(device: Any, gi: int | None, gpmSample: Any, fn: str) -> Any:
    gpu, _, gpu_index = _resolve(device, fn)
    if not gpu.gpm_supported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    STATE.gpm_taken[addressof(gpmSample.contents)] = (gpu_index, -1 if gi is None else gi, time.monotonic())
    return gpmSample


def nvmlGpmSampleGet(device: Any, gpmSample: Any) -> Any:
    return _take(device, None, gpmSample, "nvmlGpmSampleGet")


def nvmlGpmMigSampleGet(device: Any, gpuInstanceId: int, gpmSample: Any) -> Any:
    return _take(device, gpuInstanceId, gpmSample, "nvmlGpmMigSampleGet")


def nvmlGpmMetricsGet(metricsGet: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t:
    STATE.calls["nvmlGpmMetricsGet"] = STATE.calls.get("nvmlGpmMetricsGet", 0) + 1
    first = STATE.gpm_taken.get(addressof(metricsGet.sample1.contents))
    second = STATE.gpm_taken.get(addressof(metricsGet.sample2.contents))
    if metricsGet.version != NVML_GPM_METRICS_GET_VERSION or first is None or second is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    if first[:2] != second[:2]:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    STATE.gpm_pairs.append((first[2], second[2]))
    gpu = STATE.gpus[second[0]]
    if gpu.lost:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    values = gpu.gpm_values
    if second[1] >= 0 and gpu.mig:
        values = next(m.gpm_values for m in gpu.mig if m.gpu_instance_id == second[1])
    for i in range(metricsGet.numMetrics):
        entry = metricsGet.metrics[i]
        if entry.metricId in values:
            entry.nvmlReturn, entry.value = NVML_SUCCESS, values[entry.metricId]
        else:
            entry.nvmlReturn, entry.value = NVML_ERROR_NOT_SUPPORTED, 0.0
    return metricsGet
