"""The hardware of 2026 (issue 53): dense per-device peaks incl. fp4, the parts' own "lacks" reasons, and names."""

from __future__ import annotations

from pathlib import Path

import pytest

from mfumon.mfu import DTYPES, ModelShape, PeakTable, evaluate

TABLE = PeakTable()
SHAPE = ModelShape(params=8e9)


@pytest.mark.parametrize(
    ("key", "dtype", "dense"),
    [
        # HGX B200 per GPU: FP4 144 | 72 PF (sparse | dense) and INT8 72 POPS sparse for 8 GPUs.
        ("b200", "fp4", 9000e12),
        ("b200", "fp8", 4500e12),
        ("b200", "int8", 4500e12),
        ("b200", "bf16", 2250e12),
        ("b200", "tf32", 1125e12),
        # HGX B300 per GPU: same FP8/BF16/TF32 as B200, more FP4.
        ("b300", "fp8", 4500e12),
        ("b300", "bf16", 2250e12),
        ("b300", "tf32", 1125e12),
        ("b300", "fp4", 14000e12),
        # Per GPU of an NVL72 rack: the rack totals / 72, sparse ones halved.
        ("gb200", "fp4", 10000e12),
        ("gb200", "int8", 5000e12),
        ("gb300", "fp4", 15000e12),
        ("gb300", "fp8", 5000e12),
        ("gb300", "bf16", 2500e12),
        ("mi355x", "fp4", 10100e12),
        ("mi355x", "int8", 5000e12),
        ("gaudi3", "bf16", 1835e12),
        ("gaudi3", "fp8", 1835e12),
        # Per TensorCore device: Google's per-chip 2307 / 4614 halved.
        ("tpu7x", "bf16", 1153.5e12),
        ("tpu7x", "fp8", 2307e12),
        ("tpu-v6e", "bf16", 918e12),
        ("tpu-v6e", "fp8", 918e12),
        # Per chip (AWS Neuron architecture pages).
        ("trainium2", "bf16", 667e12),
        ("trainium2", "fp8", 1299e12),
        ("trainium3", "bf16", 671e12),
        ("trainium3", "fp8", 2517e12),
        ("trainium3", "fp4", 2517e12),
    ],
)
def test_2026_parts_have_their_dense_peak(key: str, dtype: str, dense: float) -> None:
    spec = TABLE.get(key)
    assert spec is not None
    assert spec.peak(dtype) == dense  # type: ignore[arg-type]


def test_blackwell_ultra_is_not_given_hopper_ratios() -> None:
    # B300 trades INT8 away: no int8 = fp8 guess, and FP4 is not 2x FP8 as on B200.
    b300, b200 = TABLE.get("b300"), TABLE.get("b200")
    assert b300 is not None and b200 is not None
    assert b300.peak("int8") is None and "int8" in b300.lacks
    assert b300.peak("fp4") != 2 * b300.peak("fp8")  # type: ignore[operator]
    assert TABLE.lookup("NVIDIA B300 SXM6 AC", "fp4").unconfirmed  # 13.1-15 PF depending on the NVIDIA page
    assert not TABLE.lookup("NVIDIA B200", "fp4").unconfirmed


@pytest.mark.parametrize(
    ("name", "dtype", "words"),
    [
        ("NVIDIA B300 SXM6 AC", "int8", "Blackwell Ultra cut INT8"),
        ("NVIDIA GB300", "int8", "Blackwell Ultra cut INT8"),
        ("AMD Instinct MI355X", "tf32", "AMD publishes no TF32 rate for CDNA 4"),
        ("GAUDI3", "fp16", "Intel publishes no FP16 matrix (MME) rate"),
        ("TPU7x", "fp32", "Google publishes only BF16 and FP8"),
    ],
)
def test_an_mfu_request_for_a_lacked_dtype_gives_the_parts_reason(name: str, dtype: str, words: str) -> None:
    result = evaluate(
        kind="training",
        shape=SHAPE,
        tokens_per_second=1e4,
        num_gpus=8,
        device_name=name,
        dtype=dtype,  # type: ignore[arg-type]
    )
    assert result.mfu is None and result.peak_flops_per_gpu is None
    assert result.device_key is not None
    assert result.reason is not None
    assert result.reason.startswith(f"no dense {dtype} peak for {result.device_key}: ")
    assert words in result.reason
    assert "known: " in result.reason


