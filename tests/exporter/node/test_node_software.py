"""The node agent's software (issue 59): the driver, the CUDA version it supports and each distinct VBIOS, read once
per enumeration by the NVML, amdsmi and simulated sources, left out where the library refuses, bounded, and carried by
every batch the agent pushes."""

from __future__ import annotations

import json
import logging
from types import ModuleType

import pytest

from mfumon.exporter.node import agent
from mfumon.exporter.node.pipeline import Agent, node_software
from mfumon.exporter.node.push import Sender
from mfumon.exporter.node.sources.amdsmi import AmdSmiSource
from mfumon.exporter.node.sources.amdsmi_api import AmdSmiApi
from mfumon.exporter.node.sources.nvml import NvmlSource
from mfumon.exporter.node.sources.nvml_api import NvmlApi
from mfumon.exporter.node.sources.sim import SimSource
from mfumon.exporter.node.spool import MemorySpool
from mfumon.exporter.samples import MAX_SOFTWARE, NodeBatch, SoftwareEntry, software_entries


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _nvml(fake: ModuleType, gpus: list[object], **kwargs: object) -> NvmlSource:
    fake.reset(gpus)  # type: ignore[attr-defined]
    return NvmlSource(NvmlApi.load(), xid_poll_ms=20, **kwargs)  # type: ignore[arg-type]


def _pairs(entries: tuple[SoftwareEntry, ...]) -> list[tuple[str, str]]:
    return [(e.component, e.version) for e in entries]


def test_nvml_reads_the_driver_the_cuda_version_and_each_distinct_vbios_once(fake_nvml: ModuleType) -> None:
    gpus = [
        fake_nvml.FakeGpu(uuid="GPU-0"),
        fake_nvml.FakeGpu(uuid="GPU-1", vbios_version="96.00.74.00.01"),
        fake_nvml.FakeGpu(uuid="GPU-2"),
    ]
    source = _nvml(fake_nvml, gpus)
    fake_nvml.STATE.driver_version, fake_nvml.STATE.cuda_driver_version = "580.159.04", 13000
    try:
        source.collect()
        source.collect()
        software = source.software()
    finally:
        source.close()
    # Read at enumeration (the values the fake answered then), not per cycle: the driver changes only with a reload.
    assert _pairs(software) == [
        ("driver", "570.86.15"),
        ("cuda_driver", "13.0"),
        ("vbios", "96.00.74.00.01"),
        ("vbios", "96.00.A5.00.1A"),
    ]
    assert fake_nvml.STATE.calls["nvmlSystemGetDriverVersion"] == 1
    assert fake_nvml.STATE.calls["nvmlDeviceGetVbiosVersion"] == 3


def test_cuda_driver_version_is_major_dot_minor(fake_nvml: ModuleType) -> None:
    fake_nvml.reset([fake_nvml.FakeGpu(uuid="GPU-0")])
    fake_nvml.STATE.cuda_driver_version = 12040  # nvml.h: 1000 x major + 10 x minor
    source = NvmlSource(NvmlApi.load(), xid_poll_ms=20)
    try:
        assert ("cuda_driver", "12.4") in _pairs(source.software())
    finally:
        source.close()


