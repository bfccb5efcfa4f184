"""Operator peak overrides: a YAML (or JSON, by `.json` suffix) file that adds devices or replaces entries.

    devices:
      - key: rtx-6000-ada                        # a new device: patterns, peaks and source are required
        patterns: ['\\bRTX 6000 Ada\\b']         # Python regexes, searched case-insensitively
        names: ['NVIDIA RTX 6000 Ada Generation']  # optional; checked to resolve to this entry
        peaks: {bf16: 364.2e12, fp16: 364.2e12, fp32: 91.1e12}   # dense FLOP/s per device
        source: https://example.com/rtx-6000-ada-datasheet.pdf
      - key: h100-sxm                            # an existing key: given fields replace, others are inherited
        peaks: {bf16: 900e12}                     # merged per dtype; `null` removes a dtype
        source: measured at our 600 W power cap, 2025-01

Other optional fields: notes, memory_bandwidth_bytes_per_second (with memory_bandwidth_source; the entry's
`source` when left out), nvlink_bandwidth_bytes_per_second (one direction between two GPUs of a node through an
NVSwitch; with nvlink_bandwidth_source, likewise), mig_slices, unconfirmed (list of dtypes), lacks (dtype: why
the part has no peak for it; an operator's peak for an inherited lacked dtype replaces the lack).
A plain substring without regex metacharacters is a valid pattern. `989e12` reads as text in YAML 1.1, so
numeric strings are accepted. Every error names the file, the entry and the field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ._peaks import DEFAULT_DEVICES
from ._spec import DTYPES, DeviceSpec, PeakTableError

_FIELDS = frozenset(
    {
        "key",
        "patterns",
        "names",
        "peaks",
        "source",
        "notes",
        "memory_bandwidth_bytes_per_second",
        "memory_bandwidth_source",
        "nvlink_bandwidth_bytes_per_second",
        "nvlink_bandwidth_source",
        "mig_slices",
        "unconfirmed",
        "lacks",
    }
)
_REQUIRED_FOR_NEW = ("patterns", "peaks")


def load_peak_overrides(
    path: str | os.PathLike[str], base: Sequence[DeviceSpec] = DEFAULT_DEVICES
) -> tuple[DeviceSpec, ...]:
    """Read and validate an override file; entries for keys in `base` inherit the fields they omit."""
    origin = f"peak override file {os.fspath(path)}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PeakTableError(f"cannot read {origin}: {exc}") from exc
    is_json = Path(path).suffix.lower() == ".json"
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise PeakTableError(f"{origin} is not valid {'JSON' if is_json else 'YAML'}: {exc}") from exc
    return parse_peak_overrides(data, base, origin)


def parse_peak_overrides(
    data: object, base: Sequence[DeviceSpec] = DEFAULT_DEVICES, origin: str = "peak overrides"
) -> tuple[DeviceSpec, ...]:
    """Validate already-parsed override data (`{"devices": [...]}`) into complete `DeviceSpec`s."""
    if not isinstance(data, Mapping) or set(data) != {"devices"}:
        raise PeakTableError(f"{origin}: the top level must be a mapping with exactly one key, 'devices'")
    entries = data["devices"]
    if not isinstance(entries, list):
        raise PeakTableError(f"{origin}: 'devices' must be a list of entries")
    base_by_key = {spec.key: spec for spec in base}
    specs: list[DeviceSpec] = []
    for index, entry in enumerate(entries):
        where = f"{origin}: devices[{index}]"
        if isinstance(entry, Mapping) and isinstance(entry.get("key"), str):
            where += f" (key {entry['key']!r})"
        spec = _parse_entry(entry, base_by_key, where)
        if any(seen.key == spec.key for seen in specs):
            raise PeakTableError(f"{where}: key appears more than once in the file")
        specs.append(spec)
    return tuple(specs)


def _parse_entry(entry: object, base_by_key: Mapping[str, DeviceSpec], where: str) -> DeviceSpec:
    if not isinstance(entry, Mapping):
        raise PeakTableError(f"{where}: an entry must be a mapping, got {type(entry).__name__}")
    unknown = sorted(str(name) for name in set(entry) - _FIELDS)
    if unknown:
        raise PeakTableError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_FIELDS))}")
    key = entry.get("key")
    if not isinstance(key, str):
        raise PeakTableError(f"{where}: key: required, a string such as 'h100-sxm'")
    if not isinstance(entry.get("source"), str) or not entry["source"].strip():
        raise PeakTableError(f"{where}: source: required, say where the figures come from (URL or citation)")
    base = base_by_key.get(key)
    if base is None:
        missing = [name for name in _REQUIRED_FOR_NEW if name not in entry]
        if missing:
            raise PeakTableError(f"{where}: {', '.join(missing)}: required for a device not in the table")
    try:
        fields = _fields_from_entry(entry, base, where)
        return DeviceSpec(**fields)
    except ValueError as exc:
        if isinstance(exc, PeakTableError):
            raise
        raise PeakTableError(f"{where}: {exc}") from exc


def _fields_from_entry(entry: Mapping[str, Any], base: DeviceSpec | None, where: str) -> dict[str, Any]:
    given_peaks = _read_peaks(entry["peaks"], where) if "peaks" in entry else {}
    inherited_peaks = dict(base.peaks) if base is not None else {}
    fields: dict[str, Any] = {
        "key": entry["key"],
        "source": entry["source"],
        "peaks": {**inherited_peaks, **given_peaks},
        "patterns": _read_strings(entry, "patterns", where, base.patterns if base else ()),
        "names": _read_strings(entry, "names", where, base.names if base else ()),
        "notes": entry.get("notes", base.notes if base else ""),
        "memory_bandwidth_bytes_per_second": _read_number(
            entry.get("memory_bandwidth_bytes_per_second", base.memory_bandwidth_bytes_per_second if base else None),
            "memory_bandwidth_bytes_per_second",
            where,
        ),
        "memory_bandwidth_source": _bandwidth_source(entry, base),
        "nvlink_bandwidth_bytes_per_second": _read_number(
            entry.get("nvlink_bandwidth_bytes_per_second", base.nvlink_bandwidth_bytes_per_second if base else None),
            "nvlink_bandwidth_bytes_per_second",
            where,
        ),
        "nvlink_bandwidth_source": _bandwidth_source(entry, base, "nvlink_bandwidth"),
        "mig_slices": entry.get("mig_slices", base.mig_slices if base else None),
    }
    if "unconfirmed" in entry:
        fields["unconfirmed"] = frozenset(_read_strings(entry, "unconfirmed", where, ()))
    elif base is not None:
        # The operator's own figures replace the unconfirmed ones they override.
        fields["unconfirmed"] = base.unconfirmed - set(given_peaks)
    inherited_lacks = dict(base.lacks) if base is not None else {}
    given_lacks = _read_lacks(entry["lacks"], where) if "lacks" in entry else {}
    fields["lacks"] = {
        dtype: reason
        for dtype, reason in {**inherited_lacks, **given_lacks}.items()
        if dtype in given_lacks or fields["peaks"].get(dtype) is None
    }
    if not isinstance(fields["notes"], str):
        raise PeakTableError(f"{where}: notes: must be a string")
    return fields


def _bandwidth_source(entry: Mapping[str, Any], base: DeviceSpec | None, name: str = "memory_bandwidth") -> str:
    """A bandwidth's source (``memory_bandwidth`` or ``nvlink_bandwidth``): given, else the entry's own source when
    it sets that bandwidth, else inherited."""
    if f"{name}_source" in entry:
        return str(entry[f"{name}_source"])
    if f"{name}_bytes_per_second" in entry:
        return str(entry["source"])
    return str(getattr(base, f"{name}_source")) if base else ""


def _read_peaks(value: object, where: str) -> dict[str, float | None]:
    if not isinstance(value, Mapping):
        raise PeakTableError(f"{where}: peaks: must be a mapping of dtype to FLOP/s, e.g. {{bf16: 989e12}}")
    for dtype in value:
        if dtype not in DTYPES:
            raise PeakTableError(f"{where}: peaks.{dtype}: unknown dtype; use one of {', '.join(DTYPES)}")
    return {str(dtype): _read_number(flops, f"peaks.{dtype}", where) for dtype, flops in value.items()}


def _read_lacks(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(reason, str) for reason in value.values()):
        raise PeakTableError(
            f"{where}: lacks: must be a mapping of dtype to a reason, e.g. {{int8: 'cut on this part'}}"
        )
    for dtype in value:
        if dtype not in DTYPES:
            raise PeakTableError(f"{where}: lacks.{dtype}: unknown dtype; use one of {', '.join(DTYPES)}")
    return {str(dtype): reason for dtype, reason in value.items()}


def _read_number(value: object, name: str, where: str) -> float | None:
    """A number, a numeric string (YAML 1.1 reads `989e12` as text) or None; DeviceSpec checks the sign."""
    if value is None or isinstance(value, bool):
        return None if value is None else _raise_number(value, name, where)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.replace("_", ""))
        except ValueError:
            pass
    return _raise_number(value, name, where)


def _raise_number(value: object, name: str, where: str) -> float:
    raise PeakTableError(f"{where}: {name}: expected a number such as 989e12, got {value!r}")


def _read_strings(entry: Mapping[str, Any], name: str, where: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if name not in entry:
        return default
    value = entry[name]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PeakTableError(f"{where}: {name}: must be a list of strings")
    return tuple(value)
