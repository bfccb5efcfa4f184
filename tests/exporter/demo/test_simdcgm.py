"""The demo's dcgm node: simulated GPUs printed in DCGM 4.7's canonical names come back through the real parser."""

from __future__ import annotations

import pytest

from mfumon.exporter.demo.simdcgm import SimDcgmExporter, SimDcgmSource
from mfumon.exporter.node.sources.sim import SimSource, SimWorkload

_GAUGES = (
    "sm_active",
    "sm_occupancy",
    "dram_active",
    "utilization",
    "power_watts",
    "temperature_celsius",
    "sm_clock_hz",
    "max_sm_clock_hz",
    "nvlink_tx_bytes_per_second",
    "pcie_rx_bytes_per_second",
    "pcie_link_gen",
    "pcie_link_width_max",
    "remapped_rows_correctable_total",
    "pcie_replays_total",
)


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _node() -> tuple[SimSource, SimDcgmSource, _Clock]:
    clock = _Clock()
    sim = SimSource(node="gpu-h100-06", count=2, clock=clock)
    sim.assign(0, SimWorkload(profile="training", target_mfu=0.4, job_id="train-1"))
    return sim, SimDcgmSource(SimDcgmExporter(sim, hostname="gpu-h100-06"), clock=clock), clock


def test_canonical_names_read_back_as_the_simulated_counters() -> None:
    sim, source, _ = _node()
    truth = {s.uuid: s for s in sim.sample_at(1_000.0)}
    read = source.collect()
    assert [s.uuid for s in read] == list(truth)
    for sample in read:
        expected = truth[sample.uuid]
        assert sample.job_id == expected.job_id
        assert sample.name == "NVIDIA H100 80GB HBM3"
        for field in _GAUGES:
            assert getattr(sample, field) == pytest.approx(getattr(expected, field), rel=1e-9), field
        assert sample.memory_total_bytes == pytest.approx(expected.memory_total_bytes, abs=1)
        assert sample.memory_used_bytes == pytest.approx(expected.memory_used_bytes, abs=1)
        assert sample.throttle_reasons == expected.throttle_reasons
        assert sample.energy_joules_total is not None


def test_the_second_scrape_takes_tensor_activity_from_cycle_counters() -> None:
    sim, source, clock = _node()
    first = {s.index: s for s in source.collect()}
    assert not first[0].tensor_active_exact  # one reading: no interval yet, the sampled ratio
    clock.now += 10.0
    second = {s.index: s for s in source.collect()}
    busy = second[0]
    assert busy.tensor_active_exact == 1
    # The counters advanced by the ratio sampled at the second scrape, so their difference gives it back.
    assert busy.tensor_active == pytest.approx(sim.sample_at(clock.now)[0].tensor_active, rel=1e-6)
    assert busy.hmma_active == pytest.approx(busy.tensor_active, rel=1e-9)
    assert second[1].tensor_active == pytest.approx(0.0, abs=1e-9)  # the idle GPU's pipes did nothing
