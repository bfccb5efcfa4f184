"""Both DCGM name sets (pre-4.9 names, DCGM 4.6/4.7 canonical names) read with the right units (fixtures/dcgm)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pytest

from mfumon.exporter.node.sources.dcgm import DcgmSource
from mfumon.exporter.node.sources.dcgm_fields import FIELDS, Naming
from mfumon.exporter.samples import COUNTER_FIELDS, GpuSample

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm"
MIB = 1024 * 1024
PRE_49 = (FIXTURES / "h100-two-gpus-pre-4.9-names.prom").read_text()
CANONICAL = (FIXTURES / "h100-two-gpus-dcgm-4.7-exporter-4.10-names.prom").read_text()
INT64_NOT_SUPPORTED = "9223372036854775794"
FP64_BLANK = "140737488355328"
UUIDS = ("GPU-3f9c2b1e-7a41-4c55-9d0e-5b8a61c2f0a7", "GPU-b81e6d04-2c9f-4a3b-8e57-0f6d29a4c913")


def device_labels(gpu: int, gi: int | None = None) -> str:
    """dcgm-exporter's label set for one GPU (or MIG instance) of the H100 fixtures."""
    labels = (
        f'gpu="{gpu}",UUID="{UUIDS[gpu]}",pci_bus_id="00000000:{0x18 + 0x12 * gpu:02X}:00.0",device="nvidia{gpu}",'
        'modelName="NVIDIA H100 80GB HBM3",'
    )
    if gi is not None:
        labels += f'GPU_I_PROFILE="1g.10gb",GPU_I_ID="{gi}",'
    return labels + 'Hostname="gpu-node-017",DCGM_FI_DRIVER_VERSION="580.95.05"'


def exposition(
    values: dict[str, Iterable[tuple[tuple[int, int | None], str]]],
    *,
    types: dict[str, str] | None = None,
    helps: dict[str, str] | None = None,
) -> str:
    """dcgm-exporter text: per family a HELP and TYPE line, then one sample per ``((gpu, gi), value)``."""
    lines = []
    for name, samples in values.items():
        lines.append(f"# HELP {name} {(helps or {}).get(name, name)}")
        lines.append(f"# TYPE {name} {(types or {}).get(name, 'gauge')}")
        lines.extend(f"{name}{{{device_labels(gpu, gi)}}} {value}" for (gpu, gi), value in samples)
    return "\n".join(lines) + "\n"


def gpu0(values: dict[str, str], **kwargs: dict[str, str]) -> str:
    return exposition({name: [((0, None), value)] for name, value in values.items()}, **kwargs)


def assert_same_samples(left: list[GpuSample], right: list[GpuSample]) -> None:
    assert [(s.uuid, s.index, s.name, s.mig_profile, s.job_id) for s in left] == [
        (s.uuid, s.index, s.name, s.mig_profile, s.job_id) for s in right
    ]
    for a, b in zip(left, right, strict=True):
        for field in (*COUNTER_FIELDS, "throttle_reasons"):
            expected = getattr(b, field)
            if isinstance(expected, float):
                assert getattr(a, field) == pytest.approx(expected, rel=1e-12), field
            else:
                assert getattr(a, field) == expected, field


def test_pre_4_9_names_and_dcgm_4_7_names_give_the_same_samples() -> None:
    old = DcgmSource("http://unused").samples_from_text(PRE_49)
    new = DcgmSource("http://unused").samples_from_text(CANONICAL)
    assert len(old) == 2
    assert_same_samples(new, old)
    # Everything the fixtures carry reached the sample, so the comparison covered it.
    carried = set(old[1].counters())
    assert carried >= {"memory_total_bytes", "energy_joules_total", "hmma_active", "pcie_link_width", "last_xid"}
    assert "tensor_active_exact" not in carried  # no cycle counters: the sampled ratio, unmarked


