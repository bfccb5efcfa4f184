"""The amdsmi source against the fake amdsmi (ROCm 6.3 API): units, N/A and NOT_SUPPORTED left out, RAS, XGMI,
attribution (process environment, pod-resources by PCI address) and shared GPUs split by GFX engine time."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from mfumon.exporter.errors import SourceUnavailable
from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.podresources import device_keys
from mfumon.exporter.node.sources import open_source
from mfumon.exporter.node.sources.amdsmi import AmdSmiSource
from mfumon.exporter.node.sources.amdsmi_api import AmdSmiApi
from mfumon.mfu import PeakTable

GIB = 1024**3


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _source(fake: ModuleType, gpus: list[object], **kwargs: object) -> AmdSmiSource:
    fake.reset(gpus)  # type: ignore[attr-defined]
    return AmdSmiSource(AmdSmiApi.load(), **kwargs)  # type: ignore[arg-type]


def test_counters_are_read_in_base_units_and_the_name_finds_its_peak(fake_amd: ModuleType) -> None:
    gpu = fake_amd.FakeAmdGpu(
        market_name="AMD Instinct MI300X",
        gfx_activity=87,
        umc_activity=41,
        average_socket_power=612,
        temperatures={"HOTSPOT": 71},
        vram_total=192 * GIB,
        vram_used=150 * GIB,
        gfx_clk_mhz=1850,
        gfx_max_clk_mhz=2100,
        ras={**fake_amd.MI300A_RAS, "UMC": "ENABLED"},
        ecc=(17, 2, 1),
        pcie_replays=3,
    )
    source = _source(fake_amd, [gpu])
    try:
        (sample,) = source.collect()
    finally:
        source.close()
    assert (sample.uuid, sample.index, sample.name) == (
        "7eff74a0-0000-1000-808f-7e20764e2714",
        0,
        "AMD Instinct MI300X",
    )
    assert sample.utilization == pytest.approx(0.87) and sample.dram_active == pytest.approx(0.41)
    assert sample.power_watts == 612  # the average: MI300 reports no current socket power ("N/A")
    assert sample.temperature_celsius == 71  # hotspot: MI300 has no edge sensor
    assert (sample.memory_used_bytes, sample.memory_total_bytes) == (150 * GIB, 192 * GIB)
    assert (sample.sm_clock_hz, sample.max_sm_clock_hz) == (1850e6, 2100e6)
    assert (sample.ecc_corrected_total, sample.ecc_uncorrected_total, sample.ecc_deferred_total) == (17, 2, 1)
    assert sample.pcie_replays_total == 3
    assert sample.tensor_active is None  # amdsmi has no matrix-core activity counter: no hardware MFU estimate
    assert PeakTable().resolve(sample.name).key == "mi300x"  # type: ignore[union-attr]
    assert fake_amd.STATE.initialized is False  # close() shut amdsmi down


def test_na_and_not_supported_are_left_out_never_zero(fake_amd: ModuleType) -> None:
    gpu = fake_amd.FakeAmdGpu(
        gfx_activity="N/A",
        umc_activity=12,
        average_socket_power="N/A",
        temperatures={},
        unsupported={"amdsmi_get_gpu_pci_replay_counter", "amdsmi_get_gpu_metrics_info"},
    )
    source = _source(fake_amd, [gpu])
    try:
        sample, again = source.collect()[0], source.collect()[0]
    finally:
        source.close()
    body = sample.to_json()
    for absent in (
        "utilization",
        "power_watts",
        "temperature_celsius",
        "pcie_replays_total",
        "nvlink_tx_bytes_per_second",
    ):
        assert absent not in body
    assert body["dram_active"] == pytest.approx(0.12)
    # The MI300A of amd-smi's example has its UMC (memory) RAS block DISABLED: ECC counts would say nothing.
    assert "ecc_uncorrected_total" not in body and "ecc_deferred_total" not in body
    # Refused once, never asked again.
    assert fake_amd.STATE.calls["amdsmi_get_gpu_pci_replay_counter"] == 1 and again.pcie_replays_total is None


def test_xgmi_rates_come_from_the_accumulated_kilobytes(fake_amd: ModuleType) -> None:
    gpu = fake_amd.FakeAmdGpu(xgmi_read_kb=[100, 200, "N/A"], xgmi_write_kb=[50, 50, "N/A"])
    clock = _Clock()
    source = _source(fake_amd, [gpu], clock=clock)
    try:
        first = source.collect()[0]
        gpu.xgmi_read_kb, gpu.xgmi_write_kb = [100 + 1000, 200 + 1000, "N/A"], [50 + 500, 50, "N/A"]
        clock.now += 2.0
        second = source.collect()[0]
    finally:
        source.close()
    assert first.nvlink_rx_bytes_per_second is None  # a rate needs two readings
    assert second.nvlink_rx_bytes_per_second == pytest.approx(2000 * 1024 / 2.0)
    assert second.nvlink_tx_bytes_per_second == pytest.approx(500 * 1024 / 2.0)


def test_jobs_are_attributed_and_a_shared_gpu_is_split_by_gfx_engine_time(
    fake_amd: ModuleType, proc_root: Callable[..., Path]
) -> None:
    proc_root(100, {"SLURM_JOB_ID": "4242"})
    root = proc_root(200, {"MFUMON_JOB_ID": "infer-1"})
    alone = fake_amd.FakeAmdGpu(uuid="a", bdf="0000:01:00.0", processes=[(100, 8 * GIB, 0)])
    shared = fake_amd.FakeAmdGpu(uuid="b", bdf="0000:02:00.0", processes=[(100, GIB, 1_000), (200, GIB, 5_000)])
    source = _source(fake_amd, [alone, shared], resolver=JobResolver(root))
    try:
        first = source.collect()
        shared.processes = [(100, GIB, 1_000 + 3_000_000), (200, GIB, 5_000 + 1_000_000)]
        second = source.collect()
    finally:
        source.close()
    assert first[0].job_id == "4242" and first[0].shares is None and first[0].compute_processes == 1
    # No previous reading in the first cycle: a stated equal split (the explicit MFUMON_JOB_ID wins the tie).
    assert [(s.job_id, s.share, s.method) for s in first[1].shares] == [
        ("infer-1", 0.5, "equal_split"),
        ("4242", 0.5, "equal_split"),
    ]
    assert [(s.job_id, s.share, s.method) for s in second[1].shares] == [
        ("4242", 0.75, "process_utilization"),
        ("infer-1", 0.25, "process_utilization"),
    ]
    assert second[1].job_id == "4242"


def test_kubernetes_amd_device_ids_are_pci_addresses() -> None:
    assert device_keys("0000:C1:00.0") == ["bdf:0000:c1:00.0"]
    assert device_keys("0000:03:00.0-slice-2") == ["bdf:0000:03:00.0"]  # a time-sliced replica
    assert device_keys("GPU-1234") == ["uuid:GPU-1234"]  # NVIDIA ids unchanged


def test_a_pod_holding_an_amd_gpu_names_its_job(fake_amd: ModuleType, tmp_path: Path) -> None:
    class Pods:
        def job_for(
            self, uuid: str | None, gpu_key: str, parent_uuid: str | None = None, bdf: str | None = None
        ) -> str | None:
            return "default/trainer" if bdf == "0000:02:00.0" else None

    gpus = [fake_amd.FakeAmdGpu(uuid="a", bdf="0000:01:00.0"), fake_amd.FakeAmdGpu(uuid="b", bdf="0000:02:00.0")]
    source = _source(fake_amd, gpus, resolver=JobResolver(tmp_path, devices=Pods()))
    try:
        samples = source.collect()
    finally:
        source.close()
    assert [s.job_id for s in samples] == [None, "default/trainer"]


def test_auto_tries_amdsmi_after_nvml(fake_amd: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVIDIA driver binding on this node
    fake_amd.reset([fake_amd.FakeAmdGpu()])
    source = open_source("auto", node="n")
    try:
        assert source.name == "amdsmi" and len(source.collect()) == 1
    finally:
        source.close()
    fake_amd.reset([], init_error=fake_amd.AMDSMI_STATUS_DRIVER_NOT_LOADED)
    with pytest.raises(SourceUnavailable, match="amdsmi could not be initialised"):
        open_source("amdsmi", node="n")
