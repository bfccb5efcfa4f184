"""`PeakTable`: the default devices plus an operator's overrides, and the lookup of one device's peak."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from ._devices import compile_patterns, match_device, mig_fraction, normalise_name, split_mig_suffix
from ._overrides import load_peak_overrides
from ._peaks import DEFAULT_DEVICES
from ._spec import DTYPES, DeviceSpec, Dtype, PeakTableError, check_dtype


@dataclass(frozen=True)
class PeakLookup:
    """The dense peak of one device (or MIG slice) for one dtype, or why there is none.

    `peak_flops_per_gpu` is None exactly when `reason` is set. `mig_fraction` is 1.0 for a whole GPU and None
    when no peak was found. `unconfirmed` says the figure (or the MIG slice count) lacks a primary source.
    """

    device_key: str | None
    dtype: Dtype
    peak_flops_per_gpu: float | None
    mig_fraction: float | None
    reason: str | None
    mig_profile: str | None = None
    unconfirmed: bool = False


@dataclass(frozen=True)
class BandwidthLookup:
    """Peak memory bandwidth of one device (bytes/s), or why there is none; `source` cites the figure."""

    device_key: str | None
    bytes_per_second: float | None
    reason: str | None
    source: str | None = None
    unconfirmed: bool = False


class PeakTable:
    """An ordered set of `DeviceSpec`s: the built-in table by default, with operator overrides on top.

    On construction every entry's `names` must resolve to that entry, so no pattern shadows another device.
    """

    def __init__(self, specs: Iterable[DeviceSpec] = DEFAULT_DEVICES) -> None:
        self._specs = tuple(specs)
        self._patterns = tuple(compile_patterns(spec) for spec in self._specs)
        self._by_key: dict[str, DeviceSpec] = {}
        for spec in self._specs:
            if spec.key in self._by_key:
                raise PeakTableError(f"duplicate device key {spec.key!r} in the peak table")
            self._by_key[spec.key] = spec
        self._check_names_resolve()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], base: PeakTable | None = None) -> PeakTable:
        """`base` (default: the built-in table) with the overrides in a YAML/JSON file; see `_overrides`."""
        base_table = base if base is not None else cls()
        overrides = load_peak_overrides(path, base_table.specs)
        try:
            return base_table.with_overrides(overrides)
        except PeakTableError as exc:
            raise PeakTableError(f"peak override file {os.fspath(path)}: {exc}") from exc

    def with_overrides(self, overrides: Iterable[DeviceSpec]) -> PeakTable:
        """A new table: an override with an existing key replaces it in place; new keys go first, in order.

        New entries go first so that a narrow operator pattern (a variant the defaults do not know) wins over
        a generic default one; replacing in place keeps the careful order of the defaults.
        """
        replacements = {spec.key: spec for spec in overrides}
        added = [spec for key, spec in replacements.items() if key not in self._by_key]
        kept = [replacements.get(spec.key, spec) for spec in self._specs]
        return PeakTable([*added, *kept])

    @property
    def specs(self) -> tuple[DeviceSpec, ...]:
        """Every entry, in match order."""
        return self._specs

    def get(self, key: str) -> DeviceSpec | None:
        """The entry with canonical `key` (case-insensitive), or None."""
        return self._by_key.get(key.strip().lower())

    def resolve(self, device_name: str) -> DeviceSpec | None:
        """The entry for an NVML device name or canonical key (a MIG suffix is ignored), or None."""
        parent_name, _ = split_mig_suffix(device_name)
        index = match_device(self._specs, self._patterns, parent_name)
        return None if index is None else self._specs[index]

    def lookup(self, device_name: str | None, dtype: Dtype = "bf16", mig_profile: str | None = None) -> PeakLookup:
        """Dense peak FLOP/s of one device for `dtype`, scaled to a MIG slice when there is one.

        The MIG profile comes from `mig_profile` when given, else from a `... MIG 1g.10gb` device name.
        Raises ValueError only for a dtype outside DTYPES; every other failure is a `reason`.
        """
        check_dtype(dtype)
        if device_name is None or not device_name.strip():
            return PeakLookup(None, dtype, None, None, "no device model given: send gpu_model or peak_flops_per_gpu")
        parent_name, name_profile = split_mig_suffix(device_name)
        profile = normalise_name(mig_profile) if mig_profile and mig_profile.strip() else name_profile
        spec = self.resolve(parent_name)
        if spec is None:
            reason = (
                f"unknown device {normalise_name(device_name)!r}: not in the peak table; "
                "send peak_flops_per_gpu or add the device to the peak override file"
            )
            return PeakLookup(None, dtype, None, None, reason, profile)
        whole_gpu_peak_flops = spec.peak(dtype)
        if whole_gpu_peak_flops is None:
            return PeakLookup(spec.key, dtype, None, None, _no_dtype_reason(spec, dtype), profile)
        fraction, mig_reason = (1.0, None) if profile is None else mig_fraction(spec, profile)
        if fraction is None:
            return PeakLookup(spec.key, dtype, None, None, mig_reason, profile)
        slice_peak_flops = whole_gpu_peak_flops * fraction
        unconfirmed = dtype in spec.unconfirmed or (profile is not None and "mig_slices" in spec.unconfirmed)
        return PeakLookup(spec.key, dtype, slice_peak_flops, fraction, None, profile, unconfirmed)

    def bandwidth(self, device_name: str | None, mig_profile: str | None = None) -> BandwidthLookup:
        """Peak device-memory bandwidth of one whole device (the MBU denominator), or a reason.

        A MIG slice gets no figure: its share of the bandwidth follows its memory slices, which the table
        does not hold, so the job must send `peak_memory_bandwidth_per_gpu`.
        """
        if device_name is None or not device_name.strip():
            return BandwidthLookup(None, None, "no device model given: send gpu_model or peak_memory_bandwidth_per_gpu")
        parent_name, name_profile = split_mig_suffix(device_name)
        spec = self.resolve(parent_name)
        if spec is None:
            reason = f"unknown device {normalise_name(device_name)!r}: send peak_memory_bandwidth_per_gpu"
            return BandwidthLookup(None, None, reason)
        if (mig_profile and mig_profile.strip()) or name_profile:
            reason = (
                f"memory bandwidth of a MIG slice of {spec.key} is not modelled: send peak_memory_bandwidth_per_gpu"
            )
            return BandwidthLookup(spec.key, None, reason)
        if spec.memory_bandwidth_bytes_per_second is None:
            reason = f"no memory bandwidth for {spec.key} in the peak table: send peak_memory_bandwidth_per_gpu"
            return BandwidthLookup(spec.key, None, reason)
        unconfirmed = "memory_bandwidth" in spec.unconfirmed
        return BandwidthLookup(
            spec.key, spec.memory_bandwidth_bytes_per_second, None, spec.memory_bandwidth_source, unconfirmed
        )

    def _check_names_resolve(self) -> None:
        for spec in self._specs:
            for name in spec.names:
                index = match_device(self._specs, self._patterns, name)
                resolved = None if index is None else self._specs[index].key
                if resolved != spec.key:
                    raise PeakTableError(
                        f"device name {name!r} listed for {spec.key!r} resolves to {resolved!r}: a pattern "
                        "of an earlier entry shadows it, or its own patterns miss it"
                    )


def _no_dtype_reason(spec: DeviceSpec, dtype: Dtype) -> str:
    """Why `spec` has no `dtype` peak: the part's own reason where the table gives one, else the generic one.

    A part that lacks a dtype (Blackwell Ultra's cut INT8, CDNA 4's unpublished TF32) is never given a ratio of
    another dtype's peak, as a Hopper-shaped guess would be wrong there.
    """
    available = [name for name in DTYPES if spec.peak(name) is not None]
    known = f"known: {', '.join(available) or 'none'}"
    own_reason = spec.lacks.get(dtype)
    if own_reason is not None:
        return f"no dense {dtype} peak for {spec.key}: {own_reason} ({known}); send peak_flops_per_gpu if you have one"
    return (
        f"no dense {dtype} peak for {spec.key} in the peak table ({known}); "
        "report the dtype the matmuls run in, or send peak_flops_per_gpu"
    )
