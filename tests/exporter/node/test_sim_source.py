"""Simulated GPUs: deterministic with a seed, plausible per profile, moving smoothly over time."""

from __future__ import annotations

import itertools
import statistics

import pytest

from mfumon.exporter.errors import ConfigError
from mfumon.exporter.node.sources.sim import GPU_MODELS, SimSource, SimWorkload, job_mfu_at, smooth_noise

T0 = 1_800_000_000.0  # a fixed wall-clock time


def _source(profile: str, mfu: float = 0.0, *, seed: int = 1, model: str = "NVIDIA H100 80GB HBM3") -> SimSource:
    work = SimWorkload(profile=profile, target_mfu=mfu, job_id=f"job-{profile}", checkpoint_every_seconds=None)
    return SimSource(node="sim-1", model=model, count=8, seed=seed, workload=work)


def test_same_seed_same_samples_other_seed_other_samples() -> None:
    a = _source("training", 0.45, seed=3).sample_at(T0)
    b = _source("training", 0.45, seed=3).sample_at(T0)
    c = _source("training", 0.45, seed=4).sample_at(T0)
    assert a == b
    assert [s.uuid for s in a] != [s.uuid for s in c]
    assert [s.tensor_active for s in a] != [s.tensor_active for s in c]
    assert len({s.uuid for s in a}) == 8


def test_training_tensor_activity_follows_the_target_mfu() -> None:
    source = _source("training", 0.45)
    tensor = [s.tensor_active for t in range(0, 3600, 30) for s in source.sample_at(T0 + t)]
    assert statistics.mean(tensor) == pytest.approx(0.45 * 1.15, rel=0.05)
    assert min(tensor) > 0.45 * 1.15 * 0.9 and max(tensor) < 0.45 * 1.15 * 1.1
    sample = source.sample_at(T0)[0]
    assert sample.utilization is not None and sample.utilization > 0.9
    assert sample.power_watts is not None and 400 < sample.power_watts <= GPU_MODELS[sample.name].power_limit_watts
    assert sample.job_id == "job-training"


def test_profiles_differ_the_way_real_workloads_do() -> None:
    comm = _source("comm_bound", 0.2).sample_at(T0)[0]
    infer = _source("inference", 0.07, model="NVIDIA A100-SXM4-80GB").sample_at(T0)[0]
    idle = _source("idle").sample_at(T0)[0]
    train = _source("training", 0.45).sample_at(T0)[0]
    assert comm.nvlink_tx_bytes_per_second > 3 * train.nvlink_tx_bytes_per_second  # comm-bound: links busy
    assert comm.tensor_active < train.tensor_active
    assert infer.utilization > 0.6 and infer.tensor_active < 0.2  # "busy" by nvidia-smi, low MFU
    assert infer.max_sm_clock_hz == pytest.approx(1410e6)
    assert (idle.tensor_active, idle.utilization, idle.sm_active) == (0.0, 0.0, 0.0)
    assert idle.throttle_reasons == ("gpu_idle",)
    assert idle.power_watts == pytest.approx(70.0, rel=0.05)
    assert idle.sm_clock_hz < train.sm_clock_hz


def test_values_move_smoothly_over_time() -> None:
    source = _source("training", 0.45)
    series = [source.sample_at(T0 + t)[0].tensor_active for t in range(0, 1200, 5)]
    steps = [abs(b - a) for a, b in itertools.pairwise(series)]
    assert statistics.pstdev(series) > 0.003  # it moves
    assert max(steps) < 0.05  # but no jumps (under 10 % of the level) between 5 s samples
    noise = [smooth_noise(7, 1, T0 + t, 60.0) for t in range(0, 600, 3)]
    assert all(-1.0 <= v <= 1.0 for v in noise) and max(noise) - min(noise) > 0.5


def test_checkpoints_dip_periodically() -> None:
    work = SimWorkload(profile="training", target_mfu=0.45, job_id="ckpt", checkpoint_every_seconds=600.0)
    values = [job_mfu_at(work, 0, T0 + t) for t in range(0, 1800, 5)]
    dips = [v for v in values if v < 0.2]
    assert 0 < len(dips) < len(values) * 0.1


def test_lost_gpu_and_bad_configuration() -> None:
    source = _source("training", 0.45)
    source.set_lost(2)
    samples = source.sample_at(T0)
    assert not samples[2].up and samples[2].to_json().keys() == {"uuid", "index", "name", "up", "job_id"}
    assert samples[1].up
    with pytest.raises(ConfigError):
        SimSource(node="n", model="NVIDIA Imaginary 9000")
    with pytest.raises(ConfigError):
        SimWorkload(profile="mining")
