"""The real NVML path on a real GPU (``-m gpu``); skipped where NVML does not initialise.

What they check: every device enumerates with an NVML identity; each counter that is present is in its physical
range; on Hopper or newer the GPM metrics (tensor/SM activity) are readable and move under a bf16 matmul load; the
compute process of a job is attributed through its environment (``MFUMON_JOB_ID``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from exporter.node.attribution import JobResolver
from exporter.node.sources.nvml import GPM_MIN_INTERVAL_S, NvmlSource
from exporter.node.sources.nvml_api import NvmlApi
from exporter.samples import THROTTLE_REASONS, GpuSample

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
