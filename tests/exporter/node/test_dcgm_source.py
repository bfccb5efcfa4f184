"""The dcgm-exporter source on recorded dcgm-exporter output (see fixtures/dcgm/README.md for provenance)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mfumon.exporter.errors import SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.sources import open_source
from mfumon.exporter.node.sources.dcgm import DcgmSource
from tests.exporter.node.test_dcgm_names import UUIDS, exposition

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm"
MIB = 1024 * 1024
RTX = (FIXTURES / "rtx4000ada-k8s-pod.prom").read_text()
A800 = (FIXTURES / "a800-mig-gpus0-1.prom").read_text()
LEGACY = (FIXTURES / "dcgm-exporter-1.4.6-two-gpus-nvlink-unsupported.prom").read_text()


def test_full_gpu_with_pod_labels_maps_units() -> None:
    (sample,) = DcgmSource("http://unused").samples_from_text(RTX)
    assert sample.uuid == "GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c"
    assert (sample.index, sample.name, sample.mig_profile) == (0, "NVIDIA RTX 4000 Ada Generation", None)
    assert sample.utilization == 0.0
    assert sample.memory_used_bytes == 1 * MIB
    assert sample.memory_total_bytes == (1 + 20015 + 457) * MIB
    assert sample.power_watts == pytest.approx(40.979)
    assert sample.temperature_celsius == 48
    assert sample.sm_clock_hz == pytest.approx(2310e6)
    assert sample.tensor_active == 0.0
    assert sample.dram_active == pytest.approx(0.003074)
    assert sample.pcie_tx_bytes_per_second == 78398480
    assert sample.pcie_rx_bytes_per_second == 45987793
    assert sample.xid_errors_total == 0
    assert sample.job_id == "cuda-75454ffb9f-8ljq7"  # the pod label, as no hpc_job or mapping file names a job
    # Not in this output: left out, never zero.
    body = sample.to_json()
    for absent in (
        "sm_active",
        "sm_occupancy",
        "max_sm_clock_hz",
        "nvlink_tx_bytes_per_second",
        "ecc_uncorrected_total",
    ):
        assert absent not in body


def test_mig_instances_are_separate_devices() -> None:
    samples = DcgmSource("http://unused").samples_from_text(A800)
    parent = "GPU-1f027ee8-6e1e-2b8c-0108-3d370e5f0418"
    assert [(s.uuid, s.index, s.mig_profile) for s in samples] == [
        (f"{parent}/3", 0, "2g.20gb"),
        (f"{parent}/5", 0, "2g.20gb"),
        (f"{parent}/6", 0, "2g.20gb"),
        ("GPU-9e5b8fec-61bf-5124-a0a9-079af1b65cc6", 1, None),
    ]
    mig, whole = samples[2], samples[3]
    assert mig.name == whole.name == "NVIDIA A800-SXM4-80GB"
    assert mig.utilization is None and mig.pcie_tx_bytes_per_second is None  # dcgm-exporter has none per instance
    assert mig.memory_total_bytes == (10 + 19957) * MIB and mig.memory_used_bytes == 10 * MIB
    assert mig.power_watts == pytest.approx(78.446)
    assert mig.sm_clock_hz == pytest.approx(1410e6) and mig.tensor_active == 0.0
    assert whole.utilization == 0.0 and whole.sm_clock_hz == pytest.approx(210e6)
    assert whole.pcie_tx_bytes_per_second == 143341
    assert whole.memory_total_bytes == (2 + 81226) * MIB


def test_health_fields_of_the_default_counters_map_with_their_units() -> None:
    (sample,) = DcgmSource("http://unused").samples_from_text(RTX)
    assert sample.energy_joules_total == pytest.approx(455497.156)  # DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION is mJ
    assert sample.pcie_replays_total == 0
    assert (sample.remapped_rows_correctable_total, sample.remapped_rows_uncorrectable_total) == (0, 0)
    assert sample.row_remap_failure == 0 and sample.last_xid == 0
    body = sample.to_json()
    # Not in dcgm-exporter's default counters: absent, never 0.
    for absent in ("row_remap_pending", "nvlink_replay_errors_total", "nvlink_recovery_errors_total"):
        assert absent not in body


def test_dcgm_blank_sentinels_are_left_out_not_sent_as_huge_counts() -> None:
    """dcgm-exporter 1.4.6 printed DCGM_INT64_NOT_SUPPORTED (9223372036854775794) for the NVLink error totals, the
    ECC counters and memory temperature of two GPUs without NVLink or ECC: none of it may reach the aggregator."""
    first, second = DcgmSource("http://unused").samples_from_text(LEGACY)
    assert (first.uuid, second.uuid) == (
        "GPU-c0b5694b-2b5d-6b20-f903-558341437f6b",
        "GPU-fbe0b676-9b79-be59-aad5-7e7560a23b26",
    )
    assert first.energy_joules_total == pytest.approx(15347724.978)
    assert second.energy_joules_total == pytest.approx(9937726.316)
    assert first.pcie_replays_total == 0 and first.power_watts == pytest.approx(7.544)
    for sample in (first, second):
        body = sample.to_json()
        for absent in (
            "nvlink_crc_flit_errors_total",
            "nvlink_crc_data_errors_total",
            "nvlink_replay_errors_total",
            "nvlink_recovery_errors_total",
            "ecc_uncorrected_total",
            "ecc_corrected_total",
        ):
            assert absent not in body, absent
    assert second.job_id == "gpu-rs-joo-m4z6t" and first.job_id is None  # pod label; empty for GPU 0


def test_nvlink_error_totals_and_pending_remaps_map_when_dcgm_has_values() -> None:
    """The same recorded output with the sentinels of GPU 1 replaced by counts (the only edit), plus the
    ``DCGM_FI_DEV_ROW_REMAP_PENDING`` row a counters file that enables field 396 adds, with the exporter's labels."""
    values = {
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 3,
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": 1,
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 12,
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 2,
    }
    lines = []
    for line in LEGACY.splitlines():
        name = line.split("{", 1)[0]
        if name in values and 'gpu="1"' in line:
            line = f"{line.rsplit(' ', 1)[0]} {values[name]}"
        lines.append(line)
    gpu1 = 'gpu="1", UUID="GPU-fbe0b676-9b79-be59-aad5-7e7560a23b26",container="test1",namespace="default"'
    lines.append(f'DCGM_FI_DEV_ROW_REMAP_PENDING{{{gpu1},pod="gpu-rs-joo-m4z6t"}} 1')
    first, second = DcgmSource("http://unused").samples_from_text("\n".join(lines) + "\n")
    assert (second.nvlink_crc_flit_errors_total, second.nvlink_crc_data_errors_total) == (3, 1)
    assert (second.nvlink_replay_errors_total, second.nvlink_recovery_errors_total) == (12, 2)
    assert second.row_remap_pending == 1
    assert first.nvlink_replay_errors_total is None and first.row_remap_pending is None


