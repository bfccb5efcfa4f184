"""Serving findings: what a serving job's engine counters and latency histograms (``JobFacts.serving``) say about why
its GPUs do not serve more requests within their latency targets. Inference jobs only.

Each finding's evidence names the figures it read, the engine metrics they come from (``engine_metrics``), and the
threshold it passed; its advice uses the engine's own flags (:mod:`mfumon.api.diagnosis.serving_advice`).

GPU-seconds at stake come from the serving waterfall (``ServingFacts.waterfall``: ``down``, ``idle``, ``prefill``,
``decode``, ``recompute``), each rule's docstring says how: a category where the cause has one of its own (idle
replicas: ``idle``; KV-cache saturation: ``recompute``), else the phase the cause slows times the share of it the
cause costs (the waiting requests' share of the decode time a larger batch would have served them in, ...). So they
rank against each other and against the shared rules (throttling, failures) in the same unit.
"""

from __future__ import annotations

from statistics import fmean

from mfumon.api.diagnosis.facts import Finding, JobFacts, ServingFacts, ServingIntervalFacts
from mfumon.api.diagnosis.kinds import INFERENCE, applies_to
from mfumon.api.diagnosis.serving_advice import (
    BATCH_UNDERFILLED,
    DECODE_MEMORY_BOUND,
    IDLE_REPLICAS,
    KV_CACHE_SATURATED,
    PREFILL_INTERFERENCE,
    SLO_TPOT,
    SLO_TTFT_QUEUED,
    SLO_TTFT_SLOW,
    metrics,
    say,
)

