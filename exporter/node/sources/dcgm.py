"""The dcgm-exporter source: read a local dcgm-exporter's ``/metrics`` and map DCGM fields onto our counters.

dcgm-exporter names each Prometheus series after its DCGM field (``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",
UUID="GPU-...",modelName="...",...}``) and labels MIG instances with ``GPU_I_ID``/``GPU_I_PROFILE`` under the
parent's ``UUID``. The text is parsed with ``prometheus_client.parser.text_string_to_metric_families``.

Both name sets are read (``dcgm_fields.FIELDS`` is the table, with units and sources): the names printed before
dcgm-exporter 4.9.0 (``DCGM_FI_PROF_SM_ACTIVE``, ``DCGM_FI_DEV_FB_USED`` in MiB, ``..._TOTAL_ENERGY_CONSUMPTION`` in
mJ, ``DCGM_FI_DEV_SM_CLOCK`` in MHz, ...) and DCGM 4.6's canonical names (``DCGM_FI_PROF_SM_UTIL_RATIO``, ...), DCGM
4.7's base-unit IDs (``..._FB_USED_BYTES``, ``..._GPU_ENERGY_JOULES_TOTAL``, ``..._SM_CLOCK_HERTZ``) and
dcgm-exporter 4.10.0's ``DCGM_FI_PROF_{PCIE,NVLINK}_{TX,RX}_BYTES_PER_SECOND``. Units are converted at the source.
When one device carries an old and a canonical name for one counter, the canonical value is taken, never the sum.
``DCGM_FI_DEV_GPU_UTIL_RATIO`` is an integer percent on ID 203 in DCGM 4.6 and a 0-1 double on ID 1613 in 4.7: a
value above 1 is a percent, a fraction a ratio, 0 is 0 either way, and an exact 1 is decided by the family's HELP
text, then by 4.7-only base-unit names in the same text, then by ``DCGM_FI_DEV_GPU_UTIL`` (always a percent) if
exported too; failing all three it is left out and counted.

Memory total is ``FB_TOTAL``/``FB_CAPACITY_BYTES``, else used + free + reserved. ``DCGM_FI_DEV_XID_ERRORS``
(``..._XID_ERROR``) is the *last* XID value, not a count: it is sent as ``last_xid``, and the source counts its
changes to a non-zero value since the exporter started (repeats of the same XID cannot be seen this way).
``DCGM_EXP_CLOCK_EVENTS_COUNT`` -> ``throttle_reasons``. Fabric manager status, fabric health and the PCIe link
generation and width (now and at most) are sent as they are.

Exact tensor activity: where DCGM 4.6+'s raw cycle counters are exported (``DCGM_FI_PROF_SM_CYCLES_ELAPSED_TOTAL``,
``..._SM_CYCLES_ACTIVE_TOTAL``, ``..._{MMA,HMMA,IMMA,DMMA}_CYCLES_ACTIVE_TOTAL``) the source keeps each device's
previous reading and sends activity over the interval between two scrapes (``tensor_active`` = dMMA / dELAPSED,
``tensor_active_exact`` = 1), instead of DCGM's sampled ratios. The first reading, a counter that went down (driver
reload, GPU reset, exporter restart) or an interval without new cycles sends the sampled ratios
(``tensor_active_exact`` = 0) and re-baselines.

DCGM writes a *blank* sentinel where a field is unsupported (``DCGM_INT64_NOT_SUPPORTED`` = 2**63 - 14, printed as
``9223372036854775794``; ``DCGM_FP64_BLANK`` = 2**47 and up), and dcgm-exporter prints it as a value. Such values
are dropped, so an unsupported field is left out, never sent as a count of 9.2e18.
The job comes from the ``hpc_job`` label, then our mapping directory, then the ``pod`` label.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from mfumon.exporter.errors import SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.sources.dcgm_fields import (
    BASE_UNIT_NAMES,
    BY_NAME,
    MEMORY_FREE,
    MEMORY_RESERVED,
    Conversion,
    DcgmField,
)
from mfumon.exporter.samples import GpuSample, sanitize_id

__all__ = ["CycleTracker", "DcgmSource", "DeviceReadings", "Exposition", "parse_dcgm_text"]

logger = logging.getLogger(__name__)

#: DCGM's blank values (dcgm_structs.h): any int64 value >= DCGM_INT64_BLANK (0x7ffffffffffffff0) and doubles in
#: [DCGM_FP64_BLANK, DCGM_FP64_BLANK + 16) mean "no value" (blank, not found, not supported, no permission).
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0  # an int: exact against ints the parser returns, and below 2.0**63
_FP64_BLANK = 140737488355328.0
_CLOCK_EVENTS = "DCGM_EXP_CLOCK_EVENTS_COUNT"
_UTIL_RATIO = "DCGM_FI_DEV_GPU_UTIL_RATIO"
_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # an integer percent under every DCGM version
#: dcgm-exporter's clock_event label values -> the aggregator's throttle reason names.
_CLOCK_EVENT_NAMES = {
    "gpu_idle": "gpu_idle",
    "clocks_setting": "applications_clocks_setting",
    "power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal": "sw_thermal",
    "hw_thermal": "hw_thermal",
    "hw_power_brake": "hw_power_brake",
    "display_clocks": "display_clocks",
}

DeviceKey = tuple[int, int | None]


def _blank(value: float) -> bool:
    """NaN, or one of DCGM's blank sentinels: the field has no value on this device."""
    return math.isnan(value) or value >= _INT64_BLANK or _FP64_BLANK <= value < _FP64_BLANK + 16