def test_job_from_hpc_job_label_then_mapping_dir(tmp_path: Path) -> None:
    labelled = "\n".join(
        line.replace('gpu="1",', 'gpu="1",hpc_job="slurm-5150",') if not line.startswith("#") else line
        for line in A800.splitlines()
    )
    (tmp_path / "0.5").write_text("4711\n")
    (tmp_path / "1").write_text("overridden-by-label\n")
    samples = DcgmSource("http://unused", JobResolver(tmp_path / "proc", str(tmp_path))).samples_from_text(labelled)
    assert [s.job_id for s in samples] == [None, "4711", None, "slurm-5150"]


def test_xid_gauge_changes_are_counted() -> None:
    source = DcgmSource("http://unused")

    def xid_total(value: int) -> int | None:
        text = "\n".join(
            line.rsplit(" ", 1)[0] + f" {value}" if line.startswith("DCGM_FI_DEV_XID_ERRORS{") else line
            for line in RTX.splitlines()
        )
        return source.samples_from_text(text)[0].xid_errors_total

    assert [xid_total(v) for v in (0, 79, 79, 48, 0, 0)] == [0, 1, 1, 2, 2, 2]


def test_clock_event_counts_become_throttle_reasons() -> None:
    labels = 'gpu="0",UUID="GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c",modelName="NVIDIA RTX 4000 Ada Generation"'
    events = "".join(
        f'DCGM_EXP_CLOCK_EVENTS_COUNT{{{labels},clock_event="{name}",window_size_in_ms="300000"}} {n}\n'
        for name, n in (("power_cap", 3), ("sw_thermal", 0), ("hw_slowdown", 1))
    )
    (sample,) = DcgmSource("http://unused").samples_from_text(RTX + events)
    assert sample.throttle_reasons == ("hw_slowdown", "sw_power_cap")
    # With its TYPE line (as dcgm-exporter prints it) the parser names the samples ..._COUNT_total: same result.
    typed = "# HELP DCGM_EXP_CLOCK_EVENTS_COUNT reported clock events\n# TYPE DCGM_EXP_CLOCK_EVENTS_COUNT counter\n"
    (sample,) = DcgmSource("http://unused").samples_from_text(RTX + typed + events)
    assert sample.throttle_reasons == ("hw_slowdown", "sw_power_cap")