def test_dcgm_4_7_names_are_converted_to_our_units() -> None:
    busy, degraded = DcgmSource("http://unused").samples_from_text(CANONICAL)
    assert busy.sm_clock_hz == 1980e6 and busy.max_sm_clock_hz == 1980e6  # ..._HERTZ, not x 1e6 again
    assert busy.memory_used_bytes == 79872 * MIB  # ..._FB_USED_BYTES, not x MiB again
    assert busy.memory_total_bytes == (1234 + 79872 + 559) * MIB  # used + free + reserved, in bytes
    assert busy.energy_joules_total == 8812345  # ..._GPU_ENERGY_JOULES_TOTAL, not / 1000
    assert busy.utilization == 1.0 and degraded.utilization == pytest.approx(0.37)
    assert busy.pcie_tx_bytes_per_second == 215334112 and busy.nvlink_rx_bytes_per_second == 90876543210
    assert (busy.hmma_active, busy.imma_active, busy.dmma_active) == (0.548731, 0.0, 0.003585)
    assert degraded.last_xid == 79 and degraded.xid_errors_total == 0  # the first XID seen is the baseline
    assert (degraded.nvlink_replay_errors_total, degraded.remapped_rows_uncorrectable_total) == (18, 1)
    assert degraded.row_remap_pending == 1 and degraded.pcie_replays_total == 7
    assert degraded.throttle_reasons == ("hw_slowdown", "sw_thermal")


def test_fabric_and_pcie_link_fields_are_mapped() -> None:
    busy, degraded = DcgmSource("http://unused").samples_from_text(CANONICAL)
    assert (busy.pcie_link_gen, busy.pcie_link_gen_max, busy.pcie_link_width, busy.pcie_link_width_max) == (
        5,
        5,
        16,
        16,
    )
    assert (degraded.pcie_link_gen, degraded.pcie_link_width) == (4, 8)  # a downtrained link
    assert (busy.fabric_manager_status, busy.fabric_health_summary, busy.fabric_health_mask) == (3, 1, 0)
    assert (degraded.fabric_health_summary, degraded.fabric_health_mask) == (3, 20)  # limited capacity
    body = busy.to_json()
    assert body["fabric_manager_status"] == 3 and body["pcie_link_width_max"] == 16


def test_both_fixtures_in_one_text_are_not_summed() -> None:
    alone = DcgmSource("http://unused").samples_from_text(PRE_49)
    both = DcgmSource("http://unused").samples_from_text(PRE_49 + CANONICAL)
    assert_same_samples(both, alone)


@pytest.mark.parametrize("canonical_first", [True, False])
def test_old_and_canonical_name_for_one_gpu_canonical_wins(canonical_first: bool) -> None:
    old = {
        "DCGM_FI_DEV_FB_USED": "100",
        "DCGM_FI_DEV_FB_FREE": "200",
        "DCGM_FI_DEV_FB_TOTAL": "81559",
        "DCGM_FI_DEV_POWER_USAGE": "100.000000",
        "DCGM_FI_DEV_SM_CLOCK": "1000",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "5000",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "0.100000",
        "DCGM_FI_PROF_PCIE_TX_BYTES": "10",
        "DCGM_FI_DEV_XID_ERRORS": "13",
        "DCGM_FI_DEV_GPU_UTIL": "20",
    }
    new = {
        "DCGM_FI_DEV_FB_USED_BYTES": str(5 * 1024 * MIB),
        "DCGM_FI_DEV_FB_FREE_BYTES": str(70 * 1024 * MIB),
        "DCGM_FI_DEV_FB_CAPACITY_BYTES": "85520809984",
        "DCGM_FI_DEV_BOARD_POWER_WATTS": "300.000000",
        "DCGM_FI_DEV_SM_CLOCK_HERTZ": "1980000000",
        "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL": "7",
        "DCGM_FI_PROF_TENSOR_UTIL_RATIO": "0.600000",
        "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND": "20",
        "DCGM_FI_DEV_XID_ERROR": "79",
        "DCGM_FI_DEV_GPU_UTIL_RATIO": "0.450000",
    }
    text = gpu0({**new, **old}) if canonical_first else gpu0({**old, **new})
    (sample,) = DcgmSource("http://unused").samples_from_text(text)
    assert sample.memory_used_bytes == 5 * 1024 * MIB
    assert sample.memory_total_bytes == 85520809984
    assert sample.power_watts == 300.0 and sample.sm_clock_hz == 1980e6 and sample.energy_joules_total == 7
    assert sample.tensor_active == 0.6 and sample.pcie_tx_bytes_per_second == 20
    assert sample.last_xid == 79 and sample.utilization == 0.45


