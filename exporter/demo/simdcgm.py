"""A simulated current dcgm-exporter: simulated GPUs in DCGM 4.7's canonical names, read back by the real source.

One demo node reads its GPUs the way a node running dcgm-exporter 4.10 on DCGM 4.7 does: :class:`SimDcgmExporter`
prints what such an exporter prints for the simulated GPUs (canonical field names, base units, the DCGM 4.6
cumulative cycle counters), and :class:`SimDcgmSource` hands that text to the real
:class:`~mfumon.exporter.node.sources.dcgm.DcgmSource` parser. So the demo's numbers for that node pass through the
same name table and unit conversions as a real node's, and its hardware estimate comes from cycle counters.

The printed names are written out here, apart from the source's table, so a mismatch between the two shows as a
node with missing counters, not as two copies of one mistake.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mfumon.exporter.node.sources.dcgm import DcgmSource
from mfumon.exporter.node.sources.sim import SimSource
from mfumon.exporter.samples import GpuSample

__all__ = ["SimDcgmExporter", "SimDcgmSource"]

#: dcgm-exporter's clock_event label values, by our throttle reason names.
_CLOCK_EVENTS = {
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "clocks_setting",
    "sw_power_cap": "power_cap",
    "hw_slowdown": "hw_slowdown",
    "sw_thermal": "sw_thermal",
    "hw_thermal": "hw_thermal",
    "hw_power_brake": "hw_power_brake",
}
#: Gauges and counters printed for every GPU: (canonical name, TYPE, HELP, our field, scale to the printed unit).
_FIELDS: tuple[tuple[str, str, str, str, float], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK_HERTZ", "gauge", "SM clock frequency (in Hz).", "sm_clock_hz", 1.0),
    ("DCGM_FI_DEV_SM_MAX_CLOCK_HERTZ", "gauge", "Maximum SM clock frequency (in Hz).", "max_sm_clock_hz", 1.0),
    ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", "gauge", "GPU temperature (in C).", "temperature_celsius", 1.0),
    ("DCGM_FI_DEV_BOARD_POWER_WATTS", "gauge", "Power draw (in W).", "power_watts", 1.0),
    (
        "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
        "counter",
        "Total energy consumption since boot (in J).",
        "energy_joules_total",
        1.0,
    ),
    ("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", "counter", "Total number of PCIe retries.", "pcie_replays_total", 1.0),
    ("DCGM_FI_DEV_GPU_UTIL_RATIO", "gauge", "GPU utilization (ratio).", "utilization", 1.0),
    ("DCGM_FI_DEV_XID_ERROR", "gauge", "Value of the last XID error encountered.", "last_xid", 1.0),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
        "ecc_corrected_total",
        1.0,
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        "ecc_uncorrected_total",
        1.0,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        "remapped_rows_uncorrectable_total",
        1.0,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
        "counter",
        "Number of remapped rows for correctable errors",
        "remapped_rows_correctable_total",
        1.0,
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILED", "gauge", "Whether remapping of rows has failed", "row_remap_failure", 1.0),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether a row remap is pending", "row_remap_pending", 1.0),
    (
        "DCGM_FI_PROF_SM_UTIL_RATIO",
        "gauge",
        "The ratio of cycles an SM has at least 1 warp assigned.",
        "sm_active",
        1.0,
    ),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY_RATIO",
        "gauge",
        "The ratio of number of warps resident on an SM.",
        "sm_occupancy",
        1.0,
    ),
    (
        "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        "tensor_active",
        1.0,
    ),
    (
        "DCGM_FI_PROF_DRAM_UTIL_RATIO",
        "gauge",
        "Ratio of cycles the device memory interface is active.",
        "dram_active",
        1.0,
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND",
        "gauge",
        "The rate of data transmitted over the PCIe bus (B/s).",
        "pcie_tx_bytes_per_second",
        1.0,
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND",
        "gauge",
        "The rate of data received over the PCIe bus (B/s).",
        "pcie_rx_bytes_per_second",
        1.0,
    ),
    (
        "DCGM_FI_PROF_NVLINK_TX_BYTES_PER_SECOND",
        "gauge",
        "The rate of data transmitted over NVLink (B/s).",
        "nvlink_tx_bytes_per_second",
        1.0,
    ),
    (
        "DCGM_FI_PROF_NVLINK_RX_BYTES_PER_SECOND",
        "gauge",
        "The rate of data received over NVLink (B/s).",
        "nvlink_rx_bytes_per_second",
        1.0,
    ),
    ("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe Current Link Generation.", "pcie_link_gen", 1.0),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "gauge", "PCIe Max Link Generation.", "pcie_link_gen_max", 1.0),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe Current Link Width.", "pcie_link_width", 1.0),
    ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "gauge", "PCIe Max Link Width.", "pcie_link_width_max", 1.0),
)
_CYCLES = (
    ("DCGM_FI_PROF_SM_CYCLES_ELAPSED_TOTAL", "Raw monotonic counter of GPU SM cycles elapsed."),
    (
        "DCGM_FI_PROF_SM_CYCLES_ACTIVE_TOTAL",
        "Raw monotonic counter of GPU SM cycles where at least one warp was active.",
    ),
    ("DCGM_FI_PROF_MMA_CYCLES_ACTIVE_TOTAL", "Raw monotonic counter of GPU SM MMA (any tensor) cycles active."),
    ("DCGM_FI_PROF_HMMA_CYCLES_ACTIVE_TOTAL", "Raw monotonic counter of GPU SM HMMA tensor cycles active."),
)


@dataclass(slots=True)
class _Cycles:
    """One GPU's cumulative cycle counters, as DCGM 4.6+ keeps them (SM-cycles summed over the GPU's SMs)."""

    elapsed: int = 0
    sm_active: int = 0
    mma_active: int = 0


class SimDcgmExporter:
    """Prints, for a :class:`SimSource`'s GPUs, the ``/metrics`` text of dcgm-exporter 4.10 on DCGM 4.7.

    Args:
        source: the simulated GPUs.
        hostname: the ``Hostname`` label.
        sm_count: SMs per GPU (H100 SXM: 132), for the elapsed-cycle counter's rate.
        driver_version: the ``DCGM_FI_DRIVER_VERSION`` label.
    """

    def __init__(self, source: SimSource, *, hostname: str, sm_count: int = 132, driver_version: str = "580.95.05"):
        self._source = source
        self._hostname = hostname
        self._sm_count = sm_count
        self._driver = driver_version
        self._cycles: dict[str, _Cycles] = {}
        self._at: float | None = None
        self._lock = threading.Lock()

    def render(self, now: float) -> str:
        """The exposition at ``now``: every GPU's gauges, and cycle counters advanced since the previous call."""
        samples = self._source.collect()
        with self._lock:
            seconds = 0.0 if self._at is None else max(0.0, now - self._at)
            self._at = now
            lines: list[str] = []
            for name, kind, text, field, scale in _FIELDS:
                lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
                for sample in samples:
                    value = getattr(sample, field)
                    if sample.up and value is not None:
                        lines.append(f"{name}{{{self._labels(sample)}}} {_number(value * scale)}")
            self._memory_lines(samples, lines)
            self._cycle_lines(samples, seconds, lines)
            self._clock_event_lines(samples, lines)
        return "\n".join(lines) + "\n"

    def _labels(self, sample: GpuSample) -> str:
        labels = (
            f'gpu="{sample.index}",UUID="{sample.uuid}",pci_bus_id="00000000:{0x18 + 0x10 * sample.index:02X}:00.0",'
            f'device="nvidia{sample.index}",modelName="{sample.name}",Hostname="{self._hostname}",'
            f'DCGM_FI_DRIVER_VERSION="{self._driver}"'
        )
        return labels + (f',hpc_job="{sample.job_id}"' if sample.job_id else "")

    def _memory_lines(self, samples: list[GpuSample], lines: list[str]) -> None:
        """Framebuffer in bytes (DCGM 4.7 IDs 1626-1628): free + used + reserved is the total."""
        for name, part in (("FREE", "free"), ("USED", "used"), ("RESERVED", "reserved")):
            family = f"DCGM_FI_DEV_FB_{name}_BYTES"
            lines += [f"# HELP {family} Framebuffer memory {part} (in bytes).", f"# TYPE {family} gauge"]
            for sample in samples:
                if not sample.up or sample.memory_total_bytes is None or sample.memory_used_bytes is None:
                    continue
                used = int(sample.memory_used_bytes)
                value = {"free": int(sample.memory_total_bytes) - used, "used": used, "reserved": 0}[part]
                lines.append(f"{family}{{{self._labels(sample)}}} {value}")

    def _cycle_lines(self, samples: list[GpuSample], seconds: float, lines: list[str]) -> None:
        """Advance each GPU's counters by what its SMs did over ``seconds``: elapsed SM-cycles at the SM clock, and
        the active and tensor shares of them the GPU's ratios say."""
        for sample in samples:
            cycles = self._cycles.setdefault(sample.uuid, _Cycles())
            if not sample.up:
                continue
            elapsed = int(self._sm_count * (sample.sm_clock_hz or 0.0) * seconds)
            cycles.elapsed += elapsed
            cycles.sm_active += int(elapsed * (sample.sm_active or 0.0))
            cycles.mma_active += int(elapsed * (sample.tensor_active or 0.0))
        values = {
            "DCGM_FI_PROF_SM_CYCLES_ELAPSED_TOTAL": lambda c: c.elapsed,
            "DCGM_FI_PROF_SM_CYCLES_ACTIVE_TOTAL": lambda c: c.sm_active,
            "DCGM_FI_PROF_MMA_CYCLES_ACTIVE_TOTAL": lambda c: c.mma_active,
            "DCGM_FI_PROF_HMMA_CYCLES_ACTIVE_TOTAL": lambda c: c.mma_active,  # bf16 jobs: every tensor cycle is HMMA
        }
        for name, text in _CYCLES:
            lines += [f"# HELP {name} {text}", f"# TYPE {name} counter"]
            for sample in samples:
                if sample.up:
                    lines.append(f"{name}{{{self._labels(sample)}}} {values[name](self._cycles[sample.uuid])}")

    def _clock_event_lines(self, samples: list[GpuSample], lines: list[str]) -> None:
        name = "DCGM_EXP_CLOCK_EVENTS_COUNT"
        lines += [f"# HELP {name} Count of clock events within the user-specified time window.", f"# TYPE {name} gauge"]
        for sample in samples:
            if not sample.up:
                continue
            active = set(sample.throttle_reasons or ())
            for reason, event in _CLOCK_EVENTS.items():
                lines.append(f'{name}{{{self._labels(sample)},clock_event="{event}"}} {int(reason in active)}')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class SimDcgmSource:
    """A counter source that reads simulated GPUs through a simulated current dcgm-exporter and the real parser."""

    name = "dcgm"

    def __init__(self, exporter: SimDcgmExporter, clock: Callable[[], float] = time.time) -> None:
        self._exporter = exporter
        self._reader = DcgmSource("http://dcgm-exporter.invalid/metrics")  # never fetched: text is handed over
        self._clock = clock
        self.error_count = 0

    def collect(self) -> list[GpuSample]:
        """What the real source makes of the exposition printed now."""
        samples = self._reader.samples_from_text(self._exporter.render(self._clock()))
        self.error_count = self._reader.error_count
        return samples

    def close(self) -> None:
        self._reader.close()