@pytest.fixture
def dcgm_endpoint() -> Iterator[str]:
    """A loopback HTTP server answering ``/metrics`` with the recorded RTX output."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = RTX.encode() if self.path == "/metrics" else b"not found"
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_scrapes_a_live_endpoint(dcgm_endpoint: str) -> None:
    source = open_source("dcgm", node="n1", dcgm_url=f"{dcgm_endpoint}/metrics")
    try:
        assert [s.power_watts for s in source.collect()] == [pytest.approx(40.979)]
    finally:
        source.close()
    bad = DcgmSource(f"{dcgm_endpoint}/nope")
    with pytest.raises(SourceUnavailable, match="404"):
        bad.collect()
    bad.close()


def test_unreachable_dcgm_exporter_is_unavailable() -> None:
    with pytest.raises(SourceUnavailable):
        open_source("dcgm", node="n1", dcgm_url="http://127.0.0.1:9/metrics")


CYCLES = (
    "DCGM_FI_PROF_SM_CYCLES_ELAPSED_TOTAL",
    "DCGM_FI_PROF_SM_CYCLES_ACTIVE_TOTAL",
    "DCGM_FI_PROF_MMA_CYCLES_ACTIVE_TOTAL",
    "DCGM_FI_PROF_HMMA_CYCLES_ACTIVE_TOTAL",
    "DCGM_FI_PROF_IMMA_CYCLES_ACTIVE_TOTAL",
    "DCGM_FI_PROF_DMMA_CYCLES_ACTIVE_TOTAL",
)
SAMPLED = {
    "DCGM_FI_PROF_SM_UTIL_RATIO": "0.900000",
    "DCGM_FI_PROF_TENSOR_UTIL_RATIO": "0.500000",
    "DCGM_FI_PROF_HMMA_UTIL_RATIO": "0.450000",
    "DCGM_FI_PROF_IMMA_UTIL_RATIO": "0.040000",
    "DCGM_FI_PROF_DFMA_UTIL_RATIO": "0.010000",
}


def cycle_text(readings: dict[tuple[int, int | None], tuple[int, ...] | None]) -> str:
    """DCGM 4.7 text with sampled ratios and, per device, (elapsed, sm active, mma, hmma, imma, dmma) counters."""
    values: dict[str, list[tuple[tuple[int, int | None], str]]] = {name: [] for name in (*SAMPLED, *CYCLES)}
    for device, counters in readings.items():
        for name, value in SAMPLED.items():
            values[name].append((device, value))
        for name, count in zip(CYCLES, counters or (), strict=False):
            values[name].append((device, str(count)))
    return exposition(values, types=dict.fromkeys(CYCLES, "counter"))


def test_cycle_counters_give_exact_tensor_activity_over_the_interval() -> None:
    source = DcgmSource("http://unused")
    (first,) = source.samples_from_text(cycle_text({(0, None): (10_000, 9_000, 5_000, 4_000, 700, 300)}))
    # The first reading is only a baseline: DCGM's sampled ratios, marked as not exact.
    assert (first.tensor_active, first.sm_active, first.hmma_active, first.tensor_active_exact) == (0.5, 0.9, 0.45, 0)
    (second,) = source.samples_from_text(cycle_text({(0, None): (30_000, 27_000, 13_000, 10_000, 2_700, 300)}))
    assert second.tensor_active_exact == 1
    assert second.tensor_active == pytest.approx(8_000 / 20_000)  # dMMA / dELAPSED
    assert second.sm_active == pytest.approx(18_000 / 20_000)
    assert (second.hmma_active, second.imma_active, second.dmma_active) == (
        pytest.approx(6_000 / 20_000),
        pytest.approx(2_000 / 20_000),
        0.0,
    )
    assert second.sm_occupancy is None  # no cycle counter for it, and none sampled here


def test_a_counter_reset_falls_back_and_rebaselines() -> None:
    source = DcgmSource("http://unused")
    source.samples_from_text(cycle_text({(0, None): (1_000_000, 900_000, 500_000, 400_000, 0, 0)}))
    # Driver reload: every counter starts again near 0.
    (reset,) = source.samples_from_text(cycle_text({(0, None): (2_000, 1_000, 800, 600, 0, 0)}))
    assert (reset.tensor_active, reset.tensor_active_exact) == (0.5, 0)
    (after,) = source.samples_from_text(cycle_text({(0, None): (12_000, 9_000, 3_800, 2_600, 0, 0)}))
    assert after.tensor_active_exact == 1 and after.tensor_active == pytest.approx(3_000 / 10_000)
    # One counter going down is enough: the interval cannot be trusted.
    (one_down,) = source.samples_from_text(cycle_text({(0, None): (22_000, 19_000, 3_000, 2_600, 0, 0)}))
    assert one_down.tensor_active_exact == 0 and one_down.tensor_active == 0.5


def test_no_elapsed_cycles_falls_back() -> None:
    source = DcgmSource("http://unused")
    reading = {(0, None): (10_000, 9_000, 5_000, 4_000, 0, 0)}
    source.samples_from_text(cycle_text(reading))
    (stale,) = source.samples_from_text(cycle_text(reading))  # DCGM had no new sample between the scrapes
    assert (stale.tensor_active, stale.tensor_active_exact) == (0.5, 0)


def test_mig_instances_keep_their_own_cycle_baselines() -> None:
    source = DcgmSource("http://unused")
    source.samples_from_text(
        cycle_text({(0, 1): (1_000, 1_000, 100, 100, 0, 0), (0, 2): (5_000, 5_000, 4_000, 0, 4_000, 0)})
    )
    one, two = source.samples_from_text(
        cycle_text({(0, 1): (2_000, 1_500, 600, 600, 0, 0), (0, 2): (6_000, 6_000, 4_100, 0, 4_100, 0)})
    )
    assert (one.uuid, two.uuid) == (f"{UUIDS[0]}/1", f"{UUIDS[0]}/2")
    assert (one.tensor_active, one.hmma_active, one.tensor_active_exact) == (0.5, 0.5, 1)
    assert (two.tensor_active, two.imma_active, two.tensor_active_exact) == (0.1, 0.1, 1)


def test_vanished_cycle_counters_fall_back_and_start_a_new_baseline() -> None:
    source = DcgmSource("http://unused")
    source.samples_from_text(cycle_text({(0, None): (10_000, 9_000, 5_000, 4_000, 0, 0)}))
    (gone,) = source.samples_from_text(cycle_text({(0, None): None}))  # e.g. profiling paused
    assert gone.tensor_active == 0.5 and gone.tensor_active_exact is None
    (back,) = source.samples_from_text(cycle_text({(0, None): (90_000, 80_000, 45_000, 40_000, 0, 0)}))
    assert back.tensor_active_exact == 0  # a baseline again, not a delta across the gap
    (next_,) = source.samples_from_text(cycle_text({(0, None): (100_000, 90_000, 46_000, 41_000, 0, 0)}))
    assert next_.tensor_active == pytest.approx(0.1) and next_.tensor_active_exact == 1


def test_blank_cycle_counters_are_no_counters() -> None:
    source = DcgmSource("http://unused")
    blank = {(0, None): (9223372036854775794,) * 6}
    source.samples_from_text(cycle_text(blank))
    (sample,) = source.samples_from_text(cycle_text(blank))
    assert sample.tensor_active == 0.5 and sample.tensor_active_exact is None