def test_memory_total_from_byte_parts_when_no_capacity() -> None:
    parts = {"DCGM_FI_DEV_FB_USED_BYTES": "1000", "DCGM_FI_DEV_FB_FREE_BYTES": "3000"}
    (sample,) = DcgmSource("http://unused").samples_from_text(gpu0(parts))
    assert (sample.memory_used_bytes, sample.memory_total_bytes) == (1000, 4000)
    (sample,) = DcgmSource("http://unused").samples_from_text(gpu0({**parts, "DCGM_FI_DEV_FB_RESERVED_BYTES": "500"}))
    assert sample.memory_total_bytes == 4500
    (sample,) = DcgmSource("http://unused").samples_from_text(gpu0({"DCGM_FI_DEV_FB_USED_BYTES": "1000"}))
    assert sample.memory_total_bytes is None  # no free part: no total guessed


PERCENT_HELP = "GPU utilization (in %)."
RATIO_HELP = "GPU utilization ratio (0.0-1.0)."


@pytest.mark.parametrize(
    ("value", "help_text", "base_unit_names", "expected"),
    [
        ("87", "", False, 0.87),  # DCGM 4.6: integer percent under the new name (ID 203)
        ("100", "", False, 1.0),
        ("0.870000", "", False, 0.87),  # DCGM 4.7: the 0-1 double on ID 1613
        ("0.500000", PERCENT_HELP, False, 0.5),  # a fraction cannot be an integer percent, whatever HELP says
        ("0", "", False, 0.0),  # 0 % and a 0 ratio are the same
        ("1", PERCENT_HELP, False, 0.01),  # exact 1: HELP decides
        ("1.000000", RATIO_HELP, False, 1.0),
        ("1.000000", "", True, 1.0),  # no telling HELP, but 4.7-only names in the text: the 4.7 ratio
        ("1", PERCENT_HELP, True, 0.01),  # HELP comes first
    ],
)
def test_gpu_util_ratio_name_unit_is_decided_by_range_help_then_version(
    value: str, help_text: str, base_unit_names: bool, expected: float
) -> None:
    values = {"DCGM_FI_DEV_GPU_UTIL_RATIO": value, "DCGM_FI_DEV_POWER_USAGE": "100"}
    if base_unit_names:
        values["DCGM_FI_DEV_SM_CLOCK_HERTZ"] = "1980000000"
    helps = {"DCGM_FI_DEV_GPU_UTIL_RATIO": help_text} if help_text else {}
    source = DcgmSource("http://unused")
    (sample,) = source.samples_from_text(gpu0(values, helps=helps))
    assert sample.utilization == pytest.approx(expected)
    assert source.utilization_unit_unknown == 0


def test_gpu_util_ratio_of_exactly_one_with_nothing_to_go_by_is_left_out_and_counted() -> None:
    source = DcgmSource("http://unused")
    text = gpu0({"DCGM_FI_DEV_GPU_UTIL_RATIO": "1", "DCGM_FI_DEV_POWER_USAGE": "100"})
    (sample,) = source.samples_from_text(text)
    assert sample.utilization is None and "utilization" not in sample.to_json()
    assert sample.power_watts == 100  # the rest of the GPU is still sent
    assert (source.utilization_unit_unknown, source.error_count) == (1, 1)


def test_an_undecidable_gpu_util_ratio_falls_back_to_the_percent_name() -> None:
    """DCGM 4.7 prints ID 203 as DCGM_FI_DEV_GPU_UTIL (%) next to 1613: the percent settles an exact 1."""
    source = DcgmSource("http://unused")
    (sample,) = source.samples_from_text(gpu0({"DCGM_FI_DEV_GPU_UTIL_RATIO": "1", "DCGM_FI_DEV_GPU_UTIL": "1"}))
    assert sample.utilization == 0.01 and source.utilization_unit_unknown == 0


