"""`DeviceSpec`: one row of the peak table, validated on construction.

Kept apart from the data in `_peaks.py` so the table file is nothing but figures and their sources, and so
operator overrides (`_overrides.py`) build the same validated object.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, get_args

Dtype = Literal["bf16", "fp16", "fp8", "tf32", "fp32", "fp4", "int8"]
"""The precision of the matmuls whose dense peak is the MFU denominator (int8: integer TOPS, counted as FLOP/s)."""
DTYPES: tuple[Dtype, ...] = get_args(Dtype)

# Fields other than dtypes whose figure may be marked unconfirmed.
_OTHER_CONFIRMABLE = ("memory_bandwidth", "mig_slices", "nvlink_bandwidth")
KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class PeakTableError(ValueError):
    """A peak table or an operator's override file is invalid; the message names the entry and field."""


@dataclass(frozen=True)
class DeviceSpec:
    """Dense peak FLOP/s of one device (as the framework sees it: per GPU, per GCD, per TPU chip).

    Args:
        key: canonical key, lowercase `<model>[-<form factor>][-<memory>]`, e.g. `h100-sxm`, `a100-pcie-80gb`.
        patterns: regexes, searched case-insensitively in the NVML device name (MIG suffix removed).
        peaks: dense (no 2:4 sparsity) FLOP/s per dtype; a dtype missing or None has no published peak here.
        source: where the figures come from (URLs or citations), so a reader can check them.
        notes: caveats: halved sparse figures, derived values, disputes.
        memory_bandwidth_bytes_per_second: peak device-memory (HBM/GDDR) bandwidth of the whole device, for MBU.
        memory_bandwidth_source: where the bandwidth figure comes from (the vendor datasheet); required with it.
        mig_slices: compute slices of the whole GPU (7 on A100/H100, 4 on A30); None when MIG is unsupported.
        nvlink_bandwidth_bytes_per_second: what one GPU can send to another GPU of its node, one direction, where an
            NVSwitch joins every pair (HGX/DGX boards, NVL72): half the datasheet's bidirectional NVLink figure. The
            figure an NCCL point-to-point link inside a node is judged against (issue 61); None where the parts
            are not switch-connected (PCIe cards, NVLink bridges, a mesh: a pair gets one link) or no figure is
            sourced, and such links are then not judged.
        nvlink_bandwidth_source: where that figure comes from; required with it.
        names: real device names that must resolve to this entry (checked when a table is built).
        unconfirmed: dtypes (or "memory_bandwidth", "mig_slices", "nvlink_bandwidth") whose figure lacks a primary
            source.
        lacks: dtype -> why the part has no dense peak for it (a cut unit, no published rate), reported in place
            of the generic "no peak" reason; a dtype cannot both have a peak and be lacked.
    """

    key: str
    patterns: tuple[str, ...]
    peaks: Mapping[str, float | None]
    source: str
    notes: str = ""
    memory_bandwidth_bytes_per_second: float | None = None
    memory_bandwidth_source: str = ""
    mig_slices: int | None = None
    nvlink_bandwidth_bytes_per_second: float | None = None
    nvlink_bandwidth_source: str = ""
    names: tuple[str, ...] = ()
    unconfirmed: frozenset[str] = field(default_factory=frozenset)
    lacks: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not KEY_PATTERN.match(self.key):
            raise ValueError(f"key {self.key!r} must match {KEY_PATTERN.pattern}")
        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "unconfirmed", frozenset(self.unconfirmed))
        object.__setattr__(self, "peaks", MappingProxyType(_normalise_peaks(self.peaks)))
        object.__setattr__(self, "lacks", MappingProxyType(_check_lacks(self.lacks, self.peaks)))
        for pattern in self.patterns:
            _check_pattern(pattern)
        if not self.source.strip():
            raise ValueError("source must say where the figures come from")
        if self.memory_bandwidth_bytes_per_second is not None:
            _check_positive("memory_bandwidth_bytes_per_second", self.memory_bandwidth_bytes_per_second)
            if not self.memory_bandwidth_source.strip():
                raise ValueError("memory_bandwidth_source must say where the bandwidth figure comes from")
        if self.nvlink_bandwidth_bytes_per_second is not None:
            _check_positive("nvlink_bandwidth_bytes_per_second", self.nvlink_bandwidth_bytes_per_second)
            if not self.nvlink_bandwidth_source.strip():
                raise ValueError("nvlink_bandwidth_source must say where the NVLink figure comes from")
        if self.mig_slices is not None and (type(self.mig_slices) is not int or self.mig_slices < 1):
            raise ValueError(f"mig_slices must be an integer >= 1, got {self.mig_slices!r}")
        unknown = self.unconfirmed - set(DTYPES) - set(_OTHER_CONFIRMABLE)
        if unknown:
            raise ValueError(f"unconfirmed names unknown fields: {', '.join(sorted(unknown))}")

    def peak(self, dtype: Dtype) -> float | None:
        """Dense peak FLOP/s for `dtype` on the whole device, or None when there is none."""
        return self.peaks[dtype]


def check_dtype(dtype: str) -> None:
    """Raise ValueError unless `dtype` is one of DTYPES."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")


def _normalise_peaks(peaks: Mapping[str, float | None]) -> dict[str, float | None]:
    for dtype in peaks:
        check_dtype(dtype)
    normalised: dict[str, float | None] = {}
    for dtype in DTYPES:
        value = peaks.get(dtype)
        if value is not None:
            _check_positive(f"peaks.{dtype}", value)
            value = float(value)
        normalised[dtype] = value
    return normalised


def _check_lacks(lacks: Mapping[str, str], peaks: Mapping[str, float | None]) -> dict[str, str]:
    if not isinstance(lacks, Mapping):
        raise ValueError("lacks must be a mapping of dtype to the reason the part has no peak for it")
    checked: dict[str, str] = {}
    for dtype, reason in lacks.items():
        check_dtype(dtype)
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"lacks.{dtype} must say why the part has no {dtype} peak")
        if peaks.get(dtype) is not None:
            raise ValueError(f"lacks.{dtype}: the dtype has a peak ({peaks[dtype]:g}); a dtype is lacked or has a peak")
        checked[dtype] = reason.strip()
    return checked


def _check_positive(name: str, value: object) -> None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or value <= 0:  # type: ignore[arg-type, operator]
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def _check_pattern(pattern: str) -> None:
    if not isinstance(pattern, str) or not pattern.strip():
        raise ValueError(f"pattern {pattern!r} must be a non-empty string")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
