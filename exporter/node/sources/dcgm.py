"""The dcgm-exporter source: read a local dcgm-exporter's ``/metrics`` and map DCGM fields onto our counters.

dcgm-exporter names each Prometheus series after its DCGM field (``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0",
UUID="GPU-...",modelName="...",...}``) and labels MIG instances with ``GPU_I_ID``/``GPU_I_PROFILE`` under the
parent's ``UUID``. The text is parsed with ``prometheus_client.parser.text_string_to_metric_families``.

Mapping (units converted at the source): ``DCGM_FI_PROF_{SM_ACTIVE,SM_OCCUPANCY,PIPE_TENSOR_ACTIVE,DRAM_ACTIVE}``
(ratios) -> ``sm_active``, ``sm_occupancy``, ``tensor_active``, ``dram_active``; ``DCGM_FI_DEV_GPU_UTIL`` (%) ->
``utilization``; ``FB_USED`` (MiB) -> ``memory_used_bytes`` and ``FB_USED + FB_FREE + FB_RESERVED`` ->
``memory_total_bytes``; ``POWER_USAGE`` (W); ``GPU_TEMP`` (°C); ``SM_CLOCK``/``MAX_SM_CLOCK`` (MHz -> Hz);
``DCGM_FI_PROF_{NVLINK,PCIE}_{TX,RX}_BYTES`` (B/s); ``ECC_{DBE,SBE}_VOL_TOTAL``; ``DCGM_EXP_CLOCK_EVENTS_COUNT``
-> ``throttle_reasons``. ``DCGM_FI_DEV_XID_ERRORS`` is the *last* XID value, not a count: it is sent as ``last_xid``,
and the source counts its changes to a non-zero value since the exporter started (repeats of the same XID cannot be
seen this way). Health fields, with the names and units of dcgm-exporter's ``etc/default-counters.csv``:
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ -> J), ``DCGM_FI_DEV_PCIE_REPLAY_COUNTER``,
``DCGM_FI_DEV_{CORRECTABLE,UNCORRECTABLE}_REMAPPED_ROWS``, ``DCGM_FI_DEV_ROW_REMAP_FAILURE``,
``DCGM_FI_DEV_ROW_REMAP_PENDING`` (field 396, not in the default file) and the NVLink totals
``DCGM_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL`` (commented out in the default file).

DCGM writes a *blank* sentinel where a field is unsupported (``DCGM_INT64_NOT_SUPPORTED`` = 2**63 - 14, printed as
``9223372036854775794``; ``DCGM_FP64_BLANK`` = 2**47 and up), and dcgm-exporter prints it as a value. Such values
are dropped, so an unsupported field is left out, never sent as a count of 9.2e18.
The job comes from the ``hpc_job`` label, then our mapping directory, then the ``pod`` label.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from mfumon.exporter.errors import SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.samples import GpuSample, sanitize_id

__all__ = ["DcgmSource", "parse_dcgm_text"]

logger = logging.getLogger(__name__)

_MIB = 1024.0 * 1024.0
#: DCGM field -> (our counter, scale to our unit)
_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 1.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy", 1.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", 1.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("utilization", 0.01),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", _MIB),
    "DCGM_FI_DEV_POWER_USAGE": ("power_watts", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_celsius", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_hz", 1e6),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("max_sm_clock_hz", 1e6),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": ("nvlink_tx_bytes_per_second", 1.0),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": ("nvlink_rx_bytes_per_second", 1.0),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_per_second", 1.0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_per_second", 1.0),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("ecc_uncorrected_total", 1.0),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("ecc_corrected_total", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_joules_total", 1e-3),  # mJ
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("pcie_replays_total", 1.0),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("remapped_rows_correctable_total", 1.0),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("remapped_rows_uncorrectable_total", 1.0),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("row_remap_failure", 1.0),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": ("row_remap_pending", 1.0),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("nvlink_crc_flit_errors_total", 1.0),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("nvlink_crc_data_errors_total", 1.0),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("nvlink_replay_errors_total", 1.0),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("nvlink_recovery_errors_total", 1.0),
}
#: DCGM's blank values (dcgm_structs.h): any int64 value >= DCGM_INT64_BLANK (0x7ffffffffffffff0) and doubles in
#: [DCGM_FP64_BLANK, DCGM_FP64_BLANK + 16) mean "no value" (blank, not found, not supported, no permission).
_INT64_BLANK = 0x7FFFFFFFFFFFFFF0  # an int: exact against ints the parser returns, and below 2.0**63
_FP64_BLANK = 140737488355328.0
_MEMORY_PARTS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
_XID = "DCGM_FI_DEV_XID_ERRORS"
_CLOCK_EVENTS = "DCGM_EXP_CLOCK_EVENTS_COUNT"
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


def parse_dcgm_text(text: str) -> dict[DeviceKey, dict[str, Any]]:
    """Group dcgm-exporter samples by device ``(gpu index, GPU instance id or None)``.

    Each device maps to ``{"labels": {...}, "fields": {DCGM field: value}, "clock_events": {...}}``; NaN and blank
    values and series without a ``gpu`` label (NVSwitch/NVLink entities) are skipped.
    """
    devices: dict[DeviceKey, dict[str, Any]] = defaultdict(lambda: {"labels": {}, "fields": {}, "clock_events": {}})
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if "gpu" not in labels or _blank(sample.value):
                continue
            try:
                gi = labels.get("GPU_I_ID")
                key = (int(labels["gpu"]), int(gi) if gi not in (None, "") else None)
            except ValueError:
                continue
            device = devices[key]
            for label, value in labels.items():
                device["labels"].setdefault(label, value)
            # The parser names a counter's samples "<family>_total" (DCGM_FI_DEV_PCIE_REPLAY_COUNTER_total): the
            # DCGM field is the family's name.
            name = family.name if sample.name == f"{family.name}_total" else sample.name
            if name == _CLOCK_EVENTS:
                device["clock_events"][labels.get("clock_event", "")] = sample.value
            else:
                device["fields"][name] = sample.value
    return dict(devices)


class DcgmSource:
    """Scrapes ``url`` (a dcgm-exporter ``/metrics``) once per :meth:`collect`."""

    name = "dcgm"

    def __init__(self, url: str, resolver: JobResolver | None = None, *, timeout_seconds: float = 5.0) -> None:
        self._url = url
        self._resolver = resolver
        self._client = httpx.Client(timeout=timeout_seconds)
        self._xid_last: dict[DeviceKey, float] = {}
        self._xid_counts: dict[DeviceKey, int] = {}
        self.error_count = 0

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
        samples = []
        for key, device in sorted(parse_dcgm_text(text).items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
            try:
                samples.append(self._sample(key, device))
            except (KeyError, ValueError) as exc:
                self.error_count += 1
                logger.debug("skipping dcgm-exporter device %s: %s", key, exc)
        return samples

    def _sample(self, key: DeviceKey, device: dict[str, Any]) -> GpuSample:
        labels, fields = device["labels"], device["fields"]
        index, gi = key
        uuid = labels.get("UUID") or labels["uuid"]  # ``uuid`` with --use-old-namespace
        if gi is not None:
            uuid = f"{uuid}/{gi}"  # dcgm-exporter labels MIG instances with the parent's UUID
        counters: dict[str, Any] = {}
        for field, (counter, scale) in _FIELDS.items():
            if field in fields:
                counters[counter] = fields[field] * scale
        if "DCGM_FI_DEV_FB_TOTAL" in fields:
            counters["memory_total_bytes"] = fields["DCGM_FI_DEV_FB_TOTAL"] * _MIB
        elif all(part in fields for part in _MEMORY_PARTS[:2]):
            counters["memory_total_bytes"] = sum(fields.get(part, 0.0) for part in _MEMORY_PARTS) * _MIB
        if _XID in fields:
            counters["xid_errors_total"] = self._count_xid(key, fields[_XID])
            counters["last_xid"] = int(fields[_XID])
        if device["clock_events"]:
            active = [name for name, n in device["clock_events"].items() if n > 0 and name in _CLOCK_EVENT_NAMES]
            counters["throttle_reasons"] = [_CLOCK_EVENT_NAMES[name] for name in active]
        job_id = sanitize_id(labels.get("hpc_job"))
        if job_id is None and self._resolver is not None:
            job_id = self._resolver.mapped_job(str(index) if gi is None else f"{index}.{gi}")
        if job_id is None:
            job_id = sanitize_id(labels.get("pod"))
        name = labels.get("modelName") or labels.get("model_name") or "unknown"
        return GpuSample.build(uuid, index, name, counters, mig_profile=labels.get("GPU_I_PROFILE"), job_id=job_id)

    def _count_xid(self, key: DeviceKey, value: float) -> int:
        """Count changes of the last-XID gauge to a non-zero value; the first observation is the baseline."""
        previous = self._xid_last.get(key)
        self._xid_last[key] = value
        count = self._xid_counts.get(key, 0)
        if previous is not None and value != previous and value != 0:
            count += 1
        self._xid_counts[key] = count
        return count