#: Decode MBU (mean over the window) at which decode is bound by memory bandwidth: production engines reach about
#: 60-80% of the datasheet bandwidth at best (scattered KV-cache pages, kernel efficiency), so from 60% on a larger
#: batch or a scheduler setting has little left to win, and only more bandwidth or fewer bytes help.
MBU_NEAR_LIMIT = 0.6
#: Mean requests waiting over the window that make a standing queue: one or more on average is not a passing burst
#: (a burst of a few requests drains within one interval and averages well under one over five minutes).
WAITING_QUEUE = 1.0
#: Mean KV-cache use under which the cache has room: under half full, it could hold at least twice the running
#: batch's context, so memory is not what keeps waiting requests out.
KV_ROOM = 0.5
#: Highest KV-cache use that counts as full: vLLM preempts at 100% of its blocks, but the gauge is sampled once per
#: scrape, so the peak seen over the window reads lower; with preemptions counted, 90% is the cache running out.
KV_FULL = 0.9
#: Preemptions in the window that show the cache ran out: one is already a request recomputed from its prompt.
MIN_PREEMPTIONS = 1
#: TPOT in heavy-prefill intervals over light-prefill ones that shows prompts stretching the decode steps: TPOT
#: varies 10-30% between intervals with batch size and context alone; half as much again is beyond that.
PREFILL_SLOWDOWN = 1.5
#: Intervals needed to compare heavy and light prefill: a third of six is two reports on each side, fewer would
#: compare single reports.
MIN_INTERVALS = 6
#: The share of intervals on each side of the comparison (the top and the bottom third by prefill load).
THIRD = 1 / 3
#: Idle share of the allocated GPU-seconds (no request running or waiting, no token made) worth scaling down for.
IDLE_SHARE = 0.5
#: GPUs from which scaling down is possible without going to zero (one GPU can only be scaled to zero).
MIN_GPUS = 2
#: Requests finished per GPU per second under which GPUs serve almost nothing (one request per 100 s per GPU) ...
LOW_REQUESTS_PER_GPU_SECOND = 0.01
#: ... while fewer than this many requests run per GPU on average (so long generations that keep a batch busy, and
#: finish rarely, do not count as idle).
LOW_RUNNING_PER_GPU = 1.0


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _bounds(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else [round(pair[0], 4), round(pair[1], 4)]


def _seconds(serving: ServingFacts, category: str) -> float:
    return serving.waterfall.get(category, 0.0)


def _running(serving: ServingFacts) -> float | None:
    return serving.requests_running if serving.requests_running is not None else serving.batch_size


def _queue_share(serving: ServingFacts) -> float | None:
    """The waiting requests' share of all in the engine, when they make a standing queue; else None."""
    waiting = serving.requests_waiting
    if waiting is None or waiting < WAITING_QUEUE:
        return None
    return waiting / (waiting + (_running(serving) or 0.0))


def _tpot_missed(serving: ServingFacts) -> float | None:
    """The share of requests certainly over the TPOT target, when the TPOT objective is missed; else None.

    From the histogram's bounds when there are some (1 - the upper bound of the share within the target, if that
    upper bound is under the objective); else from the p90: a p90 over the target puts at least 10% over it.
    """
    met, objective = serving.tpot_met, serving.objective_ratio
    if met is not None and objective is not None:
        return 1.0 - met[1] if met[1] < objective else None
    p90, target = serving.tpot_p90_seconds, serving.tpot_target_seconds
    if p90 is not None and target is not None and p90 > target:
        return 0.1
    return None


@applies_to(INFERENCE)
def decode_memory_bound(facts: JobFacts) -> Finding | None:
    """Decode MBU near the device's limit while TPOT misses its target, or requests queue with no KV-cache room to
    admit them: the GPUs' memory bandwidth is the limit, not the batch or the scheduler. (A queue while the cache has
    room is ``batch_underfilled``: the batch can still grow.)

    GPU-seconds at stake: decode time x the larger of the share of requests certainly over the TPOT target and the
    waiting requests' share (what more bandwidth would have served in time).
    """
    serving = facts.serving
    if serving is None or serving.mbu is None or serving.mbu < MBU_NEAR_LIMIT:
        return None
    room = serving.kv_cache_usage is not None and serving.kv_cache_usage < KV_ROOM
    missed, queue = _tpot_missed(serving), None if room else _queue_share(serving)
    shortfall = max((s for s in (missed, queue) if s is not None), default=None)
    if shortfall is None:
        return None
    decode = _seconds(serving, "decode")
    evidence = {
        "mbu": _round(serving.mbu),
        "mbu_threshold": MBU_NEAR_LIMIT,
        "decode_mfu": _round(serving.decode_mfu),
        "decode_gpu_seconds": _round(decode, 1),
        "tpot_p90_seconds": _round(serving.tpot_p90_seconds),
        "tpot_target_seconds": serving.tpot_target_seconds,
        "tpot_met_ratio": _bounds(serving.tpot_met),
        "objective_ratio": serving.objective_ratio,
        "requests_over_tpot_target": _round(missed),
        "requests_waiting": _round(serving.requests_waiting, 2),
        "requests_running": _round(serving.requests_running, 2),
        "batch_size": _round(serving.batch_size, 2),
        "engine": serving.engine,
        "engine_metrics": metrics(serving.engine, "tpot", "requests_waiting", "requests_running"),
    }
    return Finding("decode_memory_bound", decode * shortfall, evidence, say(DECODE_MEMORY_BOUND, serving.engine))


@applies_to(INFERENCE)
def batch_underfilled(facts: JobFacts) -> Finding | None:
    """Requests wait while the KV cache has room: the engine's cap on concurrent requests keeps the batch small.

    GPU-seconds at stake: decode time x the waiting requests' share of all requests in the engine. Decode is bound
    by memory bandwidth, so a step serves a larger batch in nearly the same time: the waiting requests would have
    ridden along in steps that ran anyway.
    """
    serving = facts.serving
    if serving is None or serving.kv_cache_usage is None or serving.kv_cache_usage >= KV_ROOM:
        return None
    share = _queue_share(serving)
    if share is None:
        return None
    running = [i.requests_running for i in serving.intervals if i.requests_running is not None]
    evidence = {
        "requests_waiting": _round(serving.requests_waiting, 2),
        "requests_running": _round(serving.requests_running, 2),
        "max_requests_running": _round(max(running), 2) if running else None,
        "batch_size": _round(serving.batch_size, 2),
        "kv_cache_usage": _round(serving.kv_cache_usage),
        "max_kv_cache_usage": _round(serving.max_kv_cache_usage),
        "waiting_share": _round(share),
        "thresholds": {"requests_waiting": WAITING_QUEUE, "kv_cache_usage_below": KV_ROOM},
        "engine": serving.engine,
        "engine_metrics": metrics(serving.engine, "requests_waiting", "requests_running", "kv_cache_usage"),
    }
    stake = _seconds(serving, "decode") * share
    return Finding("batch_underfilled", stake, evidence, say(BATCH_UNDERFILLED, serving.engine))


def _max_kv(serving: ServingFacts) -> float | None:
    seen = [i.kv_cache_usage for i in serving.intervals if i.kv_cache_usage is not None]
    if serving.max_kv_cache_usage is not None:
        seen.append(serving.max_kv_cache_usage)
    return max(seen) if seen else None


@applies_to(INFERENCE)
def kv_cache_saturated(facts: JobFacts) -> Finding | None:
    """The KV cache runs full and the engine preempts running requests, which it recomputes from their prompts.

    GPU-seconds at stake: the waterfall's ``recompute``; without it, prefill time x preemptions / finished requests
    (each preemption prefills a request again).
    """
    serving = facts.serving
    if serving is None or serving.preemptions is None or serving.preemptions < MIN_PREEMPTIONS:
        return None
    peak = _max_kv(serving)
    if peak is None or peak < KV_FULL:
        return None
    recompute = _seconds(serving, "recompute")
    requests = (serving.requests_per_second or 0.0) * serving.window_seconds
    if recompute <= 0 and requests > 0:
        recompute = _seconds(serving, "prefill") * min(1.0, serving.preemptions / requests)
    evidence = {
        "max_kv_cache_usage": _round(peak),
        "kv_cache_usage": _round(serving.kv_cache_usage),
        "preemptions": serving.preemptions,
        "window_seconds": serving.window_seconds,
        "requests_finished": _round(requests, 1),
        "recompute_gpu_seconds": _round(recompute, 1),
        "thresholds": {"max_kv_cache_usage": KV_FULL, "preemptions": MIN_PREEMPTIONS},
        "engine": serving.engine,
        "engine_metrics": metrics(serving.engine, "kv_cache_usage", "preemptions"),
    }
    return Finding("kv_cache_saturated", recompute, evidence, say(KV_CACHE_SATURATED, serving.engine))


def _pairs(intervals: tuple[ServingIntervalFacts, ...]) -> tuple[str, str, list[tuple[float, float]]] | None:
    """(load figure, latency figure, [(load, latency)]) over the intervals that have both, with enough of them.

    Load: prefill tokens per second, else the mean prompt; latency: TPOT p90, else ITL p99 (never mixed).
    """
    for latency in ("tpot_p90_seconds", "itl_p99_seconds"):
        for load in ("prefill_tokens_per_second", "mean_prompt_tokens"):
            pairs = [
                (x, y)
                for i in intervals
                if (x := getattr(i, load)) is not None and (y := getattr(i, latency)) is not None
            ]
            if len(pairs) >= MIN_INTERVALS:
                return load, latency, pairs
    return None


@applies_to(INFERENCE)
def prefill_interference(facts: JobFacts) -> Finding | None:
    """TPOT in the heaviest-prefill third of the intervals is 1.5x or more that of the lightest third, and over the
    TPOT target there: prompts computed in the decode steps stretch them.

    GPU-seconds at stake: decode time x a third (the heavy intervals' share) x (1 - light TPOT / heavy TPOT): the
    part of the heavy intervals' decode time the prompts added.
    """
    serving = facts.serving
    if serving is None or serving.tpot_target_seconds is None:
        return None
    target, found = serving.tpot_target_seconds, _pairs(serving.intervals)
    if found is None:
        return None
    load, latency, pairs = found
    pairs.sort(key=lambda p: p[0])
    side = max(1, int(len(pairs) * THIRD))
    light, heavy = pairs[:side], pairs[-side:]
    if light[-1][0] >= heavy[0][0]:
        return None  # the load does not vary: nothing to compare
    light_latency, heavy_latency = fmean(y for _, y in light), fmean(y for _, y in heavy)
    if light_latency <= 0 or heavy_latency < light_latency * PREFILL_SLOWDOWN or heavy_latency <= target:
        return None
    evidence = {
        "latency": latency,
        "heavy_prefill_latency_seconds": _round(heavy_latency),
        "light_prefill_latency_seconds": _round(light_latency),
        "ratio": _round(heavy_latency / light_latency),
        "prefill_load": load,
        "heavy_prefill_load": _round(fmean(x for x, _ in heavy), 1),
        "light_prefill_load": _round(fmean(x for x, _ in light), 1),
        "intervals": len(pairs),
        "intervals_per_side": side,
        "tpot_target_seconds": target,
        "threshold_ratio": PREFILL_SLOWDOWN,
        "engine": serving.engine,
        "engine_metrics": metrics(serving.engine, "tpot" if latency == "tpot_p90_seconds" else "itl"),
    }
    stake = _seconds(serving, "decode") * THIRD * (1.0 - light_latency / heavy_latency)
    return Finding("prefill_interference", stake, evidence, say(PREFILL_INTERFERENCE, serving.engine))


@applies_to(INFERENCE)
def idle_replicas(facts: JobFacts) -> Finding | None:
    """Two or more GPUs that mostly serve nothing: half the allocation idle, or almost no requests per GPU.

    GPU-seconds at stake: the waterfall's ``idle``.
    """
    serving = facts.serving
    if serving is None:
        return None
    gpus = serving.gpus if serving.gpus is not None else float(len(facts.gpus))
    if gpus < MIN_GPUS:
        return None
    idle, total = _seconds(serving, "idle"), sum(serving.waterfall.values())
    idle_share = idle / total if total > 0 else None
    rps, running = serving.requests_per_second, _running(serving)
    per_gpu = rps / gpus if rps is not None else None
    running_per_gpu = running / gpus if running is not None else None
    quiet = (
        per_gpu is not None
        and running_per_gpu is not None
        and per_gpu < LOW_REQUESTS_PER_GPU_SECOND
        and running_per_gpu < LOW_RUNNING_PER_GPU
    )
    if not quiet and (idle_share is None or idle_share < IDLE_SHARE):
        return None
    names = metrics(serving.engine, "requests_waiting", "requests_running")
    evidence = {
        "gpus": _round(gpus, 2),
        "idle_gpu_seconds": _round(idle, 1),
        "idle_share_of_allocated": _round(idle_share),
        "requests_per_second": _round(rps),
        "requests_per_gpu_second": _round(per_gpu, 5),
        "requests_running_per_gpu": _round(running_per_gpu, 3),
        "thresholds": {
            "idle_share": IDLE_SHARE,
            "requests_per_gpu_second": LOW_REQUESTS_PER_GPU_SECOND,
            "requests_running_per_gpu": LOW_RUNNING_PER_GPU,
        },
        "engine": serving.engine,
        "engine_metrics": names,
    }
    named = f" ({', '.join(names.values())})" if names else ""
    return Finding("idle_replicas", idle, evidence, IDLE_REPLICAS.format(metrics=named))


@applies_to(INFERENCE)
def slo_misses(facts: JobFacts) -> Finding | None:
    """The share of requests within both latency targets is certainly below the objective (its upper bound is).

    Which target misses more (the larger share certainly over it) picks the advice: TTFT with a queue is capacity,
    TTFT without one is the prompts themselves, TPOT is the batch or the bytes per step.

    GPU-seconds at stake: working time (prefill + decode + recompute) x (objective - the goodput's upper bound): the
    time serving requests that missed beyond what the objective allows.
    """
    serving = facts.serving
    if serving is None or serving.goodput is None or serving.objective_ratio is None:
        return None
    upper = serving.goodput[1]
    if upper >= serving.objective_ratio:
        return None
    ttft_miss = 1.0 - serving.ttft_met[1] if serving.ttft_met is not None else 0.0
    tpot_miss = 1.0 - serving.tpot_met[1] if serving.tpot_met is not None else 0.0
    worse = "ttft" if ttft_miss >= tpot_miss else "tpot"
    queued = _queue_share(serving) is not None
    advice = SLO_TPOT if worse == "tpot" else SLO_TTFT_QUEUED if queued else SLO_TTFT_SLOW
    working = sum(_seconds(serving, c) for c in ("prefill", "decode", "recompute"))
    evidence = {
        "goodput_ratio": _bounds(serving.goodput),
        "objective_ratio": serving.objective_ratio,
        "ttft_met_ratio": _bounds(serving.ttft_met),
        "tpot_met_ratio": _bounds(serving.tpot_met),
        "misses_more": worse,
        "ttft_p90_seconds": _round(serving.ttft_p90_seconds),
        "ttft_target_seconds": serving.ttft_target_seconds,
        "tpot_p90_seconds": _round(serving.tpot_p90_seconds),
        "tpot_target_seconds": serving.tpot_target_seconds,
        "itl_p99_seconds": _round(serving.itl_p99_seconds),
        "requests_waiting": _round(serving.requests_waiting, 2),
        "window_seconds": serving.window_seconds,
        "engine": serving.engine,
        "engine_metrics": metrics(serving.engine, "ttft", "tpot", "requests_waiting"),
    }
    stake = working * (serving.objective_ratio - upper)
    return Finding("slo_misses", stake, evidence, say(advice, serving.engine))


SERVING_FINDINGS = (
    decode_memory_bound,
    batch_underfilled,
    kv_cache_saturated,
    prefill_interference,
    idle_replicas,
    slo_misses,
)
