"""The DCGM fields the dcgm-exporter source reads: one typed row per name dcgm-exporter may print.

DCGM 4.6 renamed many fields on the *same* numeric ID (the old names stay as aliases, ``dcgm_fields.h`` v4.6.0, the
"Deprecated: renamed per DCGM Field Naming Standard" block), and dcgm-exporter 4.9.0 prints those canonical names.
DCGM 4.6.1/4.7 added *new* IDs in base units (Hz, bytes, joules) next to the old MHz/MiB/mJ ones, and
dcgm-exporter 4.10.0 renamed the PROF throughput series. A reader keyed on names must therefore know, per name, its
unit and which name wins when an exporter prints both: that is this table, with the source of each row.
Sources: ``H`` is ``dcgmlib/dcgm_fields.h`` at NVIDIA/DCGM tag v4.6.0 (line numbers of that file); ``GO`` is go-dcgm's
``TestBaseUnitFieldCanonicalNamesResolve``; ``REF47`` is the DCGM 4.7 field-identifier reference; ``EXP410`` is the
dcgm-exporter 4.10.0 counters file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

__all__ = [
    "BASE_UNIT_NAMES",
    "BY_NAME",
    "CYCLE_TARGETS",
    "FIELDS",
    "MEMORY_FREE",
    "MEMORY_RESERVED",
    "Conversion",
    "DcgmField",
    "Naming",
]


class Naming(Enum):
    """Which name set a row belongs to; when two rows of one device share a target the higher precedence wins."""

    LEGACY = "legacy"  # the pre-DCGM-4.6 name, an alias since 4.6 (what dcgm-exporter before 4.9.0 prints)
    CURRENT = "current"  # a name DCGM did not rename: printed by every version
    RENAMED = "renamed"  # DCGM 4.6's canonical name on the same ID and unit (dcgm-exporter 4.9.0+)
    BASE_UNIT = "base_unit"  # a DCGM 4.6.1/4.7 ID in base units, next to an older ID in MHz/MiB/mJ
    EXPORTER_4_10 = "exporter_4_10"  # dcgm-exporter 4.10.0's name for a PROF throughput series (same ID, unit)

    @property
    def precedence(self) -> int:
        """Canonical beats legacy; a base-unit ID beats the older ID of the same quantity."""
        return _PRECEDENCE[self]


_PRECEDENCE = {Naming.LEGACY: 0, Naming.CURRENT: 1, Naming.RENAMED: 1, Naming.BASE_UNIT: 2, Naming.EXPORTER_4_10: 2}


class Conversion(Enum):
    """How a value becomes our unit."""

    SCALE = "scale"  # value x scale
    PERCENT_OR_RATIO = "percent_or_ratio"  # DCGM_FI_DEV_GPU_UTIL_RATIO: integer % on ID 203 (4.6), 0-1 on 1613 (4.7)
    CUMULATIVE = "cumulative"  # a raw monotonic counter: only differences between two scrapes mean anything


@dataclass(frozen=True, slots=True)
class DcgmField:
    """One name dcgm-exporter may print, the counter it feeds and the factor to our unit."""

    name: str
    field_id: int
    target: str  # a GpuSample counter, MEMORY_FREE/MEMORY_RESERVED, or one of CYCLE_TARGETS
    scale: float
    naming: Naming
    source: str
    conversion: Conversion = Conversion.SCALE

    @property
    def precedence(self) -> int:
        return self.naming.precedence


#: Targets that are not wire fields: parts of the memory total, and the cumulative cycle counters.
MEMORY_FREE = "memory_free_bytes"
MEMORY_RESERVED = "memory_reserved_bytes"
CYCLE_TARGETS = (
    "sm_cycles_elapsed",
    "sm_cycles_active",
    "mma_cycles_active",
    "hmma_cycles_active",
    "imma_cycles_active",
    "dmma_cycles_active",
)

_MIB = 1024.0 * 1024.0
_L, _C, _R, _B, _X = Naming.LEGACY, Naming.CURRENT, Naming.RENAMED, Naming.BASE_UNIT, Naming.EXPORTER_4_10
_F = DcgmField

FIELDS: tuple[DcgmField, ...] = (
    # Profiling ratios (0-1). Same ID, renamed in 4.6.
    _F("DCGM_FI_PROF_SM_ACTIVE", 1002, "sm_active", 1.0, _L, "H L3822"),
    _F("DCGM_FI_PROF_SM_UTIL_RATIO", 1002, "sm_active", 1.0, _R, "H L2544"),
    _F("DCGM_FI_PROF_SM_OCCUPANCY", 1003, "sm_occupancy", 1.0, _L, "H L3823"),
    _F("DCGM_FI_PROF_SM_OCCUPANCY_RATIO", 1003, "sm_occupancy", 1.0, _R, "H L2551"),
    _F("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1004, "tensor_active", 1.0, _L, "H L3824"),
    _F("DCGM_FI_PROF_TENSOR_UTIL_RATIO", 1004, "tensor_active", 1.0, _R, "H L2557"),
    _F("DCGM_FI_PROF_DRAM_ACTIVE", 1005, "dram_active", 1.0, _L, "H L3825"),
    _F("DCGM_FI_PROF_DRAM_UTIL_RATIO", 1005, "dram_active", 1.0, _R, "H L2563"),
    _F("DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", 1013, "imma_active", 1.0, _L, "H L3829"),
    _F("DCGM_FI_PROF_IMMA_UTIL_RATIO", 1013, "imma_active", 1.0, _R, "H L2611"),
    _F("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", 1014, "hmma_active", 1.0, _L, "H L3830"),
    _F("DCGM_FI_PROF_HMMA_UTIL_RATIO", 1014, "hmma_active", 1.0, _R, "H L2616"),
    _F("DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", 1015, "dmma_active", 1.0, _L, "H L3831 (fp64 tensor pipe)"),
    _F("DCGM_FI_PROF_DFMA_UTIL_RATIO", 1015, "dmma_active", 1.0, _R, "H L2621 (fp64 tensor pipe)"),
    # GPU utilization: % on ID 203; the 4.6 name holds that integer %, DCGM 4.7 moves the name to 1613 (0-1 double).
    _F("DCGM_FI_DEV_GPU_UTIL", 203, "utilization", 0.01, _L, "H L3657; integer % (default-counters.csv)"),
    _F(
        "DCGM_FI_DEV_GPU_UTIL_RATIO",
        1613,
        "utilization",
        1.0,
        _R,
        "H L775 (203, INT64 %); REF47 1613 (double 0-1)",
        Conversion.PERCENT_OR_RATIO,
    ),
    # Power, temperature, clocks, energy.
    _F("DCGM_FI_DEV_POWER_USAGE", 155, "power_watts", 1.0, _L, "H L3642"),
    _F("DCGM_FI_DEV_BOARD_POWER_WATTS", 155, "power_watts", 1.0, _R, "H L639"),
    _F("DCGM_FI_DEV_GPU_TEMP", 150, "temperature_celsius", 1.0, _L, "H L3638"),
    _F("DCGM_FI_DEV_GPU_TEMP_CELSIUS", 150, "temperature_celsius", 1.0, _R, "H L619"),
    _F("DCGM_FI_DEV_SM_CLOCK", 100, "sm_clock_hz", 1e6, _C, "H L554; MHz"),
    _F("DCGM_FI_DEV_SM_CLOCK_HERTZ", 1603, "sm_clock_hz", 1.0, _B, "GO 1603; Hz"),
    _F("DCGM_FI_DEV_MAX_SM_CLOCK", 113, "max_sm_clock_hz", 1e6, _C, "H L589; MHz"),
    _F("DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", 1608, "max_sm_clock_hz", 1.0, _B, "GO 1608; Hz"),
    _F("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 156, "energy_joules_total", 1e-3, _C, "H L644; mJ"),
    _F("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 1611, "energy_joules_total", 1.0, _B, "GO 1611; J"),
    # Framebuffer: MiB on 250-253, bytes on 1625-1628.
    _F("DCGM_FI_DEV_FB_TOTAL", 250, "memory_total_bytes", _MIB, _C, "H L871; MiB"),
    _F("DCGM_FI_DEV_FB_CAPACITY_BYTES", 1625, "memory_total_bytes", 1.0, _B, "REF47 1625; bytes"),
    _F("DCGM_FI_DEV_FB_FREE", 251, MEMORY_FREE, _MIB, _C, "H L876; MiB"),
    _F("DCGM_FI_DEV_FB_FREE_BYTES", 1626, MEMORY_FREE, 1.0, _B, "REF47 1626; bytes"),
    _F("DCGM_FI_DEV_FB_USED", 252, "memory_used_bytes", _MIB, _C, "H L881; MiB"),
    _F("DCGM_FI_DEV_FB_USED_BYTES", 1627, "memory_used_bytes", 1.0, _B, "REF47 1627; bytes"),
    _F("DCGM_FI_DEV_FB_RESERVED", 253, MEMORY_RESERVED, _MIB, _C, "H L886; MiB"),
    _F("DCGM_FI_DEV_FB_RESERVED_BYTES", 1628, MEMORY_RESERVED, 1.0, _B, "REF47 1628; bytes"),
    # PROF throughput (bytes/s under both names).
    _F("DCGM_FI_PROF_PCIE_TX_BYTES", 1009, "pcie_tx_bytes_per_second", 1.0, _C, "H L2586"),
    _F("DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", 1009, "pcie_tx_bytes_per_second", 1.0, _X, "EXP410"),
    _F("DCGM_FI_PROF_PCIE_RX_BYTES", 1010, "pcie_rx_bytes_per_second", 1.0, _C, "H L2594"),
    _F("DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND", 1010, "pcie_rx_bytes_per_second", 1.0, _X, "EXP410"),
    _F("DCGM_FI_PROF_NVLINK_TX_BYTES", 1011, "nvlink_tx_bytes_per_second", 1.0, _C, "H L2600"),
    _F("DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND", 1011, "nvlink_tx_bytes_per_second", 1.0, _X, "EXP410"),
    _F("DCGM_FI_PROF_NVLINK_RX_BYTES", 1012, "nvlink_rx_bytes_per_second", 1.0, _C, "H L2606"),
    _F("DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND", 1012, "nvlink_rx_bytes_per_second", 1.0, _X, "EXP410"),
    # Errors and health.
    _F("DCGM_FI_DEV_XID_ERRORS", 230, "last_xid", 1.0, _L, "H L3659; the last XID, a gauge"),
    _F("DCGM_FI_DEV_XID_ERROR", 230, "last_xid", 1.0, _R, "H L806; the last XID, a gauge"),
    _F("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 310, "ecc_corrected_total", 1.0, _C, "H L924"),
    _F("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 311, "ecc_uncorrected_total", 1.0, _C, "H L929"),
    _F("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 202, "pcie_replays_total", 1.0, _L, "H L3656"),
    _F("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", 202, "pcie_replays_total", 1.0, _R, "H L770"),
    _F("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 393, "remapped_rows_uncorrectable_total", 1.0, _L, "H L3672"),
    _F("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", 393, "remapped_rows_uncorrectable_total", 1.0, _R, "H L1258"),
    _F("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 394, "remapped_rows_correctable_total", 1.0, _L, "H L3673"),
    _F("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", 394, "remapped_rows_correctable_total", 1.0, _R, "H L1263"),
    _F("DCGM_FI_DEV_ROW_REMAP_FAILURE", 395, "row_remap_failure", 1.0, _L, "H L3674"),
    _F("DCGM_FI_DEV_ROW_REMAP_FAILED", 395, "row_remap_failure", 1.0, _R, "H L1268"),
    _F("DCGM_FI_DEV_ROW_REMAP_PENDING", 396, "row_remap_pending", 1.0, _C, "H L1273"),
    _F("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 409, "nvlink_crc_flit_errors_total", 1.0, _L, "H L3753"),
    _F("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL", 409, "nvlink_crc_flit_errors_total", 1.0, _R, "H L1308"),
    _F("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 419, "nvlink_crc_data_errors_total", 1.0, _L, "H L3754"),
    _F("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL", 419, "nvlink_crc_data_errors_total", 1.0, _R, "H L1343"),
    _F("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 429, "nvlink_replay_errors_total", 1.0, _L, "H L3755"),
    _F("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL", 429, "nvlink_replay_errors_total", 1.0, _R, "H L1378"),
    _F("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 439, "nvlink_recovery_errors_total", 1.0, _L, "H L3756"),
    _F("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL", 439, "nvlink_recovery_errors_total", 1.0, _R, "H L1413"),
    # Fabric and PCIe link state (names unchanged in 4.6).
    _F("DCGM_FI_DEV_FABRIC_MANAGER_STATUS", 170, "fabric_manager_status", 1.0, _C, "H L707"),
    _F("DCGM_FI_DEV_FABRIC_HEALTH_MASK", 174, "fabric_health_mask", 1.0, _C, "H L730"),
    _F("DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", 175, "fabric_health_summary", 1.0, _C, "H L741"),
    _F("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", 235, "pcie_link_gen_max", 1.0, _C, "H L811"),
    _F("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", 236, "pcie_link_width_max", 1.0, _C, "H L816"),
    _F("DCGM_FI_DEV_PCIE_LINK_GEN", 237, "pcie_link_gen", 1.0, _C, "H L821"),
    _F("DCGM_FI_DEV_PCIE_LINK_WIDTH", 238, "pcie_link_width", 1.0, _C, "H L826"),
    # DCGM 4.6 raw monotonic cycle counters (differenced between scrapes).
    *(
        _F(f"DCGM_FI_PROF_{stem}_TOTAL", field_id, target, 1.0, _C, f"H L{line}", Conversion.CUMULATIVE)
        for stem, field_id, target, line in (
            ("SM_CYCLES_ELAPSED", 1084, "sm_cycles_elapsed", 2754),
            ("SM_CYCLES_ACTIVE", 1085, "sm_cycles_active", 2761),
            ("MMA_CYCLES_ACTIVE", 1086, "mma_cycles_active", 2768),
            ("DMMA_CYCLES_ACTIVE", 1087, "dmma_cycles_active", 2775),
            ("HMMA_CYCLES_ACTIVE", 1088, "hmma_cycles_active", 2782),
            ("IMMA_CYCLES_ACTIVE", 1089, "imma_cycles_active", 2789),
        )
    ),
)

BY_NAME: Mapping[str, DcgmField] = MappingProxyType({row.name: row for row in FIELDS})

#: Names only a DCGM 4.6.1+/4.7 exporter prints (base-unit IDs 1600-1611, 1625-1628, 1648; GO, REF47). Their
#: presence says DCGM_FI_DEV_GPU_UTIL_RATIO in the same text is the 0-1 double on ID 1613.
BASE_UNIT_NAMES: frozenset[str] = frozenset(
    {
        "DCGM_FI_DEV_BAR1_CAPACITY_BYTES",
        "DCGM_FI_DEV_BAR1_USED_BYTES",
        "DCGM_FI_DEV_BAR1_FREE_BYTES",
        "DCGM_FI_DEV_SM_CLOCK_HERTZ",
        "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ",
        "DCGM_FI_DEV_VIDEO_CLOCK_HERTZ",
        "DCGM_FI_DEV_SM_APP_CLOCK_HERTZ",
        "DCGM_FI_DEV_MEMORY_APP_CLOCK_HERTZ",
        "DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ",
        "DCGM_FI_DEV_MEMORY_MAX_CLOCK_HERTZ",
        "DCGM_FI_DEV_VIDEO_MAX_CLOCK_HERTZ",
        "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
        "DCGM_FI_DEV_FB_CAPACITY_BYTES",
        "DCGM_FI_DEV_FB_FREE_BYTES",
        "DCGM_FI_DEV_FB_USED_BYTES",
        "DCGM_FI_DEV_FB_RESERVED_BYTES",
        "DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND",
    }
)
