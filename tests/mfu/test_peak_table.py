"""Invariants of the built-in peak table: sources, dtype ordering, units, and no shadowing."""

from __future__ import annotations

import re

import pytest

from mfumon.mfu import DEFAULT_DEVICES, DTYPES, DeviceSpec, PeakTable, PeakTableError

TABLE = PeakTable()
IDS = [spec.key for spec in DEFAULT_DEVICES]


@pytest.mark.parametrize("spec", DEFAULT_DEVICES, ids=IDS)
def test_every_entry_cites_a_source_and_a_real_name(spec: DeviceSpec) -> None:
    assert spec.source.strip()
    assert spec.names, "each entry lists at least one real device name"
    assert any(spec.peak(dtype) is not None for dtype in DTYPES)


@pytest.mark.parametrize("spec", DEFAULT_DEVICES, ids=IDS)
def test_lower_precision_is_never_slower(spec: DeviceSpec) -> None:
    # fp4 ≥ fp8/int8 ≥ bf16/fp16 ≥ tf32 ≥ fp32 wherever both figures exist (a swapped or sparse figure breaks
    # this). A part that breaks the ladder (Blackwell Ultra's cut INT8) lacks the dtype instead.
    tiers = [("fp4",), ("fp8", "int8"), ("bf16", "fp16"), ("tf32",), ("fp32",)]
    present = [[spec.peaks[dtype] for dtype in tier if spec.peaks[dtype] is not None] for tier in tiers]
    for higher_index, higher in enumerate(present):
        for lower in present[higher_index + 1 :]:
            for fast in higher:
                for slow in lower:
                    assert fast >= slow, f"{spec.key}: {fast:g} < {slow:g}"  # type: ignore[operator]


@pytest.mark.parametrize("spec", DEFAULT_DEVICES, ids=IDS)
def test_figures_are_in_flop_per_second_not_tflops(spec: DeviceSpec) -> None:
    for dtype in DTYPES:
        peak = spec.peak(dtype)
        if peak is not None:
            assert 1e12 <= peak <= 1e17, f"{spec.key} {dtype} = {peak:g}"  # fp4 of 2026 parts: 10-15 PF
    if spec.memory_bandwidth_bytes_per_second is not None:
        assert 1e11 <= spec.memory_bandwidth_bytes_per_second <= 5e13


@pytest.mark.parametrize("spec", DEFAULT_DEVICES, ids=IDS)
def test_names_resolve_to_their_own_entry(spec: DeviceSpec) -> None:
    for name in spec.names:
        resolved = TABLE.resolve(name)
        assert resolved is not None
        assert resolved.key == spec.key, f"{name!r} is shadowed by {resolved.key}"


@pytest.mark.parametrize("spec", DEFAULT_DEVICES, ids=IDS)
def test_every_pattern_matches_one_of_its_names(spec: DeviceSpec) -> None:
    for pattern in spec.patterns:
        assert any(re.search(pattern, name, re.IGNORECASE) for name in spec.names), pattern


def test_keys_are_unique_and_canonical() -> None:
    assert len(set(IDS)) == len(IDS)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9.-]*", key) for key in IDS)


def test_specific_entries_come_before_generic_ones() -> None:
    order = {key: index for index, key in enumerate(IDS)}
    assert order["h100-nvl"] < order["h100-sxm"]
    assert order["h100-pcie"] < order["h100-sxm"]
    assert order["h200-sxm"] < order["h20"]
    assert order["gb200"] < order["b200"]
    assert order["gb300"] < order["b300"] < order["b200"]
    assert order["gb300"] < order["gb200"]
    assert order["l40s"] < order["l40"] < order["l4"]


def test_h100_nvl_is_per_gpu_not_lightnings_pair_figure() -> None:
    spec = TABLE.get("h100-nvl")
    assert spec is not None
    assert spec.peak("bf16") == 835e12


def test_shadowing_is_refused_when_a_table_is_built() -> None:
    greedy = DeviceSpec(key="greedy", patterns=(r"A10",), peaks={"bf16": 1e12}, source="test", names=("Acme A10 card",))
    with pytest.raises(PeakTableError, match="'NVIDIA A10G' listed for 'a10g' resolves to 'greedy'"):
        PeakTable([greedy, *DEFAULT_DEVICES])


def test_duplicate_keys_are_refused() -> None:
    l4 = TABLE.get("l4")
    assert l4 is not None
    with pytest.raises(PeakTableError, match="duplicate device key 'l4'"):
        PeakTable([*DEFAULT_DEVICES, l4])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"key": "H100"}, "key 'H100' must match"),
        ({"peaks": {"bf16": -1.0}}, "peaks.bf16"),
        ({"peaks": {"int4": 1e12}}, "dtype"),
        ({"lacks": {"int4": "no such dtype"}}, "dtype"),
        ({"lacks": {"fp8": " "}}, "lacks.fp8 must say why"),
        ({"lacks": {"bf16": "cut"}}, "lacks.bf16: the dtype has a peak"),
        ({"patterns": ("(unclosed",)}, "not a valid regular expression"),
        ({"source": " "}, "source"),
        ({"mig_slices": 0}, "mig_slices"),
        ({"unconfirmed": frozenset({"bf17"})}, "unconfirmed"),
    ],
)
def test_device_spec_validates_itself(fields: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"key": "x", "patterns": ("X",), "peaks": {"bf16": 1e12}, "source": "test"}
    with pytest.raises(ValueError, match=message):
        DeviceSpec(**{**base, **fields})  # type: ignore[arg-type]
