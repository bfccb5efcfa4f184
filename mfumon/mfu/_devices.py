"""Matching NVML device names to peak-table entries, and MIG slices to their share of the GPU.

Matching order: an exact canonical key (`h100-sxm`, case-insensitive) wins; otherwise the first entry, in
table order, with a pattern found (`re.search`, case-insensitive) in the name. A MIG device name such as
`NVIDIA A100-SXM4-40GB MIG 3g.20gb` is split into its parent name and the profile first.

A MIG profile `[<c>c.]<g>g.<mem>gb[+me|+me.all|-me|+gfx...]` gets <c or g> / <slices> of the whole GPU's
peak, by the "Fraction of SMs" in NVIDIA's MIG user guide: 1g.10gb on an A100 is 1/7, 2g.12gb on an A30 is
2/4. The 7g instance is taken as the whole GPU, although whether it has every SM of the die is UNCONFIRMED.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ._spec import DeviceSpec

_MIG_SUFFIX = re.compile(r"^(?P<parent>.*?)\s+MIG\s+(?P<profile>\S+)$", re.IGNORECASE)
_MIG_PROFILE = re.compile(
    r"^(?:(?P<compute>\d+)c\.)?(?P<slices>\d+)g\.(?P<memory>\d+(?:\.\d+)?)gb"
    r"(?P<extensions>(?:[+-][a-z]+(?:\.[a-z]+)?)*)$",
    re.IGNORECASE,
)
# GPU-instance sizes NVIDIA offers, by the number of compute slices of the whole GPU.
_MIG_INSTANCE_SIZES: dict[int, tuple[int, ...]] = {7: (1, 2, 3, 4, 7), 4: (1, 2, 4)}


@dataclass(frozen=True)
class MigProfile:
    """A parsed MIG profile: `1c.3g.20gb+me` → compute_slices=1, gpu_slices=3, memory_gb=20."""

    text: str
    gpu_slices: int
    compute_slices: int
    memory_gb: float


def normalise_name(name: str) -> str:
    """Collapse runs of whitespace and trim, so `"NVIDIA  H100 PCIe "` matches like `"NVIDIA H100 PCIe"`."""
    return " ".join(name.split())


def split_mig_suffix(device_name: str) -> tuple[str, str | None]:
    """Split `"<parent> MIG <profile>"` into the parent name and the profile; no suffix → (name, None)."""
    name = normalise_name(device_name)
    match = _MIG_SUFFIX.match(name)
    if match is None:
        return name, None
    return match["parent"], match["profile"]


def parse_mig_profile(profile: str) -> MigProfile | None:
    """Parse a MIG profile (`3g.20gb`, `MIG 1g.10gb+me`, `1c.2g.12gb`); None when it is not one."""
    text = normalise_name(profile)
    if text[:4].lower() == "mig ":
        text = text[4:]
    match = _MIG_PROFILE.match(text)
    if match is None:
        return None
    gpu_slices = int(match["slices"])
    compute_slices = int(match["compute"]) if match["compute"] else gpu_slices
    return MigProfile(text, gpu_slices, compute_slices, float(match["memory"]))


def mig_fraction(spec: DeviceSpec, profile_text: str) -> tuple[float | None, str | None]:
    """The share of `spec`'s peak a MIG instance gets, or (None, reason) when it cannot be told."""
    if spec.mig_slices is None:
        return None, f"device {spec.key} has no MIG slice count in the peak table (profile {profile_text!r})"
    profile = parse_mig_profile(profile_text)
    if profile is None:
        return None, f"unrecognised MIG profile {profile_text!r}; expected e.g. '1g.10gb' or '3g.40gb+me'"
    valid_sizes = _MIG_INSTANCE_SIZES.get(spec.mig_slices, tuple(range(1, spec.mig_slices + 1)))
    if profile.gpu_slices not in valid_sizes or not 1 <= profile.compute_slices <= profile.gpu_slices:
        sizes = ", ".join(f"{size}g" for size in valid_sizes)
        return None, (
            f"unknown MIG profile {profile_text!r} for {spec.key}: a {spec.mig_slices}-slice GPU offers {sizes}"
        )
    return profile.compute_slices / spec.mig_slices, None


def match_device(specs: Sequence[DeviceSpec], patterns: Sequence[tuple[re.Pattern[str], ...]], name: str) -> int | None:
    """Index of the entry `name` (MIG suffix already removed) resolves to, or None.

    `patterns[i]` holds the compiled `specs[i].patterns`; an exact key match wins over any pattern.
    """
    normalised = normalise_name(name)
    lowered = normalised.lower()
    for index, spec in enumerate(specs):
        if spec.key == lowered:
            return index
    for index, compiled in enumerate(patterns):
        if any(pattern.search(normalised) for pattern in compiled):
            return index
    return None


def compile_patterns(spec: DeviceSpec) -> tuple[re.Pattern[str], ...]:
    """`spec`'s patterns compiled case-insensitively."""
    return tuple(re.compile(pattern, re.IGNORECASE) for pattern in spec.patterns)