def test_gpu_util_ratio_help_is_found_when_help_lines_come_first() -> None:
    """Old exporters print every HELP/TYPE line before the samples (fixtures/dcgm README, 1.4.6)."""
    text = (
        f"# HELP DCGM_FI_DEV_GPU_UTIL_RATIO {PERCENT_HELP}\n# TYPE DCGM_FI_DEV_GPU_UTIL_RATIO gauge\n"
        f"DCGM_FI_DEV_GPU_UTIL_RATIO{{{device_labels(0)}}} 1\n"
    )
    reordered = "\n".join(sorted(text.splitlines(), key=lambda line: not line.startswith("#"))) + "\n"
    (sample,) = DcgmSource("http://unused").samples_from_text(reordered)
    assert sample.utilization == 0.01


def test_a_blank_base_unit_family_still_tells_the_version() -> None:
    text = gpu0({"DCGM_FI_DEV_GPU_UTIL_RATIO": "1.000000", "DCGM_FI_DEV_FB_USED_BYTES": INT64_NOT_SUPPORTED})
    (sample,) = DcgmSource("http://unused").samples_from_text(text)
    assert sample.utilization == 1.0 and sample.memory_used_bytes is None


@pytest.mark.parametrize("canonical", [False, True])
def test_blank_sentinels_are_dropped_in_both_name_sets(canonical: bool) -> None:
    names = {
        False: (
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_SM_CLOCK",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "DCGM_FI_DEV_GPU_UTIL",
        ),
        True: (
            "DCGM_FI_DEV_FB_USED_BYTES",
            "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL",
            "DCGM_FI_DEV_SM_CLOCK_HERTZ",
            "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
            "DCGM_FI_DEV_GPU_UTIL_RATIO",
        ),
    }[canonical]
    blanks = (INT64_NOT_SUPPORTED, INT64_NOT_SUPPORTED, INT64_NOT_SUPPORTED, INT64_NOT_SUPPORTED, FP64_BLANK)
    values = dict(zip(names, (*blanks, FP64_BLANK), strict=True))
    counters = {name: "counter" for name in names if "ENERGY" in name or "ERROR" in name}
    (sample,) = DcgmSource("http://unused").samples_from_text(
        gpu0({**values, "DCGM_FI_DEV_GPU_TEMP": "40"}, types=counters)
    )
    body = sample.to_json()
    for absent in (
        "memory_used_bytes",
        "energy_joules_total",
        "nvlink_replay_errors_total",
        "sm_clock_hz",
        "tensor_active",
        "utilization",
    ):
        assert absent not in body, absent
    assert body["temperature_celsius"] == 40


def test_a_blank_canonical_value_leaves_the_old_name_standing() -> None:
    text = gpu0({"DCGM_FI_DEV_FB_USED_BYTES": INT64_NOT_SUPPORTED, "DCGM_FI_DEV_FB_USED": "512"})
    (sample,) = DcgmSource("http://unused").samples_from_text(text)
    assert sample.memory_used_bytes == 512 * MIB


@pytest.mark.parametrize("metric_type", ["counter", "gauge", "untyped"])
def test_canonical_names_ending_in_total_keep_their_name_under_any_type(metric_type: str) -> None:
    """The parser names a counter's samples ``<family>_total``: ``..._JOULES_TOTAL_total`` must still map."""
    names = (
        "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
        "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
        "DCGM_FI_PROF_MMA_CYCLES_ACTIVE_TOTAL",
    )
    text = gpu0({names[0]: "123456", names[1]: "9", names[2]: "1000"}, types=dict.fromkeys(names, metric_type))
    (sample,) = DcgmSource("http://unused").samples_from_text(text)
    assert sample.energy_joules_total == 123456 and sample.pcie_replays_total == 9


def test_each_target_has_one_name_per_precedence_and_each_old_name_a_canonical_twin() -> None:
    """Ties would make the winner depend on the order of the text; a legacy row alone would mean a missed rename."""
    by_target: dict[str, list[int]] = defaultdict(list)
    for row in FIELDS:
        by_target[row.target].append(row.precedence)
    assert {target: p for target, p in by_target.items() if len(p) != len(set(p))} == {}
    for row in FIELDS:
        if row.naming is Naming.LEGACY:
            twins = [r for r in FIELDS if r.target == row.target and r.naming is Naming.RENAMED]
            assert twins and twins[0].field_id in (row.field_id, 1613), row.name
    assert all(row.source for row in FIELDS)