def test_what_nvml_does_not_support_is_left_out_and_the_samples_go_on(
    fake_nvml: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mfumon.exporter.node.sources.nvml")
    fake_nvml.reset(
        [
            fake_nvml.FakeGpu(uuid="GPU-0", unsupported={"nvmlDeviceGetVbiosVersion"}),
            fake_nvml.FakeGpu(uuid="GPU-1", lost=True),
        ]
    )
    fake_nvml.STATE.system_unsupported = {"nvmlSystemGetCudaDriverVersion_v2"}
    source = NvmlSource(NvmlApi.load(), xid_poll_ms=20)
    try:
        samples = source.collect()
        software = source.software()
    finally:
        source.close()
    assert _pairs(software) == [("driver", "570.86.15")]  # no CUDA version, no VBIOS (unsupported, lost GPU)
    assert [s.up for s in samples] == [True, False]
    assert source.error_count == 0
    assert any("VBIOS version unavailable" in r.getMessage() for r in caplog.records)


def test_nothing_nvml_answers_leaves_no_software(fake_nvml: ModuleType) -> None:
    fake_nvml.reset([fake_nvml.FakeGpu(uuid="GPU-0", unsupported={"nvmlDeviceGetVbiosVersion"})])
    fake_nvml.STATE.system_unsupported = {
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetCudaDriverVersion_v2",
    }
    source = NvmlSource(NvmlApi.load(), xid_poll_ms=20)
    try:
        assert source.software() == ()
        assert node_software(source) is None  # the batch carries no `software` at all
        assert source.collect()[0].up
    finally:
        source.close()


def test_a_mig_gpu_reports_its_boards_vbios_once(fake_nvml: ModuleType) -> None:
    migs = [fake_nvml.FakeMig("MIG-a", "3g.40gb", 1), fake_nvml.FakeMig("MIG-b", "3g.40gb", 2)]
    source = _nvml(fake_nvml, [fake_nvml.FakeGpu(uuid="GPU-P", mig=migs, vbios_version="96.00.99.00.01")])
    try:
        assert ("vbios", "96.00.99.00.01") in _pairs(source.software())
        assert fake_nvml.STATE.calls["nvmlDeviceGetVbiosVersion"] == 1  # the board, not each instance
    finally:
        source.close()


def test_a_rescan_reads_the_software_again(fake_nvml: ModuleType) -> None:
    clock = _Clock()
    source = _nvml(fake_nvml, [fake_nvml.FakeGpu(uuid="GPU-0")], rescan_seconds=60.0, clock=clock)
    try:
        fake_nvml.STATE.driver_version = "580.159.04"  # the driver was upgraded (and reloaded)
        source.collect()
        assert ("driver", "570.86.15") in _pairs(source.software())  # not before the next enumeration
        clock.now += 61.0
        source.collect()
        assert ("driver", "580.159.04") in _pairs(source.software())
    finally:
        source.close()


def test_amdsmi_reads_the_driver_and_each_distinct_vbios(fake_amd: ModuleType) -> None:
    gpus = [
        fake_amd.FakeAmdGpu(uuid="a", bdf="0000:01:00.0"),
        fake_amd.FakeAmdGpu(uuid="b", bdf="0000:02:00.0", vbios_version=""),  # no version: its part number
        fake_amd.FakeAmdGpu(uuid="c", bdf="0000:03:00.0"),
    ]
    fake_amd.reset(gpus)
    source = AmdSmiSource(AmdSmiApi.load())
    try:
        assert _pairs(source.software()) == [
            ("driver", "6.8.5"),
            ("vbios", "022.040.003.042.000001"),
            ("vbios", "113-M3000100-102"),
        ]
        assert fake_amd.STATE.calls["amdsmi_get_gpu_driver_info"] == 1  # one driver per node
    finally:
        source.close()


def test_amdsmi_refusals_are_left_out(fake_amd: ModuleType) -> None:
    unsupported = {"amdsmi_get_gpu_driver_info", "amdsmi_get_gpu_vbios_info"}
    fake_amd.reset([fake_amd.FakeAmdGpu(unsupported=unsupported)])
    source = AmdSmiSource(AmdSmiApi.load())
    try:
        assert source.software() == ()
        assert source.collect()[0].up
    finally:
        source.close()


def test_the_simulation_reports_plausible_versions_and_upgrades() -> None:
    nvidia = SimSource(node="n", count=2)
    assert _pairs(nvidia.software()) == [("driver", "550.54.15"), ("cuda_driver", "12.4"), ("vbios", "96.00.74.00.01")]
    amd = SimSource(node="n", model="AMD Instinct MI300X", count=1)
    assert [c for c, _ in _pairs(amd.software())] == ["driver", "vbios"]
    nvidia.set_software({"driver": "560.35.03", "vbios": "96.00.74.00.01"})
    assert _pairs(nvidia.software()) == [("driver", "560.35.03"), ("vbios", "96.00.74.00.01")]


def test_software_entries_are_bounded_as_the_aggregator_bounds_them() -> None:
    raw = [
        ("driver", b"550.54.15\x00"),  # bytes from an older binding, a C string's NUL
        ("vbios", "  96.00.74.00.01 \n"),
        ("vbios", "96.00.74.00.01"),  # the same pair twice: once
        ("Driver", "1"),  # upper case: not a component name
        ("tag", ""),  # empty once stripped
        ("long", "x" * 100),
        ("unicode", "v\u00e9rsion\u2028"),
    ]
    assert _pairs(software_entries(raw)) == [
        ("driver", "550.54.15"),
        ("vbios", "96.00.74.00.01"),
        ("long", "x" * 64),
        ("unicode", "vrsion"),
    ]
    many = software_entries((f"c{i}", str(i)) for i in range(40))
    assert len(many) == MAX_SOFTWARE


def test_every_batch_carries_the_software_and_a_failing_read_costs_only_it() -> None:
    source = SimSource(node="n", count=2)
    sender = Sender("http://127.0.0.1:9", MemorySpool(1024**2))
    batch = Agent(source=source, sender=sender, node="n").collect_once()
    assert batch is not None and batch.software == source.software()
    assert batch.body()["software"][0] == {"component": "driver", "version": "550.54.15"}
    record = json.loads(batch.encode())  # what the spool keeps, and the sender replays
    assert record["body"]["software"] == batch.body()["software"]

    class Broken(SimSource):
        def software(self) -> tuple[SoftwareEntry, ...]:
            raise RuntimeError("the binding changed")

    broken = Agent(source=Broken(node="n", count=1), sender=sender, node="n").collect_once()
    assert broken is not None and broken.software is None and len(broken.gpus) == 1
    assert "software" not in broken.body()
    assert "software" not in NodeBatch("n", 1.0, (), software=()).body()


def test_once_prints_the_software(capsys: pytest.CaptureFixture[str]) -> None:
    assert agent.main(["--source", "sim", "--sim.gpus", "1", "--node", "n-sw", "--once"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert {"component": "vbios", "version": "96.00.74.00.01"} in body["software"]