@dataclass(frozen=True, slots=True)
class DeviceReadings:
    """One GPU or MIG instance in one ``/metrics`` text: its labels and its non-blank values by series name."""

    key: DeviceKey  # (gpu index, GPU instance id or None)
    labels: Mapping[str, str]
    values: Mapping[str, float]
    clock_events: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Exposition:
    """A parsed ``/metrics`` text: the devices, each family's HELP text, and whether DCGM 4.7 names appear."""

    devices: tuple[DeviceReadings, ...]  # by gpu index, then GPU instance (whole GPU first)
    help: Mapping[str, str]
    base_unit_names: bool  # a DCGM 4.6.1+/4.7-only base-unit family is in the text (even if blank)


def parse_dcgm_text(text: str) -> Exposition:
    """Group dcgm-exporter samples by device ``(gpu index, GPU instance id or None)``.

    NaN and blank values and series without a ``gpu`` label (NVSwitch/NVLink entities) are skipped. HELP texts are
    collected from every family, also the sample-less ones of exporters that print all HELP/TYPE lines first.
    """
    labels: dict[DeviceKey, dict[str, str]] = {}
    values: dict[DeviceKey, dict[str, float]] = {}
    events: dict[DeviceKey, dict[str, float]] = {}
    helps: dict[str, str] = {}
    base_unit = False
    for family in text_string_to_metric_families(text):
        if family.documentation:
            helps.setdefault(family.name, family.documentation)
        base_unit = base_unit or family.name in BASE_UNIT_NAMES
        for sample in family.samples:
            sample_labels = sample.labels
            if "gpu" not in sample_labels or _blank(sample.value):
                continue
            try:
                gi = sample_labels.get("GPU_I_ID")
                key = (int(sample_labels["gpu"]), int(gi) if gi not in (None, "") else None)
            except ValueError:
                continue
            device_labels = labels.setdefault(key, {})
            for label, value in sample_labels.items():
                device_labels.setdefault(label, value)
            # The parser names a counter's samples "<family>_total" (DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total, and
            # DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL_total: it strips only a lower-case "_total" from a family name):
            # the DCGM field is the family's name.
            name = family.name if sample.name == f"{family.name}_total" else sample.name
            if name == _CLOCK_EVENTS:
                events.setdefault(key, {})[sample_labels.get("clock_event", "")] = sample.value
            else:
                values.setdefault(key, {})[name] = sample.value
    devices = tuple(
        DeviceReadings(key, labels[key], values.get(key, {}), events.get(key, {}))
        for key in sorted(labels, key=lambda k: (k[0], -1 if k[1] is None else k[1]))
    )
    return Exposition(devices=devices, help=helps, base_unit_names=base_unit)


@dataclass(frozen=True, slots=True)
class FieldValue:
    """A value under the name that won for its target, still in the DCGM unit."""

    field: DcgmField
    value: float


def resolve_fields(values: Mapping[str, float]) -> dict[str, FieldValue]:
    """Pick one value per target: the name of higher precedence (canonical over legacy), never a sum."""
    chosen: dict[str, FieldValue] = {}
    for name, value in values.items():
        field = BY_NAME.get(name)
        if field is None:
            continue
        current = chosen.get(field.target)
        if current is None or field.precedence > current.field.precedence:
            chosen[field.target] = FieldValue(field, value)
    return chosen


