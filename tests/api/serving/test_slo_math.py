"""The SLO arithmetic on its own: shares within a target as bucket bounds, quantiles inside their bucket, the
Fréchet bounds of both targets, targets resolved job > pool > default, and the serving waterfall's split."""

from __future__ import annotations

import pytest

from mfumon.api.core.config import PoolSlo, Settings
from mfumon.api.serving import ServingTile, SloCounts, goodput, resolve_targets, serving_waterfall, split_tile
from mfumon.api.serving.histograms import Buckets, WithinTarget

# vLLM's TTFT buckets up to 2.5 s; 200 requests: 20 <= 0.1 s, 120 <= 0.25, 170 <= 0.5, 190 <= 1.0, 199 <= 2.5
TTFT = Buckets(le=(0.1, 0.25, 0.5, 1.0, 2.5), counts=(20, 120, 170, 190, 199), count=200, sum=80.0)


@pytest.mark.parametrize(
    ("target", "low", "high"),
    [
        (1.0, 190, 190),  # a bucket edge: exact
        (0.3, 120, 170),  # inside (0.25, 0.5]: somewhere between
        (0.05, 0, 20),  # below the first edge
        (5.0, 199, 200),  # past the last finite edge: the +Inf bucket's one request may or may not be within
        (2.5, 199, 199),
    ],
)
def test_share_within_a_target_is_bounded_by_the_buckets_around_it(target: float, low: int, high: int) -> None:
    assert TTFT.within(target) == WithinTarget(200, low, high)


def test_quantiles_interpolate_inside_their_bucket() -> None:
    median = TTFT.quantile(0.5)
    assert median is not None
    # rank 100 falls in (0.1, 0.25] holding ranks 21..120: 0.1 + 0.15 x 80/100
    assert median.seconds == pytest.approx(0.1 + 0.15 * 0.8)
    assert (median.lower, median.upper) == (0.1, 0.25)
    p999 = TTFT.quantile(0.999)
    assert p999 is not None and p999.open_ended and p999.seconds == 2.5  # in +Inf: the last edge, a floor
    assert Buckets(le=(1.0,), counts=(0,), count=0).quantile(0.5) is None


def test_both_targets_lie_between_the_frechet_bounds() -> None:
    counts = [SloCounts(ttft=WithinTarget(100, 95, 95), tpot=WithinTarget(100, 90, 96))]
    result = goodput(counts, 10.0)
    assert result.lower == pytest.approx(0.85)  # 0.95 + 0.90 - 1
    assert result.upper == pytest.approx(0.95)  # min(0.95, 0.96)
    assert result.requests_per_second == pytest.approx(0.85 * 100 / 10)
    assert goodput([SloCounts(ttft=WithinTarget(10, 2, 2), tpot=WithinTarget(10, 3, 3))], 10.0).lower == 0.0


def test_the_window_sums_counts_before_dividing() -> None:
    counts = [
        SloCounts(ttft=WithinTarget(10, 10, 10), tpot=WithinTarget(10, 10, 10)),
        SloCounts(ttft=WithinTarget(90, 45, 45), tpot=WithinTarget(90, 90, 90)),
    ]
    result = goodput(counts, 20.0)
    assert result.ttft_met == (0.55, 0.55)  # 55 of 100, not the mean of 1.0 and 0.5
    assert result.lower == pytest.approx(0.55) and result.upper == pytest.approx(0.55)


@pytest.mark.parametrize(
    ("counts", "engine", "reason"),
    [
        ([SloCounts(tpot=WithinTarget(5, 5, 5))], "tgi", "TGI exports no time-to-first-token histogram"),
        ([SloCounts(ttft=WithinTarget(5, 5, 5))], "vllm", "request_time_per_output_token_seconds"),
        ([SloCounts(ttft=WithinTarget(0, 0, 0), tpot=WithinTarget(0, 0, 0))], "vllm", "no requests"),
    ],
)
def test_no_goodput_says_why(counts: list[SloCounts], engine: str, reason: str) -> None:
    result = goodput(counts, 10.0, engine=engine)
    assert result.lower is None and result.upper is None and result.requests_per_second is None
    assert result.reason is not None and reason in result.reason


def test_targets_come_from_the_job_then_the_pool_then_the_defaults() -> None:
    settings = Settings(SLO_POOLS={"chat": PoolSlo(ttft_seconds=2.5, objective_ratio=0.99)})
    targets = resolve_targets({"tpot_seconds": 0.05}, "chat", settings)
    assert (targets.ttft_seconds, targets.tpot_seconds, targets.objective_ratio) == (2.5, 0.05, 0.99)
    assert targets.source == {"ttft_seconds": "pool", "tpot_seconds": "job", "objective_ratio": "pool"}
    default = resolve_targets(None, "other", settings)
    assert (default.ttft_seconds, default.tpot_seconds, default.objective_ratio) == (1.0, 0.1, 0.9)


def test_serving_tile_splits_by_time_at_the_hardware_limit() -> None:
    # 80 GPU-s serving; prefill needs 0.1 of the interval at the peak, decode 0.3 at the bandwidth, recompute 0.1
    tile = ServingTile(serving_gpu_seconds=80.0, prefill_weight=0.1, decode_weight=0.3, recompute_weight=0.1)
    assert split_tile(tile) == pytest.approx({"prefill": 16.0, "decode": 48.0, "recompute": 16.0})


def test_tgi_times_its_own_phases_and_the_rest_is_idle() -> None:
    tile = ServingTile(
        serving_gpu_seconds=80.0, interval_seconds=10.0, prefill_busy_seconds=1.0, decode_busy_seconds=4.0
    )
    assert split_tile(tile) == pytest.approx({"idle": 40.0, "prefill": 8.0, "decode": 32.0})


def test_no_token_and_nobody_asking_is_idle_not_down() -> None:
    idle = ServingTile(serving_gpu_seconds=0.0, stalled_gpu_seconds=80.0, no_requests=True)
    stuck = ServingTile(serving_gpu_seconds=0.0, stalled_gpu_seconds=80.0, no_requests=False)
    assert split_tile(idle) == {"idle": 80.0}
    assert split_tile(stuck) == {}  # requests waiting and no token: the engine is down, the rest of the total
    unknown_phases = ServingTile(serving_gpu_seconds=80.0)
    assert split_tile(unknown_phases) == {"busy": 80.0}


def test_down_is_what_the_reports_did_not_place_so_the_categories_add_up() -> None:
    waterfall = dict(serving_waterfall(100.0, {"idle": 20.0, "decode": 50.0}))
    assert waterfall == {"down": 30.0, "idle": 20.0, "prefill": 0.0, "decode": 50.0, "recompute": 0.0, "busy": 0.0}
    assert sum(waterfall.values()) == 100.0
