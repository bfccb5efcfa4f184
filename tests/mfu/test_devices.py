"""Device names → table entries, MIG slices → share of the peak, and the reasons when there is no peak."""

from __future__ import annotations

import pytest

from mfumon.mfu import PeakTable, parse_mig_profile, split_mig_suffix

TABLE = PeakTable()

REAL_NAMES = [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA H20", "h20"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA A10G", "a10g"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA A30", "a30"),
    ("Tesla V100-SXM2-32GB", "v100-sxm2"),
    ("Tesla V100-PCIE-16GB", "v100-pcie"),
    ("Tesla V100S-PCIE-32GB", "v100s-pcie"),
    ("Tesla T4", "t4"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", "gb200"),
    ("AMD Instinct MI300X", "mi300x"),
    ("AMD Instinct MI250X", "mi250x"),
    # amdsmi's asic_info market_name (ROCm 6.3), as the amdsmi exporter sends it
    ("AMD Instinct MI250X/MI250", "mi250x"),
    ("AMD Instinct MI300A", "mi300a"),
    ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI355X", "mi355x"),
    ("NVIDIA B300 SXM6 AC", "b300"),  # NVML name of the HGX B300 GPU
    ("NVIDIA GB300", "gb300"),
    ("TPU7x", "tpu7x"),  # JAX device_kind of Ironwood
    ("GAUDI3", "gaudi3"),  # torch.hpu device name
    ("HL-325L", "gaudi3"),  # hl-smi product name of the Gaudi 3 OAM
    ("trn2", "trainium2"),
    ("Trainium3", "trainium3"),
    ("A100-SXM4-40GB", "a100-sxm-40gb"),  # drivers before R470 had no "NVIDIA " prefix
    ("  nvidia   h100 80gb hbm3 ", "h100-sxm"),  # case and whitespace do not matter
]


@pytest.mark.parametrize(("name", "key"), REAL_NAMES)
def test_real_device_names_resolve(name: str, key: str) -> None:
    spec = TABLE.resolve(name)
    assert spec is not None
    assert spec.key == key


@pytest.mark.parametrize(
    ("key", "dtype", "dense"),
    [
        ("mi250x", "bf16", 191.5e12),  # per GCD
        ("mi300x", "bf16", 1307.4e12),
        ("mi300a", "bf16", 980.6e12),
        ("mi300a", "fp8", 1961.2e12),
        ("mi325x", "fp8", 2610e12),
        ("mi355x", "bf16", 2500e12),
        ("mi355x", "fp8", 5000e12),  # dense: AMD's 10.1 PFLOPS is with sparsity
    ],
)
def test_instinct_parts_have_their_dense_peak(key: str, dtype: str, dense: float) -> None:
    spec = TABLE.get(key)
    assert spec is not None and spec.peak(dtype) == dense


@pytest.mark.parametrize("key", ["h100-sxm", "H100-SXM", "a100-sxm-80gb", "l40s", "mi250x", " tpu-v4 "])
def test_canonical_keys_resolve_case_insensitively(key: str) -> None:
    spec = TABLE.resolve(key)
    assert spec is not None
    assert spec.key == key.strip().lower()


@pytest.mark.parametrize(
    ("name", "key", "fraction"),
    [
        ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "a100-sxm-40gb", 1 / 7),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "a100-sxm-40gb", 3 / 7),
        ("NVIDIA A100-SXM4-80GB MIG 7g.80gb", "a100-sxm-80gb", 1.0),
        ("NVIDIA A100-SXM4-80GB MIG 1g.10gb+me", "a100-sxm-80gb", 1 / 7),
        ("NVIDIA A100-SXM4-80GB MIG 1g.20gb", "a100-sxm-80gb", 1 / 7),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "h100-sxm", 1 / 7),
        ("NVIDIA H100 80GB HBM3 MIG 2g.20gb", "h100-sxm", 2 / 7),
        ("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", "h100-sxm", 1 / 7),
        ("NVIDIA A30 MIG 1g.6gb", "a30", 1 / 4),
        ("NVIDIA A30 MIG 2g.12gb+me", "a30", 2 / 4),
        ("NVIDIA A30 MIG 4g.24gb", "a30", 4 / 4),
    ],
)
def test_mig_device_gets_its_sm_fraction(name: str, key: str, fraction: float) -> None:
    lookup = TABLE.lookup(name, "bf16")
    whole_gpu = TABLE.get(key)
    assert whole_gpu is not None
    whole_gpu_peak = whole_gpu.peak("bf16")
    assert whole_gpu_peak is not None
    assert lookup.device_key == key
    assert lookup.mig_fraction == pytest.approx(fraction)
    assert lookup.peak_flops_per_gpu == pytest.approx(whole_gpu_peak * fraction)
    assert lookup.reason is None