def _help_unit(help_text: str) -> str | None:
    """``"percent"`` or ``"ratio"`` when the HELP text says so unambiguously, else None.

    The field's own name is taken out first: "..._UTIL_RATIO" in a HELP text says nothing about the unit.
    """
    text = help_text.replace(_UTIL_RATIO, "").lower()
    percent = "%" in text or "percent" in text
    ratio = "ratio" in text or "fraction" in text or "0-1" in text or "0.0-1.0" in text
    if percent != ratio:
        return "percent" if percent else "ratio"
    return None


def utilization_from_ratio_name(value: float, help_text: str, base_unit_names: bool) -> float | None:
    """Read ``DCGM_FI_DEV_GPU_UTIL_RATIO``: a 0-100 integer on DCGM 4.6 (ID 203), a 0-1 double on 4.7 (ID 1613).

    None when the unit cannot be told (an exact 1 with no HELP or 4.7 name to go by): silence beats 1% read as 100%.
    """
    if value > 1:
        return value / 100.0
    if value != int(value) or value <= 0:
        return value  # a fraction is a ratio; 0 is 0 in either unit
    unit = _help_unit(help_text)
    if unit == "percent":
        return value / 100.0
    if unit == "ratio" or base_unit_names:
        return value
    return None


@dataclass(frozen=True, slots=True)
class CycleCounters:
    """One reading of a device's DCGM 4.6+ raw monotonic cycle counters (SM elapsed is required)."""

    elapsed: float
    sm_active: float | None = None
    mma: float | None = None
    hmma: float | None = None
    imma: float | None = None
    dmma: float | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, FieldValue]) -> CycleCounters | None:
        """The counters among a device's resolved fields; None without ``SM_CYCLES_ELAPSED_TOTAL``."""

        def get(target: str) -> float | None:
            found = fields.get(target)
            return None if found is None else found.value

        elapsed = get("sm_cycles_elapsed")
        if elapsed is None:
            return None
        return cls(
            elapsed=elapsed,
            sm_active=get("sm_cycles_active"),
            mma=get("mma_cycles_active"),
            hmma=get("hmma_cycles_active"),
            imma=get("imma_cycles_active"),
            dmma=get("dmma_cycles_active"),
        )


_CYCLE_RATIOS = (
    ("sm_active", "sm_active"),
    ("mma", "tensor_active"),
    ("hmma", "hmma_active"),
    ("imma", "imma_active"),
    ("dmma", "dmma_active"),
)


class CycleTracker:
    """Per-device previous cycle-counter reading; turns two readings into exact activity over the interval."""

    def __init__(self) -> None:
        self._previous: dict[DeviceKey, CycleCounters] = {}

    def interval(self, key: DeviceKey, now: CycleCounters | None) -> dict[str, float]:
        """Ratios over the interval since the previous reading (``tensor_active`` etc.), or {} to fall back.

        Falls back (and re-baselines) on the first reading, when any counter went down (a reset) and when no SM
        cycles elapsed; a device whose counters vanished loses its baseline.
        """
        if now is None:
            self._previous.pop(key, None)
            return {}
        before = self._previous.get(key)
        self._previous[key] = now
        if before is None:
            return {}
        elapsed = now.elapsed - before.elapsed
        deltas: dict[str, float] = {}
        for attr, counter in _CYCLE_RATIOS:
            new, old = getattr(now, attr), getattr(before, attr)
            if new is not None and old is not None:
                deltas[counter] = new - old
        if elapsed <= 0 or any(delta < 0 for delta in deltas.values()):
            return {}
        return {counter: delta / elapsed for counter, delta in deltas.items()}

    def retain(self, keys: Iterable[DeviceKey]) -> None:
        """Forget devices not in the latest scrape, so a returning device starts from a fresh baseline."""
        keep = set(keys)
        for key in [k for k in self._previous if k not in keep]:
            del self._previous[key]


