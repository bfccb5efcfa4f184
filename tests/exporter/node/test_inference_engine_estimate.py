"""The engines' own MFU counters (``--enable-mfu-metrics``) -> the mean GPU's FLOPs and bytes over an interval.

The expositions are rendered by prometheus_client from the engines' own declarations: vLLM 0.34.0
``vllm/v1/metrics/perf.py`` (``PerfMetricsProm``, labels ``model_name``, ``engine``; children created per engine at
start, so they print 0 before any step) and SGLang 0.5.23 ``srt/observability/metrics_collector.py`` (labels
``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank``, ``moe_ep_rank``, ``dp_rank``; children created on the
first increment).
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from mfumon.exporter.node.inference.engines import EngineReading, parse_engine_metrics
from mfumon.exporter.node.inference.window import serving_interval

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
_HELP = "(for Model Flops Utilization calculations)."  # vLLM's spelling; SGLang writes "FLOPs"
Estimate = tuple[float, float, float]  # FLOPs, bytes read, bytes written per GPU, cumulative


class FakeVllm:
    """vLLM's /metrics with one series per engine (data-parallel replica), children created at start."""

    def __init__(self, engines: tuple[str, ...] = ("0",)) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        registry = self.registry
        self.tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=registry
        )
        running = Gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", labels, registry=registry
        )
        self.estimates = [
            Counter(name, f"Estimated number of {what} per GPU {_HELP}", labels, registry=registry)
            for name, what in (
                ("vllm:estimated_flops_per_gpu_total", "floating point operations"),
                ("vllm:estimated_read_bytes_per_gpu_total", "bytes read from memory"),
                ("vllm:estimated_write_bytes_per_gpu_total", "bytes written to memory"),
            )
        ]
        for engine in engines:
            self.tokens.labels(MODEL, engine)
            running.labels(MODEL, engine).set(8)
            for counter in self.estimates:
                counter.labels(MODEL, engine)

    def step(self, engine: str, estimate: Estimate, generated: float) -> FakeVllm:
        """One engine's counters grow (PerfMetricsProm.observe, and the tokens it made)."""
        self.tokens.labels(MODEL, engine).inc(generated)
        for counter, value in zip(self.estimates, estimate, strict=True):
            counter.labels(MODEL, engine).inc(value)
        return self

    def reading(self) -> EngineReading:
        return parse_engine_metrics(generate_latest(self.registry).decode())


class FakeSglang:
    """SGLang's scheduler metrics; every scheduler reports (--enable-metrics-for-all-schedulers), tp ranks too."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "dp_rank"]
        registry = self.registry
        self.realtime = Counter(
            "sglang:realtime_tokens_total",
            "Total number of tokens processed (updated on each log interval). mode: prefill_compute, "
            "prefill_cache, decode.",
            [*labels, "mode"],
            registry=registry,
        )
        self.running = Gauge("sglang:num_running_reqs", "The number of running requests.", labels, registry=registry)
        help_ = "(for Model FLOPs Utilization calculations)."
        self.estimates = [
            Counter(name, f"Estimated number of {what} per GPU {help_}", labels, registry=registry)
            for name, what in (
                ("sglang:estimated_flops_per_gpu_total", "floating point operations"),
                ("sglang:estimated_read_bytes_per_gpu_total", "bytes read from memory"),
                ("sglang:estimated_write_bytes_per_gpu_total", "bytes written to memory"),
            )
        ]

    def step(self, dp: int, tp: int, estimate: Estimate, decoded: float) -> FakeSglang:
        """One scheduler's increment_estimated_perf (a child appears with its first positive increment)."""
        child = (MODEL, "unified", str(tp), "0", "0", str(dp))
        self.running.labels(*child).set(4)
        if tp == 0:
            self.realtime.labels(*child, "decode").inc(decoded)
        for counter, value in zip(self.estimates, estimate, strict=True):
            if value > 0:
                counter.labels(*child).inc(value)
        return self

    def reading(self) -> EngineReading:
        return parse_engine_metrics(generate_latest(self.registry).decode())


def test_vllm_names_are_read_as_the_engine_estimate() -> None:
    reading = FakeVllm().step("0", (1e15, 2e12, 3e11), 1000).reading()
    assert reading.counters["engine_flops_per_gpu"] == 1e15
    assert reading.counters["engine_read_bytes_per_gpu"] == 2e12
    assert reading.counters["engine_write_bytes_per_gpu"] == 3e11
    assert reading.sources["engine_flops_per_gpu"] == "vllm:estimated_flops_per_gpu_total"
    assert "engine_flops_per_gpu" in reading.created  # prometheus_client prints *_created: a restart signal


def test_vllm_interval_rates_the_counters_by_hand() -> None:
    # 10 s: FLOPs per GPU 1e15 -> 5e15 (+4e15), read 2e12 -> 4e12 (+2e12), written 3e11 -> 4e11 (+1e11).
    vllm = FakeVllm().step("0", (1e15, 2e12, 3e11), 1000)
    before = vllm.reading()
    after = vllm.step("0", (4e15, 2e12, 1e11), 2000).reading()
    window = serving_interval(before, after, 10.0)
    assert not window.restarted
    assert window.engine_flops_per_gpu == pytest.approx(4e15)
    assert window.engine_bytes_per_gpu == pytest.approx(2.1e12)  # read + written, as vLLM's own GB/s
    assert window.engine_estimator == "vllm"
    fields = window.report_fields()
    assert fields["engine_flops_per_gpu"] == pytest.approx(4e15)
    assert fields["engine_estimator"] == "vllm"
    assert fields["decode_tokens"] == 2000