def test_a100_1g_slice_peak_is_a_seventh_of_312_tflops() -> None:
    lookup = TABLE.lookup("NVIDIA A100-SXM4-40GB", "bf16", mig_profile="1g.5gb")
    assert lookup.peak_flops_per_gpu == pytest.approx(312e12 / 7)


def test_explicit_mig_profile_wins_over_the_name() -> None:
    lookup = TABLE.lookup("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16", mig_profile="MIG 3g.40gb")
    assert lookup.mig_profile == "MIG 3g.40gb"
    assert lookup.mig_fraction == pytest.approx(3 / 7)


@pytest.mark.parametrize(
    ("name", "profile", "message"),
    [
        ("NVIDIA A100-SXM4-40GB", "5g.25gb", "7-slice GPU offers 1g, 2g, 3g, 4g, 7g"),
        ("NVIDIA A30", "3g.18gb", "4-slice GPU offers 1g, 2g, 4g"),
        ("NVIDIA A100-SXM4-40GB", "2c.1g.5gb", "unknown MIG profile"),
        ("NVIDIA A100-SXM4-40GB", "half-a-gpu", "unrecognised MIG profile 'half-a-gpu'"),
        ("NVIDIA L40S", "1g.12gb", "no MIG slice count"),
    ],
)
def test_unknown_mig_profile_gives_a_reason(name: str, profile: str, message: str) -> None:
    lookup = TABLE.lookup(name, "bf16", mig_profile=profile)
    assert lookup.peak_flops_per_gpu is None
    assert lookup.mig_fraction is None
    assert lookup.reason is not None
    assert message in lookup.reason


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA GeForce RTX 4090",
        "NVIDIA H200 NVL",
        "NVIDIA H800",
        "Tesla V100-SXM3-32GB",
        "NVIDIA A100",
        "A10X",
    ],
)
def test_unknown_device_has_no_peak_and_never_falls_back_to_a100(name: str) -> None:
    lookup = TABLE.lookup(name, "bf16")
    assert lookup.device_key is None
    assert lookup.peak_flops_per_gpu is None
    assert lookup.reason is not None
    assert repr(name) in lookup.reason


@pytest.mark.parametrize("name", [None, "", "   "])
def test_missing_device_name_has_a_reason(name: str | None) -> None:
    lookup = TABLE.lookup(name, "bf16")
    assert lookup.peak_flops_per_gpu is None
    assert lookup.reason is not None
    assert "no device model" in lookup.reason


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("NVIDIA A100-SXM4-80GB", "fp8"),
        ("Tesla V100-SXM2-32GB", "bf16"),
        ("Tesla T4", "tf32"),
        ("NVIDIA H20", "fp32"),
    ],
)
def test_dtype_without_a_peak_gives_a_reason(name: str, dtype: str) -> None:
    lookup = TABLE.lookup(name, dtype)  # type: ignore[arg-type]
    assert lookup.device_key is not None
    assert lookup.peak_flops_per_gpu is None
    assert lookup.reason is not None
    assert f"no dense {dtype} peak for {lookup.device_key}" in lookup.reason


def test_unknown_dtype_is_an_error() -> None:
    with pytest.raises(ValueError, match="dtype"):
        TABLE.lookup("NVIDIA H100 80GB HBM3", "int4")  # type: ignore[arg-type]


def test_unconfirmed_figures_are_flagged() -> None:
    assert TABLE.lookup("NVIDIA A30", "bf16").unconfirmed
    assert TABLE.lookup("NVIDIA H20", "bf16").unconfirmed
    assert not TABLE.lookup("NVIDIA H100 80GB HBM3", "bf16").unconfirmed


@pytest.mark.parametrize(
    ("name", "parent", "profile"),
    [
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "NVIDIA A100-SXM4-40GB", "3g.20gb"),
        ("NVIDIA H100 80GB HBM3  MIG 1g.10gb+me ", "NVIDIA H100 80GB HBM3", "1g.10gb+me"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", None),
    ],
)
def test_split_mig_suffix(name: str, parent: str, profile: str | None) -> None:
    assert split_mig_suffix(name) == (parent, profile)


def test_parse_mig_profile_reads_compute_and_gpu_slices() -> None:
    profile = parse_mig_profile("MIG 1c.3g.40gb+me.all")
    assert profile is not None
    assert (profile.compute_slices, profile.gpu_slices, profile.memory_gb) == (1, 3, 40.0)
    assert parse_mig_profile("3g") is None