class DcgmSource:
    """Scrapes ``url`` (a dcgm-exporter ``/metrics``) once per :meth:`collect`."""

    name = "dcgm"

    def __init__(self, url: str, resolver: JobResolver | None = None, *, timeout_seconds: float = 5.0) -> None:
        self._url = url
        self._resolver = resolver
        self._client = httpx.Client(timeout=timeout_seconds)
        self._xid_last: dict[DeviceKey, float] = {}
        self._xid_counts: dict[DeviceKey, int] = {}
        self._cycles = CycleTracker()
        self.error_count = 0
        #: GPUs whose DCGM_FI_DEV_GPU_UTIL_RATIO read exactly 1 with nothing to tell 1% from 100% (also errors).
        self.utilization_unit_unknown = 0

    def probe(self) -> None:
        """Fetch once; ``SourceUnavailable`` when dcgm-exporter does not answer with metrics."""
        self._fetch()

    def close(self) -> None:
        self._client.close()

    def _fetch(self) -> str:
        try:
            response = self._client.get(self._url)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise SourceUnavailable(f"dcgm-exporter at {self._url}: {exc}") from exc
        return response.text

    def collect(self) -> list[GpuSample]:
        """One sample per GPU or MIG instance dcgm-exporter reports; ``SourceUnavailable`` if it is down."""
        return self.samples_from_text(self._fetch())

    def samples_from_text(self, text: str) -> list[GpuSample]:
        """Map one ``/metrics`` text onto samples (also used by tests on recorded output)."""
        exposition = parse_dcgm_text(text)
        self._cycles.retain(device.key for device in exposition.devices)
        samples = []
        for device in exposition.devices:
            try:
                samples.append(self._sample(device, exposition))
            except (KeyError, ValueError) as exc:
                self.error_count += 1
                logger.debug("skipping dcgm-exporter device %s: %s", device.key, exc)
        return samples

    def _sample(self, device: DeviceReadings, exposition: Exposition) -> GpuSample:
        labels = device.labels
        index, gi = device.key
        uuid = labels.get("UUID") or labels["uuid"]  # ``uuid`` with --use-old-namespace
        if gi is not None:
            uuid = f"{uuid}/{gi}"  # dcgm-exporter labels MIG instances with the parent's UUID
        counters = self._counters(device, exposition)
        if device.clock_events:
            active = [name for name, n in device.clock_events.items() if n > 0 and name in _CLOCK_EVENT_NAMES]
            counters["throttle_reasons"] = [_CLOCK_EVENT_NAMES[name] for name in active]
        job_id = sanitize_id(labels.get("hpc_job"))
        if job_id is None and self._resolver is not None:
            job_id = self._resolver.mapped_job(str(index) if gi is None else f"{index}.{gi}")
        if job_id is None:
            job_id = sanitize_id(labels.get("pod"))
        name = labels.get("modelName") or labels.get("model_name") or "unknown"
        return GpuSample.build(uuid, index, name, counters, mig_profile=labels.get("GPU_I_PROFILE"), job_id=job_id)

    def _counters(self, device: DeviceReadings, exposition: Exposition) -> dict[str, Any]:
        """The wire counters of one device, units converted, cycle-counter ratios over the last interval."""
        fields = resolve_fields(device.values)
        counters: dict[str, Any] = {}
        for target, found in fields.items():
            if found.field.conversion is Conversion.SCALE and target not in (MEMORY_FREE, MEMORY_RESERVED):
                counters[target] = found.value * found.field.scale
        utilization = fields.get("utilization")
        if utilization is not None and utilization.field.conversion is Conversion.PERCENT_OR_RATIO:
            help_text = exposition.help.get(utilization.field.name, "")
            counters["utilization"] = utilization_from_ratio_name(
                utilization.value, help_text, exposition.base_unit_names
            )
            if counters["utilization"] is None and _GPU_UTIL in device.values:
                counters["utilization"] = device.values[_GPU_UTIL] * BY_NAME[_GPU_UTIL].scale  # the % name decides
            if counters["utilization"] is None:
                self.utilization_unit_unknown += 1
                self.error_count += 1
                logger.debug("dcgm-exporter device %s: GPU_UTIL_RATIO of 1 in an unknown unit, left out", device.key)
        if "memory_total_bytes" not in counters and "memory_used_bytes" in counters and MEMORY_FREE in fields:
            parts = (fields[part] for part in (MEMORY_FREE, MEMORY_RESERVED) if part in fields)
            counters["memory_total_bytes"] = counters["memory_used_bytes"] + sum(
                part.value * part.field.scale for part in parts
            )
        if "last_xid" in counters:
            counters["xid_errors_total"] = self._count_xid(device.key, counters["last_xid"])
            counters["last_xid"] = int(counters["last_xid"])
        cycles = CycleCounters.from_fields(fields)
        exact = self._cycles.interval(device.key, cycles)
        if cycles is not None:
            counters.update(exact)
            counters["tensor_active_exact"] = 1 if "tensor_active" in exact else 0
        return counters

    def _count_xid(self, key: DeviceKey, value: float) -> int:
        """Count changes of the last-XID gauge to a non-zero value; the first observation is the baseline."""
        previous = self._xid_last.get(key)
        self._xid_last[key] = value
        count = self._xid_counts.get(key, 0)
        if previous is not None and value != previous and value != 0:
            count += 1
        self._xid_counts[key] = count
        return count
