"""The demo's simulated serving engines: engine-true latency histograms and the scenarios they tell.

Each engine is driven by a fake clock and read as text, the way the collector reads it (``prometheus_client``'s
parser). The expected buckets are copied here from the engines' source, not imported from the simulation:
vLLM 0.12 ``vllm/v1/metrics/loggers.py``, SGLang 0.5 ``python/sglang/srt/metrics/collector.py`` (main at
sgl-project/sglang@00ae9c1590d2), TGI 3.3.7 ``router/src/server.rs`` (35 buckets, 0.0001 x 1.5^k).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mfumon.exporter.demo import cli as demo
from mfumon.exporter.demo.simcluster import ClusterSpec, default_serving
from mfumon.exporter.demo.simserving import SimServingJob, SimulatedEngine
from mfumon.exporter.node.inference.endpoints import parse_endpoint

VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0]
VLLM_TTFT += [80.0, 160.0, 640.0, 2560.0]
VLLM_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
VLLM_REQUEST = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0]
VLLM_REQUEST += [480.0, 960.0, 1920.0, 7680.0]
SGLANG_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGLANG_E2E = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400]
SGLANG_ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100]
SGLANG_ITL += [0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000]
SGLANG_QUEUE = [0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500]
SGLANG_QUEUE += [600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000]
TGI_DURATION = [0.0001 * 1.5 ** (k + 1) for k in range(35)]

ENGINE_BUCKETS = {
    "vllm:time_to_first_token_seconds": VLLM_TTFT,
    "vllm:inter_token_latency_seconds": VLLM_TPOT,
    "vllm:request_time_per_output_token_seconds": VLLM_TPOT,
    "vllm:e2e_request_latency_seconds": VLLM_REQUEST,
    "vllm:request_queue_time_seconds": VLLM_REQUEST,
    "vllm:request_inference_time_seconds": VLLM_REQUEST,
    "vllm:request_prefill_time_seconds": VLLM_REQUEST,
    "vllm:request_decode_time_seconds": VLLM_REQUEST,
    "sglang:time_to_first_token_seconds": SGLANG_TTFT,
    "sglang:inter_token_latency_seconds": SGLANG_ITL,
    "sglang:e2e_request_latency_seconds": SGLANG_E2E,
    "sglang:queue_time_seconds": SGLANG_QUEUE,
    "tgi_request_duration": TGI_DURATION,
    "tgi_request_validation_duration": TGI_DURATION,
    "tgi_request_queue_duration": TGI_DURATION,
    "tgi_request_inference_duration": TGI_DURATION,
    "tgi_request_mean_time_per_token_duration": TGI_DURATION,
}
#: name -> (type, help text) as the engines declare them
ENGINE_FAMILIES = {
    "vllm:time_to_first_token_seconds": ("histogram", "Histogram of time to first token in seconds."),
    "vllm:inter_token_latency_seconds": ("histogram", "Histogram of inter-token latency in seconds."),
    "vllm:request_time_per_output_token_seconds": (
        "histogram",
        "Histogram of time_per_output_token_seconds per request.",
    ),
    "vllm:e2e_request_latency_seconds": ("histogram", "Histogram of e2e request latency in seconds."),
    "vllm:request_queue_time_seconds": ("histogram", "Histogram of time spent in WAITING phase for request."),
    "vllm:request_inference_time_seconds": ("histogram", "Histogram of time spent in RUNNING phase for request."),
    "vllm:num_preemptions": ("counter", "Cumulative number of preemption from the engine."),
    "vllm:request_success": ("counter", "Count of successfully processed requests."),
    "sglang:time_to_first_token_seconds": ("histogram", "Histogram of time to first token in seconds."),
    "sglang:inter_token_latency_seconds": ("histogram", "Histogram of inter-token latency in seconds."),
    "sglang:e2e_request_latency_seconds": ("histogram", "Histogram of End-to-end request latency in seconds"),
    "sglang:queue_time_seconds": ("histogram", "Histogram of queueing time in seconds."),
    "sglang:num_retracted_requests": ("counter", "Total number of retracted requests."),
    "tgi_request_duration": ("histogram", "Request duration"),
    "tgi_request_queue_duration": ("histogram", "Request queue duration"),
    "tgi_request_inference_duration": ("histogram", "Request inference duration"),
    "tgi_request_mean_time_per_token_duration": ("histogram", "Mean time per token per request"),
    "tgi_request_success": ("counter", "Number of successful requests"),
}

START = 1_000_000.0
STEP = 5.0


@dataclass
class Histogram:
    les: list[float]  # finite bounds
    cumulative: list[float]  # at each bound, then +Inf
    count: float
    sum: float


@dataclass
class Scrape:
    at: float  # seconds since the engine started
    text: str
    types: dict[str, str]
    helps: dict[str, str]
    histograms: dict[str, Histogram]  # unlabelled by series: each family has one series here
    samples: dict[str, float]  # sample name -> value (one series each)


def parse(at: float, text: str) -> Scrape:
    types: dict[str, str] = {}
    helps: dict[str, str] = {}
    histograms: dict[str, Histogram] = {}
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        types[family.name], helps[family.name] = family.type, family.documentation
        if family.type == "histogram":
            series = {tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")) for s in family.samples}
            for labels in series:
                mine = [s for s in family.samples if {k: v for k, v in s.labels.items() if k != "le"} == dict(labels)]
                buckets = [(float(s.labels["le"]), s.value) for s in mine if s.name.endswith("_bucket")]
                count = sum(s.value for s in mine if s.name.endswith("_count"))
                total = sum(s.value for s in mine if s.name.endswith("_sum"))
                key = family.name if len(series) == 1 else f"{family.name}{dict(labels)}"
                histograms[key] = Histogram(
                    [le for le, _ in buckets if not math.isinf(le)], [v for _, v in buckets], count, total
                )
        for sample in family.samples:
            samples.setdefault(sample.name, 0.0)
            samples[sample.name] += sample.value
    return Scrape(at, text, types, helps, histograms, samples)


def run(job: SimServingJob, seconds: float = 300.0, step: float = STEP, seed: int = 0) -> list[Scrape]:
    """Scrape the engine every ``step`` seconds of a fake clock for ``seconds``."""
    now = [START]
    engine = SimulatedEngine(job, seed, clock=lambda: now[0])
    scrapes = [parse(0.0, engine.render().decode())]
    while now[0] - START < seconds:
        now[0] += step
        scrapes.append(parse(now[0] - START, engine.render().decode()))
    return scrapes


def job(job_id: str) -> SimServingJob:
    return next(j for j in default_serving() if j.job_id == job_id)


def intervals(scrapes: list[Scrape], name: str) -> Iterator[tuple[float, float, Histogram]]:
    """(start, end, the histogram's increase) per scrape interval."""
    for before, after in itertools.pairwise(scrapes):
        a, b = before.histograms[name], after.histograms[name]
        cumulative = [y - x for x, y in zip(a.cumulative, b.cumulative, strict=True)]
        yield before.at, after.at, Histogram(b.les, cumulative, b.count - a.count, b.sum - a.sum)


def share_within(h: Histogram, target: float) -> float:
    """Share of the observations at most ``target`` (a bucket edge)."""
    return h.cumulative[h.les.index(target)] / h.count


@pytest.fixture(scope="module")
def scrapes() -> dict[str, list[Scrape]]:
    return {j.job_id: run(j) for j in default_serving()}


def test_every_engine_kind_is_in_the_demo() -> None:
    assert {j.engine for j in default_serving()} == {"vllm", "sglang", "tgi"}


def test_histograms_are_cumulative_and_never_go_down(scrapes: dict[str, list[Scrape]]) -> None:
    for job_id, runs in scrapes.items():
        for scrape in runs:
            for name, h in scrape.histograms.items():
                assert all(b >= a for a, b in itertools.pairwise(h.cumulative)), (job_id, name, scrape.at)
                assert h.cumulative[-1] == h.count, (job_id, name)
        for before, after in itertools.pairwise(runs):
            for name, h in after.histograms.items():
                grew = zip(before.histograms[name].cumulative, h.cumulative, strict=True)
                assert all(b >= a for a, b in grew), (job_id, name, after.at)
                assert h.sum >= before.histograms[name].sum
        assert runs[-1].histograms, job_id


def test_names_types_help_texts_and_buckets_are_the_engines(scrapes: dict[str, list[Scrape]]) -> None:
    seen = set()
    for runs in scrapes.values():
        last = runs[-1]
        for name, (kind, doc) in ENGINE_FAMILIES.items():
            if name in last.types:
                assert (last.types[name], last.helps[name]) == (kind, doc), name
                seen.add(name)
        for name, buckets in ENGINE_BUCKETS.items():
            if name in last.histograms:
                assert last.histograms[name].les == pytest.approx(buckets, rel=1e-12), name
                seen.add(name)
    assert seen == set(ENGINE_FAMILIES) | set(ENGINE_BUCKETS)
    tgi = scrapes["serve-rag-32b"][-1]
    # TGI's bounds are printed as its Rust recorder prints them (the shortest text that reads back the same).
    assert 'tgi_request_queue_duration_bucket{le="0.00015000000000000001"}' in tgi.text
    assert 'le="145.61096060497135"' in tgi.text


def test_each_engine_prints_only_what_it_has(scrapes: dict[str, list[Scrape]]) -> None:
    tgi = scrapes["serve-rag-32b"][-1]
    assert not [n for n in tgi.types if "first_token" in n or "preempt" in n]  # TGI has neither
    sglang = scrapes["serve-eval-8b"][-1]
    assert not [n for n in sglang.types if "time_per_output_token" in n]  # SGLang 0.5: no per-request TPOT
    assert not [n for n in sglang.samples if n.endswith("_created")]  # multiprocess mode
    vllm = scrapes["serve-chat-70b"][-1]
    assert "vllm:time_per_output_token_seconds" not in vllm.types  # hidden from 0.12 on
    reasons = {s.labels["finished_reason"] for f in text_string_to_metric_families(vllm.text) for s in f.samples
               if s.name == "vllm:request_success_total"}  # fmt: skip
    assert reasons == {"stop", "length", "abort", "error"}


def test_healthy_chat_meets_both_default_targets(scrapes: dict[str, list[Scrape]]) -> None:
    last = scrapes["serve-chat-70b"][-1].histograms
    ttft = share_within(last["vllm:time_to_first_token_seconds"], 1.0)
    tpot = share_within(last["vllm:request_time_per_output_token_seconds"], 0.1)
    assert ttft + tpot - 1 > 0.9  # at least this share met both (Frechet lower bound)
    for _, _, itl in intervals(scrapes["serve-chat-70b"], "vllm:inter_token_latency_seconds"):
        assert itl.sum / itl.count < 0.06


def test_badly_batched_code_misses_ttft_from_queueing(scrapes: dict[str, list[Scrape]]) -> None:
    last = scrapes["serve-code-8b"][-1].histograms
    assert last["vllm:time_to_first_token_seconds"].count >= 20
    assert share_within(last["vllm:time_to_first_token_seconds"], 1.0) < 0.1
    queue = last["vllm:request_queue_time_seconds"]
    assert queue.sum / queue.count > 30  # a dozen waiting for a batch of two
    assert share_within(last["vllm:request_time_per_output_token_seconds"], 0.1) == 1.0  # decoding itself is fast


def test_long_prompts_make_tpot_and_itl_spike_while_they_come(scrapes: dict[str, list[Scrape]]) -> None:
    docs, runs = job("serve-docs-8b"), scrapes["serve-docs-8b"]
    assert docs.slo_json() == {"ttft_seconds": 2.5, "tpot_seconds": 0.05}
    period, burst = docs.long_prompt_every_seconds, docs.long_prompt_burst_seconds

    def inside(start: float, end: float) -> bool:
        return all(docs.long_prompts_at(t) for t in (start + 0.01, end - 0.01))

    bursts = late = calm = 0
    for (start, end, tpot), (_, _, itl) in zip(
        intervals(runs, "vllm:request_time_per_output_token_seconds"),
        intervals(runs, "vllm:inter_token_latency_seconds"),
        strict=True,
    ):
        if inside(start, end):
            bursts += 1
            assert itl.sum / itl.count > 0.1, (start, end)  # a long prompt's chunk rides many steps
            if end % period > period - burst / 4:  # the requests decoding through it finish
                late += 1
                assert tpot.sum / tpot.count > 0.1, (start, end)
                assert share_within(tpot, 0.1) < 0.5
        elif not any(docs.long_prompts_at(t) for t in range(int(start) - 15, int(end) + 1)):
            calm += 1  # well away from a burst: the target holds
            assert share_within(tpot, 0.05) == 1.0 and itl.sum / itl.count < 0.03, (start, end)
    assert bursts >= 10 and late >= 2 and calm >= 20
    # Over the whole run the job misses its own TPOT target for more than 10 % of requests.
    assert share_within(runs[-1].histograms["vllm:request_time_per_output_token_seconds"], 0.05) < 0.9
    # The healthy chat job sees no such spike.
    for _, _, tpot in intervals(scrapes["serve-chat-70b"], "vllm:request_time_per_output_token_seconds"):
        assert share_within(tpot, 0.1) == 1.0


def test_preemptions_grow_only_where_the_kv_cache_is_full(scrapes: dict[str, list[Scrape]]) -> None:
    for job_id, runs in scrapes.items():
        names = ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total")
        preempted = [next((s.samples[n] for n in names if n in s.samples), None) for s in runs]
        if job_id == "serve-agent-32b":
            grown = [p or 0.0 for p in preempted]
            assert grown[-1] == pytest.approx(0.15 * 300, abs=2)
            assert all(b >= a for a, b in itertools.pairwise(grown))
            assert min(s.samples["vllm:kv_cache_usage_perc"] for s in runs[1:]) >= 0.95
            # the preempted requests' decode time carries the requeue and the recompute
            decode = runs[-1].histograms["vllm:request_decode_time_seconds"]
            assert decode.sum / decode.count > 499 * 0.055
        elif job_id == "serve-rag-32b":
            assert preempted == [None] * len(runs)  # TGI exports no preemption counter
        else:
            assert set(preempted) == {0.0}, job_id


def test_evaluation_endpoint_has_idle_stretches(scrapes: dict[str, list[Scrape]]) -> None:
    evaluation, runs = job("serve-eval-8b"), scrapes["serve-eval-8b"]
    idle = [(a, b) for a, b in itertools.pairwise(runs) if not evaluation.busy_at((a.at + b.at) / 2)]
    assert len(idle) >= 12  # 60 s of every 150 s, scraped every 5 s
    for before, after in idle:
        assert after.samples["sglang:num_requests_total"] == before.samples["sglang:num_requests_total"]
        assert after.samples["sglang:realtime_tokens_total"] == before.samples["sglang:realtime_tokens_total"]
        assert after.samples["sglang:num_running_reqs"] == after.samples["sglang:num_queue_reqs"] == 0
    busy = runs[10]
    assert busy.samples["sglang:num_running_reqs"] > 0 and busy.histograms["sglang:time_to_first_token_seconds"].count


def test_the_same_seed_and_clock_give_the_same_text() -> None:
    def text(seed: int) -> list[str]:
        lines = run(job("serve-docs-8b"), seconds=120.0, step=7.0, seed=seed)[-1].text.splitlines()
        return [line for line in lines if "_created" not in line]  # prometheus_client stamps these itself

    assert text(3) == text(3)
    assert text(3) != text(4)


def test_the_engines_serve_their_text_over_http() -> None:
    engines = [SimulatedEngine(j).start() for j in default_serving()]
    try:
        for engine in engines:
            response = httpx.get(engine.url, timeout=5)
            assert response.status_code == 200 and response.text.startswith("#")
    finally:
        for engine in engines:
            engine.stop()


def test_a_serving_job_with_its_own_targets_is_registered_with_them() -> None:
    bodies: dict[str, dict[str, object]] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        bodies[request.url.path] = json.loads(request.content)
        return httpx.Response(200, json={})

    cluster = ClusterSpec(nodes=(), jobs=(), serving=default_serving())
    with httpx.Client(base_url="http://aggregator", transport=httpx.MockTransport(handler)) as client:
        demo._register_jobs(client, cluster)
    assert bodies == {
        "/v1/jobs/serve-docs-8b": {
            "kind": "inference",
            "name": "llama3-8b document Q&A on long prompts (vLLM)",
            "team": "search",
            "pool": "infer-a100",
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.05},
        }
    }


def test_every_serving_job_is_an_endpoint_the_exporter_accepts() -> None:
    for serving in default_serving():
        endpoint = parse_endpoint(f"http://127.0.0.1:1/metrics,{serving.endpoint_options()}")
        assert (endpoint.job_id, endpoint.labels["name"]) == (serving.job_id, serving.name)
