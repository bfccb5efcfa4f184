"""The NVML source against the fake pynvml: units, capabilities, GPM rotation, MIG, lost GPUs, XIDs, attribution."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from mfumon.exporter.errors import SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.sources import open_source
from mfumon.exporter.node.sources.nvml import GPM_MIN_INTERVAL_S, NvmlSource
from mfumon.exporter.node.sources.nvml_api import NvmlApi

MIB = 1024 * 1024


def _source(fake: ModuleType, gpus: list[object], **kwargs: object) -> NvmlSource:
    fake.reset(gpus)  # type: ignore[attr-defined]
    return NvmlSource(NvmlApi.load(), xid_poll_ms=20, **kwargs)  # type: ignore[arg-type]


def test_counters_are_read_in_base_units(fake_nvml: ModuleType) -> None:
    gpu = fake_nvml.FakeGpu(
        uuid="GPU-1",
        memory_used_bytes=60 * 1024**3,
        utilization_gpu_pct=87,
        power_mw=612_345,
        temperature_c=71,
        sm_clock_mhz=1755,
        max_sm_clock_mhz=1980,
        clock_event_reasons=0x4 | 0x40,
        ecc_uncorrected=2,
        ecc_corrected=17,
        gpm_supported=False,
    )
    source = _source(fake_nvml, [gpu])
    try:
        (sample,) = source.collect()
    finally:
        source.close()
    assert (sample.uuid, sample.index, sample.name, sample.up) == ("GPU-1", 0, "NVIDIA H100 80GB HBM3", True)
    assert sample.utilization == pytest.approx(0.87)
    assert sample.memory_used_bytes == 60 * 1024**3
    assert sample.memory_total_bytes == 85520809984
    assert sample.power_watts == pytest.approx(612.345)
    assert sample.temperature_celsius == 71
    assert sample.sm_clock_hz == pytest.approx(1755e6)
    assert sample.max_sm_clock_hz == pytest.approx(1980e6)
    assert sample.throttle_reasons == ("hw_thermal", "sw_power_cap")
    assert (sample.ecc_uncorrected_total, sample.ecc_corrected_total) == (2, 17)
    assert sample.tensor_active is None and sample.sm_active is None  # no GPM: left out, not zero
    assert fake_nvml.STATE.initialized is False  # close() shut NVML down


def test_unsupported_counter_is_left_out_never_retried_and_logged_once(
    fake_nvml: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    gpu = fake_nvml.FakeGpu(
        uuid="GPU-1", unsupported={"nvmlDeviceGetPowerUsage"}, no_permission={"nvmlDeviceGetTotalEccErrors"}
    )
    caplog.set_level(logging.INFO, logger="mfumon.exporter.node.sources.nvml")
    source = _source(fake_nvml, [gpu])
    try:
        bodies = [source.collect()[0].to_json() for _ in range(3)]
    finally:
        source.close()
    for body in bodies:
        assert "power_watts" not in body
        assert "ecc_uncorrected_total" not in body and "ecc_corrected_total" not in body
        assert body["temperature_celsius"] == 30
    assert fake_nvml.STATE.calls["nvmlDeviceGetPowerUsage"] == 1
    power_logs = [r for r in caplog.records if "power unavailable" in r.getMessage()]
    assert len(power_logs) == 1
    assert source.error_count == 0


def test_gpm_metrics_come_from_samples_at_least_100ms_apart(fake_nvml: ModuleType) -> None:
    values = {2: 81.0, 3: 42.0, 5: 55.5, 10: 30.0, 20: 100.0, 21: 200.0, 60: 1000.0, 61: 2000.0}
    source = _source(fake_nvml, [fake_nvml.FakeGpu(uuid="GPU-H", gpm_values=values)])
    try:
        too_soon = source.collect()[0]
        assert too_soon.tensor_active is None  # < 100 ms since the first GPM sample: left out, not guessed
        time.sleep(GPM_MIN_INTERVAL_S + 0.02)
        sample = source.collect()[0]
        time.sleep(GPM_MIN_INTERVAL_S + 0.02)
        again = source.collect()[0]
    finally:
        source.close()
    assert sample.sm_active == pytest.approx(0.81)
    assert sample.sm_occupancy == pytest.approx(0.42)
    assert sample.tensor_active == pytest.approx(0.555)
    assert sample.dram_active == pytest.approx(0.30)
    assert sample.nvlink_tx_bytes_per_second == pytest.approx(2000 * MIB)
    assert sample.nvlink_rx_bytes_per_second == pytest.approx(1000 * MIB)
    assert sample.pcie_rx_bytes_per_second == pytest.approx(200 * MIB)
    assert again.tensor_active == pytest.approx(0.555)
    pairs = fake_nvml.STATE.gpm_pairs
    assert len(pairs) == 2
    assert all(second - first >= GPM_MIN_INTERVAL_S for first, second in pairs)
    assert pairs[1][0] == pytest.approx(pairs[0][1])  # rotation: the second interval starts where the first ended


def test_gpm_metric_refused_by_nvml_is_left_out(fake_nvml: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mfumon.exporter.node.sources.nvml")
    source = _source(fake_nvml, [fake_nvml.FakeGpu(uuid="GPU-H", gpm_values={2: 50.0, 5: 20.0})])
    try:
        time.sleep(GPM_MIN_INTERVAL_S + 0.02)
        body = source.collect()[0].to_json()
        time.sleep(GPM_MIN_INTERVAL_S + 0.02)
        source.collect()
    finally:
        source.close()
    assert body["tensor_active"] == pytest.approx(0.2)
    assert "sm_occupancy" not in body and "dram_active" not in body
    assert len([r for r in caplog.records if "gpm_metric_3" in r.getMessage()]) == 1


def test_nvlink_rate_from_cumulative_field_counters_on_ampere(fake_nvml: ModuleType) -> None:
    gpu = fake_nvml.FakeGpu(uuid="GPU-A", name="NVIDIA A100-SXM4-80GB", gpm_supported=False, nvlink_links=12)
    source = _source(fake_nvml, [gpu])
    try:
        before_first = time.time()
        first = source.collect()[0]
        after_first = time.time()
        gpu.nvlink_tx_kib += 3_000_000
        gpu.nvlink_rx_kib += 1_500_000
        time.sleep(0.2)
        before_second = time.time()
        second = source.collect()[0]
        after_second = time.time()
    finally:
        source.close()
    assert first.nvlink_tx_bytes_per_second is None  # a rate needs two readings
    tx_bytes = 3_000_000 * 1024
    assert tx_bytes / (after_second - before_first) <= second.nvlink_tx_bytes_per_second
    assert second.nvlink_tx_bytes_per_second <= tx_bytes / (before_second - after_first)
    assert second.nvlink_rx_bytes_per_second == pytest.approx(second.nvlink_tx_bytes_per_second / 2)


def test_lost_gpu_is_reported_down_without_last_values(fake_nvml: ModuleType) -> None:
    healthy = fake_nvml.FakeGpu(uuid="GPU-0", utilization_gpu_pct=90)
    flaky = fake_nvml.FakeGpu(uuid="GPU-1", utilization_gpu_pct=95, power_mw=650_000)
    source = _source(fake_nvml, [healthy, flaky])
    try:
        assert source.collect()[1].power_watts == pytest.approx(650.0)
        flaky.lost = True
        down = source.collect()
        flaky.lost = False
        back = source.collect()
    finally:
        source.close()
    assert down[0].up and down[0].utilization == pytest.approx(0.9)
    body = down[1].to_json()
    assert body == {"uuid": "GPU-1", "index": 1, "name": "NVIDIA H100 80GB HBM3", "up": False}
    assert back[1].up and back[1].power_watts == pytest.approx(650.0)


def test_mig_instances_are_separate_devices_with_their_profile(
    fake_nvml: ModuleType, proc_root: Callable[..., Path]
) -> None:
    migs = [
        fake_nvml.FakeMig(
            "MIG-aaaa",
            "3g.40gb",
            1,
            memory_total_bytes=40 * 1024**3,
            memory_used_bytes=5 * 1024**3,
            gpm_values={5: 40.0},
            processes=[(501, 4 * 1024**3)],
        ),
        fake_nvml.FakeMig("MIG-bbbb", "1g.10gb", 9, memory_total_bytes=10 * 1024**3, gpm_values={5: 10.0}),
    ]
    gpu = fake_nvml.FakeGpu(uuid="GPU-P", mig=migs, gpm_values={5: 99.0})
    plain = fake_nvml.FakeGpu(uuid="GPU-Q", mig=[])  # MIG-capable, MIG mode off
    root = proc_root(501, {"SLURM_JOB_ID": "777"})
    source = _source(fake_nvml, [gpu, plain], resolver=JobResolver(root))
    try:
        time.sleep(GPM_MIN_INTERVAL_S + 0.02)
        samples = source.collect()
    finally:
        source.close()
    assert [(s.uuid, s.index, s.mig_profile) for s in samples] == [
        ("MIG-aaaa", 0, "3g.40gb"),
        ("MIG-bbbb", 0, "1g.10gb"),
        ("GPU-Q", 1, None),
    ]
    first, second = samples[0], samples[1]
    assert first.name == "NVIDIA H100 80GB HBM3"  # the parent's NVML name, so the peak table matches
    assert first.utilization is None  # not available per MIG instance
    assert first.memory_total_bytes == 40 * 1024**3 and first.memory_used_bytes == 5 * 1024**3
    assert first.tensor_active == pytest.approx(0.40) and second.tensor_active == pytest.approx(0.10)
    assert first.temperature_celsius == 30  # a board reading, taken from the parent
    # No power or energy on an instance's handle: its board's, for the aggregator to apportion (issue 60).
    assert first.power_watts is None and first.energy_joules_total is None
    assert first.board_energy_joules_total == second.board_energy_joules_total == pytest.approx(gpu.energy_mj / 1000)
    assert first.board_power_watts == pytest.approx(gpu.power_mw / 1000)
    assert samples[2].board_energy_joules_total is None  # a whole GPU has its own
    assert first.job_id == "777" and second.job_id is None
    assert fake_nvml.STATE.calls["nvmlGpmMigSampleGet"] >= 4


def test_xid_events_are_counted_per_gpu(fake_nvml: ModuleType) -> None:
    gpus = [
        fake_nvml.FakeGpu(uuid="GPU-0"),
        fake_nvml.FakeGpu(uuid="GPU-1"),
        fake_nvml.FakeGpu(uuid="GPU-2", supported_events=0),
    ]
    source = _source(fake_nvml, gpus)
    try:
        assert [s.xid_errors_total for s in source.collect()] == [0, 0, None]
        fake_nvml.inject_xid(1, 79)
        fake_nvml.inject_xid(1, 48)
        deadline = time.monotonic() + 5
        while source.collect()[1].xid_errors_total != 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        samples = source.collect()
    finally:
        source.close()
    assert [s.xid_errors_total for s in samples] == [0, 2, None]
    assert fake_nvml.STATE.event_sets == []  # the event set was freed on close


def test_jobs_are_attributed_from_compute_process_environments(
    fake_nvml: ModuleType, proc_root: Callable[..., Path], tmp_path: Path
) -> None:
    proc_root(100, {"SLURM_JOB_ID": "4242", "PATH": "/usr/bin"})
    proc_root(200, {"MFUMON_JOB_ID": "llm-pretrain-7", "SLURM_JOB_ID": "4243"})
    root = proc_root(300, {"HOME": "/root"})
    mapping = tmp_path / "mapping"
    mapping.mkdir()
    (mapping / "2").write_text("slurm-99\n")
    gpus = [
        fake_nvml.FakeGpu(uuid="GPU-0", processes=[(100, 10 * 1024**3)]),
        fake_nvml.FakeGpu(uuid="GPU-1", processes=[(100, 1024), (200, 2048)]),
        fake_nvml.FakeGpu(uuid="GPU-2", processes=[(300, 1024)]),
        fake_nvml.FakeGpu(uuid="GPU-3", processes=[(99999, 1024)]),
        fake_nvml.FakeGpu(uuid="GPU-4", no_permission={"nvmlDeviceGetComputeRunningProcesses"}),
    ]
    source = _source(fake_nvml, gpus, resolver=JobResolver(root, str(mapping)))
    try:
        samples = source.collect()
    finally:
        source.close()
    assert [s.job_id for s in samples] == ["4242", "llm-pretrain-7", "slurm-99", None, None]
    # The process count goes out too: a GPU running work without a job id is busy, not idle, to the aggregator.
    assert [s.compute_processes for s in samples] == [1, 2, 1, 1, None]  # unlistable: left out, never 0


def test_compute_processes_are_counted_without_a_job_resolver(fake_nvml: ModuleType) -> None:
    gpus = [fake_nvml.FakeGpu(uuid="GPU-0", processes=[(1, 1024), (2, 1024)]), fake_nvml.FakeGpu(uuid="GPU-1")]
    source = _source(fake_nvml, gpus)
    try:
        samples = source.collect()
    finally:
        source.close()
    assert [(s.job_id, s.compute_processes) for s in samples] == [(None, 2), (None, 0)]
    assert samples[1].to_json()["compute_processes"] == 0


def test_nvml_that_does_not_initialise_is_unavailable(fake_nvml: ModuleType) -> None:
    fake_nvml.reset([], init_error=fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(SourceUnavailable, match="Driver Not Loaded"):
        NvmlApi.load()
    with pytest.raises(SourceUnavailable, match="no GPU source found"):
        open_source("auto", node="n1", dcgm_url="http://127.0.0.1:9/metrics")


def test_missing_pynvml_package_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    with pytest.raises(SourceUnavailable, match="pynvml is not installed"):
        NvmlApi.load()


def test_nvml_that_cannot_enumerate_is_unavailable(fake_nvml: ModuleType) -> None:
    fake_nvml.reset([fake_nvml.FakeGpu(uuid="GPU-0")])
    fake_nvml.STATE.count_error = fake_nvml.NVML_ERROR_UNKNOWN  # init works, enumeration does not
    with pytest.raises(SourceUnavailable, match="cannot enumerate"):
        open_source("nvml", node="n1")
    assert fake_nvml.STATE.initialized is False


# -- health counters (issue 15) -----------------------------------------------------------------------------------


def test_health_counters_as_the_h200_answered_them(fake_nvml: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    """Defaults of FakeGpu mirror bench/results/h200-2026-11-30/nvml_calls.json: energy in mJ, zero replays and
    remaps, and every NVLink error field answering NOT_SUPPORTED in its own nvmlReturn (a single-GPU VM)."""
    caplog.set_level(logging.INFO, logger="mfumon.exporter.node.sources.nvml")
    h200 = fake_nvml.FakeGpu(uuid="GPU-ef48", name="NVIDIA H200", gpm_supported=False, nvlink_links=0)
    source = _source(fake_nvml, [h200])
    try:
        bodies = [source.collect()[0].to_json() for _ in range(3)]
    finally:
        source.close()
    body = bodies[-1]
    assert body["energy_joules_total"] == pytest.approx(2674.357)
    assert body["pcie_replays_total"] == 0
    assert (body["remapped_rows_correctable_total"], body["remapped_rows_uncorrectable_total"]) == (0, 0)
    assert (body["row_remap_pending"], body["row_remap_failure"]) == (0, 0)
    assert body["last_xid"] == 0  # registered for XID events, none seen
    for absent in ("nvlink_crc_flit_errors_total", "nvlink_replay_errors_total", "nvlink_recovery_errors_total"):
        assert absent not in body  # unsupported: left out, never 0
    # Gen5 x16 of Gen5 x16, as nvmlDeviceGetCurr/MaxPcieLink* answered; no NVLink fabric (nvidia-smi: all N/A)
    link = ("pcie_link_gen", "pcie_link_gen_max", "pcie_link_width", "pcie_link_width_max")
    assert tuple(body[name] for name in link) == (5, 5, 16, 16)
    assert "fabric_health_summary" not in body and "fabric_manager_status" not in body
    # One call for the NVLink error fields and one for the throughput fields: each tried once, then remembered
    # as unsupported (no call per cycle for counters that never answer).
    assert fake_nvml.STATE.calls["nvmlDeviceGetFieldValues"] == 2
    assert len([r for r in caplog.records if "nvlink_errors unavailable" in r.getMessage()]) == 1
    assert source.error_count == 0


def test_nvlink_error_totals_from_per_field_answers(fake_nvml: ModuleType) -> None:
    ampere = fake_nvml.FakeGpu(
        uuid="GPU-A", gpm_supported=False, nvlink_error_fields={38: 3, 45: 1, 52: 10, 59: 0}, nvlink_links=12
    )
    hopper = fake_nvml.FakeGpu(uuid="GPU-H", gpm_supported=False, nvlink_error_fields={161: 4, 162: 1, 163: 2})
    source = _source(fake_nvml, [ampere, hopper])
    try:
        a, h = source.collect()
        ampere.nvlink_error_fields[52] = 12
        again = source.collect()[0]
    finally:
        source.close()
    assert (a.nvlink_crc_flit_errors_total, a.nvlink_crc_data_errors_total) == (3, 1)
    assert (a.nvlink_replay_errors_total, a.nvlink_recovery_errors_total) == (10, 0)
    assert again.nvlink_replay_errors_total == 12
    # Hopper's data-link-layer totals stand in where the *_COUNT_TOTAL fields do not answer; CRC data has none.
    assert (h.nvlink_replay_errors_total, h.nvlink_recovery_errors_total, h.nvlink_crc_flit_errors_total) == (4, 1, 2)
    assert h.nvlink_crc_data_errors_total is None


def test_remapped_rows_pending_and_failure(fake_nvml: ModuleType) -> None:
    failing = fake_nvml.FakeGpu(uuid="GPU-R", gpm_supported=False, remapped_rows=(2, 1, 1, 0), pcie_replays=17)
    volta = fake_nvml.FakeGpu(
        uuid="GPU-V",
        name="Tesla V100-SXM2-32GB",
        gpm_supported=False,
        unsupported={"nvmlDeviceGetRemappedRows", "nvmlDeviceGetTotalEnergyConsumption"},
    )
    source = _source(fake_nvml, [failing, volta])
    try:
        r, v = (s.to_json() for s in source.collect())
    finally:
        source.close()
    assert (r["remapped_rows_correctable_total"], r["remapped_rows_uncorrectable_total"]) == (2, 1)
    assert (r["row_remap_pending"], r["row_remap_failure"], r["pcie_replays_total"]) == (1, 0, 17)
    assert "row_remap_pending" not in v and "remapped_rows_correctable_total" not in v  # page retirement era
    assert "energy_joules_total" not in v


def test_board_health_repeats_on_mig_instances_but_energy_does_not(fake_nvml: ModuleType) -> None:
    migs = [fake_nvml.FakeMig("MIG-1", "3g.40gb", 1), fake_nvml.FakeMig("MIG-2", "3g.40gb", 2)]
    gpu = fake_nvml.FakeGpu(uuid="GPU-P", mig=migs, gpm_supported=False, remapped_rows=(0, 1, 1, 0))
    source = _source(fake_nvml, [gpu])
    try:
        samples = source.collect()
    finally:
        source.close()
    assert [s.row_remap_pending for s in samples] == [1, 1]
    assert [s.energy_joules_total for s in samples] == [None, None]


def test_last_xid_is_the_latest_event_of_the_physical_gpu(fake_nvml: ModuleType) -> None:
    gpus = [fake_nvml.FakeGpu(uuid="GPU-0"), fake_nvml.FakeGpu(uuid="GPU-1", supported_events=0)]
    source = _source(fake_nvml, gpus)
    try:
        fake_nvml.inject_xid(0, 13)
        fake_nvml.inject_xid(0, 79)
        deadline = time.monotonic() + 5
        while source.collect()[0].last_xid != 79 and time.monotonic() < deadline:
            time.sleep(0.02)
        first, second = source.collect()
    finally:
        source.close()
    assert first.last_xid == 79 and first.xid_errors_total == 2
    assert second.last_xid is None  # not registered for XID events: unsupported, not "no XID"


# -- shared GPUs (issue 35) ------------------------------------------------------------------------------------------


def _shared_gpus(fake: ModuleType, proc_root: Callable[..., Path], **gpu: object) -> tuple[list[object], Path]:
    proc_root(100, {"SLURM_JOB_ID": "4242"})
    proc_root(101, {"SLURM_JOB_ID": "4242"})
    proc_root(200, {"MFUMON_JOB_ID": "infer-1"})
    root = proc_root(300, {"HOME": "/root"})  # a process of no job: takes no share
    processes = [(100, 8 * 1024**3), (101, 1024), (200, 2 * 1024**3), (300, 1024)]
    return [fake.FakeGpu(uuid="GPU-S", processes=processes, **gpu), fake.FakeGpu(uuid="GPU-1")], root  # type: ignore[attr-defined]


def test_a_shared_gpu_is_split_by_per_process_utilization_samples(
    fake_nvml: ModuleType, proc_root: Callable[..., Path]
) -> None:
    # NVML samples since the last cycle: job 4242's two processes 30 + 15 + 15 (sm %), infer-1's 20; pid 300 10.
    samples = [(100, 1_000, 30, 5), (101, 1_100, 15, 1), (100, 1_200, 15, 5), (200, 1_150, 20, 2), (300, 1_160, 10, 0)]
    gpus, root = _shared_gpus(fake_nvml, proc_root, process_samples=samples)
    source = _source(fake_nvml, gpus, resolver=JobResolver(root))
    try:
        shared, alone = source.collect()
        again, _ = source.collect()  # nothing newer than 1_200: NVML answers NOT_FOUND, so accounting, then equal
        fake_nvml.STATE.gpus[0].process_samples.append((200, 1_300, 40, 3))
        third, _ = source.collect()
    finally:
        source.close()
    assert [(s.job_id, s.share, s.method) for s in shared.shares] == [
        ("4242", pytest.approx(60 / 80), "process_utilization"),
        ("infer-1", pytest.approx(20 / 80), "process_utilization"),
    ]
    assert shared.job_id == "4242"  # the largest share, for aggregators that read only job_id
    assert shared.to_json()["shares"] == [s.to_json() for s in shared.shares]
    assert alone.shares is None and "shares" not in alone.to_json()
    # A tie goes to the job the attribution rules name (MFUMON_JOB_ID is explicit): job_id stays stable.
    assert [(s.job_id, s.share, s.method) for s in again.shares] == [
        ("infer-1", 0.5, "equal_split"),
        ("4242", 0.5, "equal_split"),
    ]
    # Only samples newer than the last one read count: infer-1 alone ran in the last window.
    assert [(s.job_id, s.share) for s in third.shares] == [("infer-1", 1.0), ("4242", 0.0)]


def test_accounting_splits_a_shared_gpu_when_no_utilization_samples(
    fake_nvml: ModuleType, proc_root: Callable[..., Path]
) -> None:
    # 101 has no measurement (NVML_VALUE_NOT_AVAILABLE: left out, not 42949672.95), 555 is not on this GPU
    accounting = {100: (60, True), 101: (fake_nvml.NVML_VALUE_NOT_AVAILABLE, True), 200: (20, True), 555: (90, True)}
    gpus, root = _shared_gpus(
        fake_nvml, proc_root, unsupported={"process_utilization"}, accounting_enabled=True, accounting=accounting
    )
    source = _source(fake_nvml, gpus, resolver=JobResolver(root))
    try:
        shared, _ = source.collect()
    finally:
        source.close()
    assert [(s.job_id, s.share, s.method) for s in shared.shares] == [
        ("4242", pytest.approx(0.75), "accounting"),
        ("infer-1", pytest.approx(0.25), "accounting"),
    ]


def test_equal_split_is_the_stated_fallback_and_mig_instances_are_never_split(
    fake_nvml: ModuleType, proc_root: Callable[..., Path]
) -> None:
    gpus, root = _shared_gpus(fake_nvml, proc_root, unsupported={"process_utilization", "accounting"})
    mig = fake_nvml.FakeMig("MIG-a", "3g.40gb", 1, processes=[(100, 1024), (200, 1024)])
    gpus.append(fake_nvml.FakeGpu(uuid="GPU-M", mig=[mig]))
    source = _source(fake_nvml, gpus, resolver=JobResolver(root))
    try:
        shared, _, slice_ = source.collect()
    finally:
        source.close()
    assert [(s.job_id, s.share, s.method) for s in shared.shares] == [
        ("infer-1", 0.5, "equal_split"),
        ("4242", 0.5, "equal_split"),
    ]
    assert slice_.mig_profile == "3g.40gb" and slice_.shares is None and slice_.job_id == "infer-1"  # explicit wins


# -- PCIe link and NVLink fabric (issue 53) -------------------------------------------------------------------------


def test_pcie_link_now_and_at_most_the_maximum_read_once(fake_nvml: ModuleType) -> None:
    downtrained = fake_nvml.FakeGpu(uuid="GPU-D", gpm_supported=False, pcie_link=(4, 8), pcie_link_max=(5, 16))
    source = _source(fake_nvml, [downtrained])
    try:
        first = source.collect()[0]
        downtrained.pcie_link = (1, 8)  # idle: the generation drops to save power
        again = [source.collect()[0] for _ in range(2)][-1]
    finally:
        source.close()
    assert (first.pcie_link_gen, first.pcie_link_width) == (4, 8)
    assert (first.pcie_link_gen_max, first.pcie_link_width_max) == (5, 16)
    assert (again.pcie_link_gen, again.pcie_link_width, again.pcie_link_gen_max) == (1, 8, 5)
    assert fake_nvml.STATE.calls["nvmlDeviceGetCurrPcieLinkGeneration"] == 3
    assert fake_nvml.STATE.calls["nvmlDeviceGetMaxPcieLinkGeneration"] == 1  # static: read once
    assert fake_nvml.STATE.calls["nvmlDeviceGetMaxPcieLinkWidth"] == 1


def test_pcie_link_not_available_is_left_out_and_not_asked_again(fake_nvml: ModuleType) -> None:
    gpu = fake_nvml.FakeGpu(uuid="GPU-1", gpm_supported=False, unsupported={"nvmlDeviceGetCurrPcieLinkWidth"})
    source = _source(fake_nvml, [gpu])
    try:
        bodies = [source.collect()[0].to_json() for _ in range(3)]
    finally:
        source.close()
    for body in bodies:
        assert not {"pcie_link_gen", "pcie_link_width", "pcie_link_gen_max", "pcie_link_width_max"} & set(body)
    assert fake_nvml.STATE.calls["nvmlDeviceGetCurrPcieLinkWidth"] == 1
    assert "nvmlDeviceGetMaxPcieLinkGeneration" not in fake_nvml.STATE.calls
    assert source.error_count == 0


def test_fabric_health_from_the_v3_struct(fake_nvml: ModuleType) -> None:
    mask = fake_nvml.fabric_mask(degraded_bw=fake_nvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE)
    limited = fake_nvml.FakeFabric(
        health_mask=mask, health_summary=fake_nvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
    )
    source = _source(fake_nvml, [fake_nvml.FakeGpu(uuid="GPU-F", gpm_supported=False, fabric=limited)])
    try:
        body = source.collect()[0].to_json()
    finally:
        source.close()
    assert body["fabric_health_summary"] == 3  # LIMITED_CAPACITY
    assert body["fabric_health_mask"] == mask and mask & 0b11 == 1  # bandwidth degraded: true
    assert body["fabric_manager_status"] == 3  # the probe completed without error: Success


def test_fabric_health_on_a_driver_without_the_summary_falls_back_to_v2_once(fake_nvml: ModuleType) -> None:
    older = [
        fake_nvml.FakeGpu(
            uuid=f"GPU-{k}",
            gpm_supported=False,
            fabric=fake_nvml.FakeFabric(),
            fabric_versions=(fake_nvml.nvmlGpuFabricInfo_v2,),
        )
        for k in range(2)
    ]
    source = _source(fake_nvml, older)
    try:
        bodies = [[s.to_json() for s in source.collect()] for _ in range(3)]
    finally:
        source.close()
    for body in (b for cycle in bodies for b in cycle):
        assert "fabric_health_summary" not in body  # v2 has none: left out, not 0
        assert body["fabric_health_mask"] == fake_nvml.fabric_mask()
        assert body["fabric_manager_status"] == 3
    # v3 refused once (ARGUMENT_VERSION_MISMATCH), then v2 for every GPU and cycle: 1 + 2 x 3 calls
    assert fake_nvml.STATE.calls["nvmlDeviceGetGpuFabricInfoV"] == 7
    assert source.error_count == 0


@pytest.mark.parametrize(
    ("state", "status", "manager"),
    [
        pytest.param(1, 0, 1, id="not-started"),
        pytest.param(2, 0, 2, id="in-progress"),
        pytest.param(3, 0, 3, id="success"),
        pytest.param(3, 10, 4, id="completed-with-an-error"),  # NVML_ERROR_TIMEOUT as the probe's status
    ],
)
def test_the_probe_state_is_the_fabric_manager_status(
    fake_nvml: ModuleType, state: int, status: int, manager: int
) -> None:
    fabric = fake_nvml.FakeFabric(state=state, status=status)
    source = _source(fake_nvml, [fake_nvml.FakeGpu(uuid="GPU-F", gpm_supported=False, fabric=fabric)])
    try:
        body = source.collect()[0].to_json()
    finally:
        source.close()
    assert body["fabric_manager_status"] == manager


@pytest.mark.parametrize(
    "fabric",
    [
        pytest.param(None, id="not-supported-error"),  # pre-Hopper: NVML_ERROR_NOT_SUPPORTED
        pytest.param("outside", id="state-not-supported"),  # Hopper with no NVSwitch: the probe says NOT_SUPPORTED
    ],
)
def test_a_gpu_in_no_fabric_sends_no_fabric_fields_and_is_not_asked_again(
    fake_nvml: ModuleType, fabric: str | None
) -> None:
    state = fake_nvml.FakeFabric(state=0, health_mask=0, health_summary=0) if fabric else None
    source = _source(fake_nvml, [fake_nvml.FakeGpu(uuid="GPU-1", gpm_supported=False, fabric=state)])
    try:
        bodies = [source.collect()[0].to_json() for _ in range(3)]
    finally:
        source.close()
    for body in bodies:
        assert not {"fabric_health_summary", "fabric_health_mask", "fabric_manager_status"} & set(body)
    assert fake_nvml.STATE.calls["nvmlDeviceGetGpuFabricInfoV"] == 1
    assert source.error_count == 0