def test_a_dtype_missing_without_a_reason_keeps_the_generic_one() -> None:
    lookup = TABLE.lookup("NVIDIA H100 80GB HBM3", "fp4")
    assert lookup.reason is not None
    assert "no dense fp4 peak for h100-sxm in the peak table" in lookup.reason


def test_fp4_gives_an_mfu_where_the_vendor_publishes_it() -> None:
    result = evaluate(
        kind="inference", shape=SHAPE, tokens_per_second=1e5, num_gpus=8, device_name="NVIDIA B200", dtype="fp4"
    )
    assert result.peak_flops_per_gpu == 9000e12
    assert result.mfu == pytest.approx(1e5 * 2 * 8e9 / (8 * 9000e12))


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA B300", "b300"),
        ("NVIDIA GB300", "gb300"),
        ("NVIDIA GB300 NVL", "gb300"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA H20", "h20"),
        ("NVIDIA H200", "h200-sxm"),
        ("AMD Instinct MI355X", "mi355x"),
        ("GAUDI3", "gaudi3"),
        ("Intel(R) Gaudi(R) 3 AI Accelerator", "gaudi3"),
        ("HL-325L", "gaudi3"),
        ("TPU7x", "tpu7x"),
        ("TPU v7x", "tpu7x"),
        ("TPU v6 lite", "tpu-v6e"),
        ("Trainium2", "trainium2"),
        ("trn2", "trainium2"),
        ("trn2.48xlarge", "trainium2"),
        ("trn2u.48xlarge", "trainium2"),
        ("Trainium3", "trainium3"),
        ("trn3", "trainium3"),
    ],
)
def test_names_as_drivers_and_frameworks_print_them_resolve(name: str, key: str) -> None:
    spec = TABLE.resolve(name)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize(
    ("name", "not_key"),
    [
        ("NVIDIA B300 SXM6 AC", "b200"),
        ("NVIDIA GB300", "b300"),
        ("NVIDIA GB300", "gb200"),
        ("NVIDIA GB200", "b200"),
        ("NVIDIA H20", "h200-sxm"),
        ("NVIDIA H200", "h20"),
        ("trn3", "trainium2"),
    ],
)
def test_neighbouring_parts_do_not_shadow_each_other(name: str, not_key: str) -> None:
    spec = TABLE.resolve(name)
    assert spec is not None and spec.key != not_key


@pytest.mark.parametrize(
    "name", ["NVIDIA H20-3e", "NVIDIA H200 NVL", "trn1", "Trainium", "GAUDI2", "HL-225", "TPU v5 lite pod"]
)
def test_unsourced_neighbours_stay_unmatched(name: str) -> None:
    spec = TABLE.resolve(name)
    assert spec is None or spec.key not in {"h20", "h200-sxm", "trainium2", "trainium3", "gaudi3", "tpu7x"}


def test_every_lacked_dtype_is_a_known_dtype_without_a_peak() -> None:
    for spec in TABLE.specs:
        for dtype, reason in spec.lacks.items():
            assert dtype in DTYPES and spec.peak(dtype) is None and reason.strip()  # type: ignore[arg-type]


def test_an_override_peak_replaces_an_inherited_lack(tmp_path: Path) -> None:
    path = tmp_path / "peaks.yaml"
    path.write_text(
        "devices:\n"
        "  - {key: b300, peaks: {int8: 150e12}, source: measured int8 GEMM on our B300s}\n"
        "  - {key: mi355x, lacks: {fp16: our firmware disables it}, peaks: {fp16: null}, source: ops}\n",
        encoding="utf-8",
    )
    table = PeakTable.from_file(path)
    b300 = table.get("b300")
    assert b300 is not None and b300.peak("int8") == 150e12 and "int8" not in b300.lacks
    assert table.lookup("NVIDIA B300 SXM6 AC", "int8").peak_flops_per_gpu == 150e12
    reason = table.lookup("AMD Instinct MI355X", "fp16").reason
    assert reason is not None and "our firmware disables it" in reason
    assert "tf32" in table.get("mi355x").lacks  # type: ignore[union-attr]  # inherited
