"""Each GPU's mean power from its energy counter (issue 60): differences between two views, with a power sample where
the counter cannot be trusted, and a node's draw split by job and state."""

from __future__ import annotations

from typing import Any

import pytest

from mfumon.api.schemas.nodes import GpuSample
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.energy import COUNTER, POWER, derive_power
from mfumon.api.state.views import NodeView, build_node_view, gpu_views
from mfumon.mfu._mfu import default_peak_table
from tests.utils.factories import gpu

RESOLVER = DeviceResolver(default_peak_table())


def view(t: float, *gpus: dict[str, Any]) -> NodeView:
    samples = [GpuSample.model_validate(g) for g in gpus]
    built = gpu_views("n1", t, samples, RESOLVER)
    return build_node_view(
        name="n1", pool=None, last_seen_at=t, last_sample_timestamp=t, samples_received=1, updated_at=t, gpus=built
    )


def powers(node: NodeView) -> list[tuple[float | None, str | None]]:
    return [(g.draw_watts, g.draw_method) for g in node.gpus]


def test_the_counter_difference_over_the_sample_gap_is_the_power() -> None:
    first = view(100.0, gpu(0, energy_joules_total=5_000.0, power_watts=300.0))
    derive_power(None, first)
    assert powers(first) == [(300.0, POWER)]  # nothing to difference yet: the sample, estimated
    second = view(110.0, gpu(0, energy_joules_total=9_000.0, power_watts=300.0))
    derive_power(first, second)
    assert powers(second) == [(pytest.approx(400.0), COUNTER)]  # the mean over the gap, not the instant's 300 W


@pytest.mark.parametrize(
    ("then", "now", "why"),
    [
        (5_000.0, 100.0, "the counter went down: the driver reloaded"),
        (5_000.0, 5_000.0 + 10 * 9_000.0, "9 kW is no GPU's power: a corrupt counter"),
    ],
)
def test_a_counter_that_cannot_be_trusted_falls_back_to_the_power_sample(then: float, now: float, why: str) -> None:
    first = view(100.0, gpu(0, energy_joules_total=then))
    derive_power(None, first)
    second = view(110.0, gpu(0, energy_joules_total=now, power_watts=250.0))
    derive_power(first, second)
    assert powers(second) == [(250.0, POWER)], why


def test_the_same_sample_again_keeps_its_power_and_a_gpu_with_neither_has_none() -> None:
    first = view(100.0, gpu(0, energy_joules_total=0.0), gpu(1, power_watts=None))
    second = view(110.0, gpu(0, energy_joules_total=4_000.0), gpu(1, power_watts=None))
    derive_power(first, second)
    again = view(110.0, gpu(0, energy_joules_total=4_000.0), gpu(1, power_watts=None))
    derive_power(second, again)
    assert powers(again) == [(pytest.approx(400.0), COUNTER), (None, None)]
    assert again.draw is not None and again.draw.jobs == {} and again.draw.unattributed.gpus_without == 1


def test_a_nodes_draw_goes_to_its_jobs_by_share_and_to_its_idle_and_busy_gpus() -> None:
    shares = [
        {"job_id": "a", "share": 0.75, "method": "accounting"},
        {"job_id": "b", "share": 0.25, "method": "accounting"},
    ]
    idle = {"utilization": 0.0, "sm_active": 0.0, "tensor_active": 0.0, "compute_processes": 0}
    node = view(
        100.0,
        gpu(0, job_id="a", power_watts=400.0),
        gpu(1, job_id="a", compute_processes=2, shares=shares, power_watts=300.0),
        gpu(2, power_watts=200.0, compute_processes=1),
        gpu(3, power_watts=60.0, **idle),
    )
    derive_power(None, node)
    draw = node.draw
    assert draw is not None
    # The shared GPU's 300 W split 3:1 by the shares.
    assert draw.jobs["a"].watts == pytest.approx(400.0 + 225.0) and draw.jobs["b"].watts == pytest.approx(75.0)
    assert draw.jobs["a"].estimated_watts == pytest.approx(625.0)  # power samples: estimated
    assert draw.unattributed.watts == 200.0 and draw.idle.watts == 60.0


def test_a_mig_instance_gets_its_profiles_share_of_its_boards_energy() -> None:
    def instance(t: float, board_joules: float | None, board_watts: float | None = 700.0) -> NodeView:
        fields = {"mig_profile": "3g.40gb", "power_watts": None, "board_power_watts": board_watts}
        if board_joules is not None:
            fields["board_energy_joules_total"] = board_joules
        return view(t, gpu(0, **fields))

    first = instance(100.0, 10_000.0)
    derive_power(None, first)
    assert powers(first) == [(pytest.approx(700.0 * 3 / 7), "mig_fraction")]  # no difference yet: the board's power
    second = instance(110.0, 17_000.0)  # the board drew 700 W
    derive_power(first, second)
    assert powers(second) == [(pytest.approx(300.0), "mig_fraction")]  # 3 of the H100's 7 compute slices
    assert second.draw is not None and second.draw.jobs == {}
    assert second.draw.unattributed.estimated_watts == pytest.approx(300.0)  # apportioned, not measured: estimated
    unknown = view(100.0, gpu(0, name="Mystery GPU 9000", mig_profile="1g.5gb", power_watts=None))
    derive_power(None, unknown)
    assert powers(unknown) == [(None, None)]  # no share known: no energy rather than a guess
