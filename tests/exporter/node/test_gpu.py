"""The real NVML path on a real GPU (``-m gpu``); skipped where NVML does not initialise.

What they check: every device enumerates with an NVML identity; each counter that is present is in its physical
range; on Hopper or newer the GPM metrics (tensor/SM activity) are readable and move under a bf16 matmul load; the
compute process of a job is attributed through its environment (``MFUMON_JOB_ID``); the health counters (energy,
PCIe replays, remapped rows, NVLink errors, last XID) are present and in range where NVML answers them, and left out
exactly where NVML answers NOT_SUPPORTED (checked against pynvml called directly).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from mfumon.exporter.node.attribution import JobResolver
from mfumon.exporter.node.sources.nvml import GPM_MIN_INTERVAL_S, NvmlSource
from mfumon.exporter.node.sources.nvml_api import NvmlApi
from mfumon.exporter.samples import THROTTLE_REASONS, GpuSample

pytestmark = pytest.mark.gpu

_LOAD = """
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
"""


def _nvml_or_skip() -> None:
    try:
        import pynvml
    except ImportError:
        pytest.skip("nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"NVML does not initialise here: {exc}")
    pynvml.nvmlShutdown()


@pytest.fixture
def source() -> Iterator[NvmlSource]:
    _nvml_or_skip()
    src = NvmlSource(NvmlApi.load(), JobResolver("/proc"))
    yield src
    src.close()


def _torch_cuda_or_skip() -> None:
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")


def _check_ranges(sample: GpuSample) -> None:
    assert sample.up, f"GPU {sample.uuid} reported lost"
    assert sample.uuid.startswith(("GPU-", "MIG-")) and sample.name.startswith("NVIDIA")
    if sample.memory_total_bytes is not None:
        assert 1e9 < sample.memory_total_bytes < 1e12
        assert 0 <= (sample.memory_used_bytes or 0) <= sample.memory_total_bytes
    for ratio in ("utilization", "sm_active", "sm_occupancy", "tensor_active", "dram_active"):
        value = getattr(sample, ratio)
        assert value is None or 0.0 <= value <= 1.0, (ratio, value)
    if sample.power_watts is not None:
        assert 5 < sample.power_watts < 1500
    if sample.temperature_celsius is not None:
        assert 5 < sample.temperature_celsius < 110
    if sample.max_sm_clock_hz is not None:
        assert 5e8 < sample.max_sm_clock_hz < 4e9
        assert 0 < (sample.sm_clock_hz or 0) <= sample.max_sm_clock_hz * 1.05
    assert set(sample.throttle_reasons or ()) <= set(THROTTLE_REASONS)
    for count in ("xid_errors_total", "ecc_uncorrected_total", "ecc_corrected_total"):
        value = getattr(sample, count)
        assert value is None or value >= 0
    counts = (
        "pcie_replays_total",
        "remapped_rows_correctable_total",
        "remapped_rows_uncorrectable_total",
        "nvlink_crc_flit_errors_total",
        "nvlink_crc_data_errors_total",
        "nvlink_replay_errors_total",
        "nvlink_recovery_errors_total",
    )
    for count in counts:
        value = getattr(sample, count)
        assert value is None or 0 <= value < 2**63, (count, value)
    for flag in ("row_remap_pending", "row_remap_failure"):
        assert getattr(sample, flag) in (None, 0, 1)
    if sample.energy_joules_total is not None:  # NVML answers mJ since the driver loaded: J here
        assert 0 < sample.energy_joules_total < 1e12
    assert sample.last_xid is None or 0 <= sample.last_xid < 1000


def test_counters_present_and_in_range(source: NvmlSource) -> None:
    time.sleep(GPM_MIN_INTERVAL_S * 3)
    samples = source.collect()
    assert samples, "NVML listed no GPU"
    assert len({s.uuid for s in samples}) == len(samples)
    for sample in samples:
        _check_ranges(sample)
        if sample.mig_profile is None:  # whole GPUs answer the basic counters on any datacenter part
            for name in ("utilization", "memory_used_bytes", "power_watts", "temperature_celsius", "sm_clock_hz"):
                assert getattr(sample, name) is not None, f"{name} missing on {sample.name}"


def test_gpm_is_readable_on_hopper(source: NvmlSource) -> None:
    hopper = [d for d in source.devices if d.gpm_supported]
    if not hopper:
        pytest.skip("no GPM-capable (Hopper or newer) GPU")
    time.sleep(GPM_MIN_INTERVAL_S * 3)
    by_uuid = {s.uuid: s for s in source.collect()}
    for device in hopper:
        sample = by_uuid[device.uuid]
        assert sample.tensor_active is not None and sample.sm_active is not None, sample
        assert sample.dram_active is not None and sample.sm_occupancy is not None


def test_bf16_matmul_load_shows_in_tensor_activity_and_is_attributed(source: NvmlSource) -> None:
    _torch_cuda_or_skip()
    if not any(d.gpm_supported for d in source.devices):
        pytest.skip("tensor activity needs GPM (Hopper or newer)")
    env = {**os.environ, "MFUMON_JOB_ID": "gpu-test-job"}
    load = subprocess.Popen([sys.executable, "-c", _LOAD, "8"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert load.stdout is not None and load.stdout.readline().strip() == "ready"
        source.collect()  # starts a GPM interval inside the load
        time.sleep(2.0)
        busy = [s for s in source.collect() if s.job_id == "gpu-test-job"]
    finally:
        load.terminate()
        load.wait(timeout=30)
        if load.stdout is not None:
            load.stdout.close()
    assert busy, "the load's compute process was not attributed to MFUMON_JOB_ID"
    sample = busy[0]
    assert sample.tensor_active is not None and sample.tensor_active > 0.2, sample
    assert sample.sm_active is not None and sample.sm_active > 0.5, sample
    assert (sample.utilization or 0) > 0.5 and (sample.power_watts or 0) > 150


def _nvml_answers(name: str, *args: object) -> bool:
    import pynvml

    try:
        getattr(pynvml, name)(*args)
    except pynvml.NVMLError:
        return False
    return True


def test_health_counters_present_exactly_where_nvml_answers(source: NvmlSource) -> None:
    import pynvml

    time.sleep(GPM_MIN_INTERVAL_S * 3)
    first = {s.uuid: s for s in source.collect()}
    time.sleep(1.0)
    second = {s.uuid: s for s in source.collect()}
    pynvml.nvmlInit()
    try:
        for device in source.devices:
            if device.mig_profile is not None:
                continue
            sample, later, handle = first[device.uuid], second[device.uuid], device.handle
            _check_ranges(sample)
            energy = _nvml_answers("nvmlDeviceGetTotalEnergyConsumption", handle)
            assert (sample.energy_joules_total is not None) == energy, sample
            if energy:  # a counter: never goes down while the driver stays loaded
                assert later.energy_joules_total >= sample.energy_joules_total
            replays = _nvml_answers("nvmlDeviceGetPcieReplayCounter", handle)
            assert (sample.pcie_replays_total is not None) == replays, sample
            remaps = _nvml_answers("nvmlDeviceGetRemappedRows", handle)
            assert (sample.row_remap_pending is not None) == remaps, sample
            assert (sample.remapped_rows_uncorrectable_total is not None) == remaps, sample
            # NVLink error totals: per-field answers (nvmlReturn 0 = answered), as the exporter asks for them.
            values = pynvml.nvmlDeviceGetFieldValues(handle, [38, 45, 52, 59, 161, 162, 163])
            answered = {int(v.fieldId) for v in values if v.nvmlReturn == pynvml.NVML_SUCCESS}
            expected = {
                "nvlink_crc_flit_errors_total": bool(answered & {38, 163}),
                "nvlink_crc_data_errors_total": 45 in answered,
                "nvlink_replay_errors_total": bool(answered & {52, 161}),
                "nvlink_recovery_errors_total": bool(answered & {59, 162}),
            }
            present = {name: getattr(sample, name) is not None for name in expected}
            assert present == expected, (device.name, answered)
    finally:
        pynvml.nvmlShutdown()