def test_vllm_data_parallel_engines_give_the_mean_gpu() -> None:
    # engine 0 +4e15, engine 1 +6e15, each per GPU of its own replica: the mean GPU did 5e15.
    vllm = FakeVllm(engines=("0", "1"))
    before = vllm.reading()
    after = vllm.step("0", (4e15, 1e12, 1e11), 1000).step("1", (6e15, 3e12, 1e11), 1000).reading()
    assert after.replicas == 2
    window = serving_interval(before, after, 10.0)
    assert window.engine_flops_per_gpu == pytest.approx(5e15)
    assert window.engine_bytes_per_gpu == pytest.approx(2.1e12)  # (1e12 + 1e11 + 3e12 + 1e11) / 2


def test_a_restart_counts_the_new_counters_from_zero() -> None:
    before = FakeVllm().step("0", (9e15, 9e12, 9e11), 9000).reading()
    after = FakeVllm().step("0", (1e15, 1e12, 1e11), 500).reading()  # a new process: counters fell
    window = serving_interval(before, after, 10.0)
    assert window.restarted
    assert window.engine_flops_per_gpu == pytest.approx(1e15)
    assert window.engine_bytes_per_gpu == pytest.approx(1.1e12)


def test_counters_that_stay_at_zero_while_tokens_are_made_are_not_sent() -> None:
    # vLLM with --enable-mfu-metrics that could not parse the model's config: the children print 0 for ever.
    vllm = FakeVllm().step("0", (0, 0, 0), 1000)
    before = vllm.reading()
    after = vllm.step("0", (0, 0, 0), 2000).reading()
    window = serving_interval(before, after, 10.0)
    assert window.decode_tokens == 2000
    assert window.engine_flops_per_gpu is None and window.engine_bytes_per_gpu is None
    assert window.engine_estimator is None
    assert not {"engine_flops_per_gpu", "engine_bytes_per_gpu", "engine_estimator"} & set(window.report_fields())


def test_an_idle_interval_sends_a_measured_zero() -> None:
    vllm = FakeVllm().step("0", (1e15, 1e12, 1e11), 1000)
    window = serving_interval(vllm.reading(), vllm.reading(), 10.0)
    assert window.decode_tokens == 0
    assert window.engine_flops_per_gpu == 0.0 and window.engine_estimator == "vllm"


def test_an_engine_without_the_flag_sends_no_estimate() -> None:
    registry = CollectorRegistry()
    tokens = Counter(
        "vllm:generation_tokens", "Number of generation tokens processed.", ["model_name", "engine"], registry=registry
    )
    tokens.labels(MODEL, "0").inc(100)
    reading = parse_engine_metrics(generate_latest(registry).decode())
    assert "engine_flops_per_gpu" not in reading.counters
    window = serving_interval(reading, reading, 10.0)
    assert window.engine_flops_per_gpu is None and "engine_flops_per_gpu" not in window.report_fields()


def test_sglang_tensor_ranks_count_once_and_data_parallel_ranks_average() -> None:
    # dp 0 (tp 0 and 1 print the same per-GPU figure) +2e15; dp 1 +4e15: the mean GPU did 3e15.
    sglang = FakeSglang()
    for dp, tp in ((0, 0), (0, 1), (1, 0)):
        sglang.step(dp, tp, (1e15, 1e12, 1e11), 50)
    before = sglang.reading()
    sglang.step(0, 0, (2e15, 1e12, 1e11), 400).step(0, 1, (2e15, 1e12, 1e11), 400).step(1, 0, (4e15, 3e12, 3e11), 400)
    after = sglang.reading()
    assert after.engine == "sglang" and after.replicas == 2
    assert after.sources["engine_flops_per_gpu"] == "sglang:estimated_flops_per_gpu_total"
    window = serving_interval(before, after, 10.0)
    assert not window.restarted
    assert window.decode_tokens == 800
    assert window.engine_flops_per_gpu == pytest.approx(3e15)
    assert window.engine_bytes_per_gpu == pytest.approx(2.2e12)  # ((1e12 + 1e11) + (3e12 + 3e11)) / 2
    assert window.engine_estimator == "sglang"


def test_sglang_counters_first_seen_count_from_zero() -> None:
    # SGLang creates a child on its first positive increment: before any step, none is printed.
    sglang = FakeSglang().step(0, 0, (0, 0, 0), 0)
    before = sglang.reading()
    assert "engine_flops_per_gpu" not in before.counters
    after = sglang.step(0, 0, (2e15, 1e12, 1e11), 300).reading()
    window = serving_interval(before, after, 10.0)
    assert window.engine_flops_per_gpu == pytest.approx(2e15)
    assert window.engine_bytes_per_gpu == pytest.approx(1.1e12)
