"""What a serving engine's ``/metrics`` says, in one vocabulary: token counters, scheduler gauges, KV-cache size.

The text is parsed with ``prometheus_client.parser`` (which names every counter sample ``<name>_total``, even TGI's
``tgi_request_count``). Each engine's metric names are mapped onto standard keys here and nowhere else (the tables
`_COUNTERS` and `_GAUGES` below, newer names first):

- tokens: vLLM ``vllm:prompt_tokens_total``/``generation_tokens_total`` (V0 and V1 engines), prefix-cache hits
  ``vllm:prefix_cache_hits_total`` (older V1: ``gpu_prefix_cache_hits``, counted in *blocks* up to 0.7 as its help
  text says, so multiplied by ``cache_config_info``'s block size); SGLang ``sglang:realtime_tokens_total{mode}``
  (prefill_compute, decode; older: ``prompt_tokens_total`` - ``cached_tokens_total``, ``generation_tokens_total``);
  TGI the sums of its per-request histograms ``tgi_request_input_length`` and ``tgi_request_generated_tokens``.
- finished requests (mean prompt and output length): vLLM ``vllm:request_{prompt,generation}_tokens``, SGLang
  ``prompt_tokens_total`` / ``num_requests_total``, TGI the same two histograms.
- decode steps and busy time per phase: TGI ``tgi_batch_inference_count{method}``, ``tgi_batch_forward_duration``.
- scheduler: running (``vllm:num_requests_running``, ``sglang:num_running_reqs``, ``tgi_batch_current_size``), waiting
  (``vllm:num_requests_waiting``, ``sglang:num_queue_reqs``, ``tgi_queue_size``), KV-cache use
  (``vllm:kv_cache_usage_perc``, V0 ``gpu_cache_usage_perc``; ``sglang:token_usage``; TGI
  ``tgi_batch_current_max_tokens`` / ``tgi_batch_max_total_tokens``, which TGI 3.3 sets before its recorder exists, so
  real TGI does not print it) and capacity in tokens (vLLM ``cache_config_info`` num_gpu_blocks x block_size,
  ``sglang:max_total_num_tokens``), KV tokens in use (``sglang:num_used_tokens``; vLLM usage x capacity), SGLang's
  ``decode_sum_seq_lens`` (the context being decoded).
- the engine's own MFU estimate, printed with ``--enable-mfu-metrics`` (vLLM 0.17+, SGLang 0.5.10+): counters of
  estimated FLOPs and bytes read and written *per GPU* of one replica, ``{vllm,sglang}:estimated_flops_per_gpu_total``
  and ``estimated_{read,write}_bytes_per_gpu_total``. Summed over replicas like the others; the interval divides by
  the replicas (window.py), which gives the mean GPU's.

- preemptions (counter): vLLM ``vllm:num_preemptions_total``; SGLang ``sglang:num_retracted_requests_total`` (a
  counter from 0.5.8, absent in 0.5.5; the older ``num_retracted_reqs`` and 0.5.1's ``total_retracted_reqs`` are gauges
  and not read: a gauge's change is no count). TGI has none (3.3.6 ``router/src``: no preemption counter).
- request running time (counter): vLLM ``vllm:request_inference_time_seconds_sum``, each finished request's first
  SCHEDULED to last token, preemptions included (``vllm/v1/metrics/stats.py``, 0.28.0). SGLang and TGI: none.
- latency histograms (`_HISTOGRAMS`, read into :class:`~mfumon.exporter.node.inference.histograms.LatencyHistogram`),
  named by what one observation is. The engines' help texts do not say it; their source does (versions read, from
  the released wheels and TGI's repository):

  - ``ttft``, time to first token, one per request: vLLM ``vllm:time_to_first_token_seconds`` (V0
    ``vllm/engine/metrics.py`` 0.5.0, V1 ``vllm/v1/metrics/loggers.py`` 0.10.2-0.28.0), SGLang
    ``sglang:time_to_first_token_seconds`` (``tokenizer_manager.py`` at a request's first output, 0.3.6-0.5.23; split
    by an ``is_streaming`` label from 0.5.20, not in 0.5.16, summed here). TGI records none (3.3.6
    ``router/src/server.rs`` has validation, queue, inference, per-token mean and total durations per request, no
    first-token time), so a TGI report has no ``ttft_histogram``.
  - ``tpot``, one per finished request, its mean time per output token: vLLM
    ``vllm:request_time_per_output_token_seconds`` (0.11.0+, decode time / (generated tokens - 1), ``stats.py``),
    SGLang ``sglang:request_time_per_output_token_seconds`` (0.5.22+, the same formula, requests finished by stop or
    length; absent in 0.5.20), TGI ``tgi_request_mean_time_per_token_duration`` (inference time / generated tokens;
    the inference time starts when the request joins a batch, so its prefill is in it and the value sits a little
    above a TPOT that leaves the first token out).
  - ``itl``, one per generated token after the first: vLLM ``vllm:inter_token_latency_seconds`` (0.10.2+) and the
    older ``vllm:time_per_output_token_seconds``, which despite its name is the same per-token interval (V0 0.5.0
    ``llm_engine.py``: one per decode step of each sequence group; V1 0.10.2 and 0.11.0 observe the same values into
    both, its help reads "DEPRECATED: Use vllm:inter_token_latency_seconds"; gone in 0.28.0). It is never read as
    ``tpot``. SGLang ``sglang:inter_token_latency_seconds`` (0.4.5+: a streamed chunk's interval split over its
    tokens, the bucket incremented by their number).
  - ``queue``, one per request, the wait before its first forward pass: vLLM ``vllm:request_queue_time_seconds``
    (first QUEUED to first SCHEDULED), SGLang ``sglang:queue_time_seconds`` (0.5.5+), TGI
    ``tgi_request_queue_duration``.
  - not read: SGLang 0.3-0.4.4's ``sglang:time_per_output_token_seconds``, observed at every streamed chunk after the
    first (the request's running mean so far) and once more when a request ends (0.3.6: every request; 0.4.3: the
    non-streaming ones), so neither one per request nor one per token (the 0.4 docs capture counts 7,400,757 of them
    against 11,008 first tokens).

Series of one engine are combined across replicas the engine labels (vLLM's ``engine``, SGLang's ``dp_rank``): counters
and request gauges add up, usage is averaged, histograms add up bucket by bucket; series repeated per tensor/pipeline
rank are counted once (max; for a histogram, the rank's series with the most observations).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from mfumon.exporter.node.inference.histograms import LatencyHistogram

__all__ = ["ENGINES", "HISTOGRAMS", "EngineReading", "detect_engine", "parse_engine_metrics"]

ENGINES: tuple[str, ...] = ("vllm", "sglang", "tgi")
_PREFIXES = {"vllm": "vllm:", "sglang": "sglang:", "tgi": "tgi_"}
#: labels that tell an engine's model replicas apart (data parallel)
_REPLICA_LABELS = {"vllm": "engine", "sglang": "dp_rank"}

Selector = tuple[str, Mapping[str, str]]  # sample name, labels it must carry

#: standard counter -> candidate samples per engine, first present wins (newer names first)
_COUNTERS: dict[str, dict[str, tuple[Selector, ...]]] = {
    "prompt_tokens": {
        "vllm": (("vllm:prompt_tokens_total", {}),),
        "sglang": (("sglang:prompt_tokens_total", {}),),
        "tgi": (("tgi_request_input_length_sum", {}),),
    },
    "computed_prompt_tokens": {
        "vllm": (("vllm:prompt_tokens_by_source_total", {"source": "local_compute"}),),
        "sglang": (("sglang:realtime_tokens_total", {"mode": "prefill_compute"}),),
    },
    "cached_prompt_tokens": {
        "vllm": (("vllm:prefix_cache_hits_total", {}), ("vllm:gpu_prefix_cache_hits_total", {})),
        "sglang": (("sglang:cached_tokens_total", {}),),
    },
    "generation_tokens": {
        "vllm": (("vllm:generation_tokens_total", {}),),
        "sglang": (("sglang:realtime_tokens_total", {"mode": "decode"}), ("sglang:generation_tokens_total", {})),
        "tgi": (("tgi_request_generated_tokens_sum", {}),),
    },
    "finished_prompt_tokens": {
        "vllm": (("vllm:request_prompt_tokens_sum", {}),),
        "sglang": (("sglang:prompt_tokens_total", {}),),
        "tgi": (("tgi_request_input_length_sum", {}),),
    },
    "finished_prompt_requests": {
        "vllm": (("vllm:request_prompt_tokens_count", {}),),
        "sglang": (("sglang:num_requests_total", {}),),
        "tgi": (("tgi_request_input_length_count", {}),),
    },
    "finished_generation_tokens": {
        "vllm": (("vllm:request_generation_tokens_sum", {}),),
        "sglang": (("sglang:generation_tokens_total", {}),),
        "tgi": (("tgi_request_generated_tokens_sum", {}),),
    },
    "finished_generation_requests": {
        "vllm": (("vllm:request_generation_tokens_count", {}),),
        "sglang": (("sglang:num_requests_total", {}),),
        "tgi": (("tgi_request_generated_tokens_count", {}),),
    },
    "decode_steps": {"tgi": (("tgi_batch_inference_count_total", {"method": "decode"}),)},
    # the engine's own estimate (--enable-mfu-metrics), per GPU of one replica: see the module docstring
    "engine_flops_per_gpu": {
        "vllm": (("vllm:estimated_flops_per_gpu_total", {}),),
        "sglang": (("sglang:estimated_flops_per_gpu_total", {}),),
    },
    "engine_read_bytes_per_gpu": {
        "vllm": (("vllm:estimated_read_bytes_per_gpu_total", {}),),
        "sglang": (("sglang:estimated_read_bytes_per_gpu_total", {}),),
    },
    "engine_write_bytes_per_gpu": {
        "vllm": (("vllm:estimated_write_bytes_per_gpu_total", {}),),
        "sglang": (("sglang:estimated_write_bytes_per_gpu_total", {}),),
    },
    "prefill_busy_seconds": {"tgi": (("tgi_batch_forward_duration_sum", {"method": "prefill"}),)},
    "decode_busy_seconds": {"tgi": (("tgi_batch_forward_duration_sum", {"method": "decode"}),)},
    "preemptions": {
        "vllm": (("vllm:num_preemptions_total", {}),),
        "sglang": (("sglang:num_retracted_requests_total", {}),),
    },
    "request_running_seconds": {"vllm": (("vllm:request_inference_time_seconds_sum", {}),)},
}

#: the latency histograms a report carries, by what one observation is (module docstring)
HISTOGRAMS: tuple[str, ...] = ("ttft", "tpot", "itl", "queue")
#: standard histogram -> candidate families per engine, first present wins (newer names first)
_HISTOGRAMS: dict[str, dict[str, tuple[str, ...]]] = {
    "ttft": {
        "vllm": ("vllm:time_to_first_token_seconds",),
        "sglang": ("sglang:time_to_first_token_seconds",),
    },
    "tpot": {
        "vllm": ("vllm:request_time_per_output_token_seconds",),
        "sglang": ("sglang:request_time_per_output_token_seconds",),
        "tgi": ("tgi_request_mean_time_per_token_duration",),
    },
    "itl": {
        "vllm": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "sglang": ("sglang:inter_token_latency_seconds",),
    },
    "queue": {
        "vllm": ("vllm:request_queue_time_seconds",),
        "sglang": ("sglang:queue_time_seconds",),
        "tgi": ("tgi_request_queue_duration",),
    },
}

#: standard gauge -> candidate samples per engine
_GAUGES: dict[str, dict[str, tuple[Selector, ...]]] = {
    "requests_running": {
        "vllm": (("vllm:num_requests_running", {}),),
        "sglang": (("sglang:num_running_reqs", {}),),
        "tgi": (("tgi_batch_current_size", {}),),
    },
    "requests_waiting": {
        "vllm": (("vllm:num_requests_waiting", {}),),
        "sglang": (("sglang:num_queue_reqs", {}),),
        "tgi": (("tgi_queue_size", {}),),
    },
    "kv_cache_usage": {
        "vllm": (("vllm:kv_cache_usage_perc", {}), ("vllm:gpu_cache_usage_perc", {})),
        "sglang": (("sglang:token_usage", {}),),
    },
    "kv_tokens_capacity": {
        "sglang": (("sglang:max_total_num_tokens", {}),),
        "tgi": (("tgi_batch_max_total_tokens", {}),),
    },
    "kv_tokens_reserved": {"tgi": (("tgi_batch_current_max_tokens", {}),)},
    "kv_tokens_used": {"sglang": (("sglang:num_used_tokens", {}),)},
    "decode_context_tokens": {"sglang": (("sglang:decode_sum_seq_lens", {}),)},
}
#: gauges that add up over replicas (the others are averaged)
_ADDITIVE_GAUGES = frozenset(
    {
        "requests_running",
        "requests_waiting",
        "kv_tokens_capacity",
        "kv_tokens_reserved",
        "kv_tokens_used",
        "decode_context_tokens",
    }
)


@dataclass(frozen=True)
class EngineReading:
    """One scrape of one engine, in standard keys; a missing key means the engine does not export it.

    Attributes:
        engine: ``vllm``, ``sglang`` or ``tgi``.
        model_name: the engine's ``model_name`` label (the served model's name), when it has one.
        replicas: model replicas the series cover (vLLM ``engine`` / SGLang ``dp_rank`` values; 1 without).
        started_at: ``process_start_time_seconds`` when exported (a change means a restart).
        counters: cumulative counters, summed over replicas.
        created: ``*_created`` timestamps of the counters that carry one (another restart signal).
        sources: the sample name each counter, and the family each histogram, was read from (an engine may start
            printing a newer name mid-run).
        gauges: scheduler state now.
        kv_cache_dtype: vLLM's ``cache_config_info`` ``cache_dtype`` label (``auto`` = the model's dtype).
        histograms: cumulative latency histograms by :data:`HISTOGRAMS` key, summed over replicas.
    """

    engine: str
    model_name: str | None = None
    replicas: int = 1
    started_at: float | None = None
    counters: Mapping[str, float] = field(default_factory=dict)
    created: Mapping[str, float] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    gauges: Mapping[str, float] = field(default_factory=dict)
    kv_cache_dtype: str | None = None
    histograms: Mapping[str, LatencyHistogram] = field(default_factory=dict)


Samples = dict[str, list[tuple[dict[str, str], float]]]


def detect_engine(names: Iterable[str]) -> str | None:
    """The engine whose metric prefix the most sample names carry, or None when there is none."""
    votes = {engine: 0 for engine in ENGINES}
    for name in names:
        for engine, prefix in _PREFIXES.items():
            if name.startswith(prefix):
                votes[engine] += 1
    best = max(votes, key=lambda engine: votes[engine])
    return best if votes[best] else None


def parse_engine_metrics(text: str, engine: str | None = None) -> EngineReading:
    """Read one ``/metrics`` text; ``engine`` forces the mapping, else the metric prefixes decide.

    Raises:
        ValueError: the text is not exposition format, or belongs to no known engine.
    """
    samples: Samples = defaultdict(list)
    help_texts: dict[str, str] = {}  # sample name -> its family's help text (units live there)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            help_texts.setdefault(sample.name, family.documentation)
            if not math.isnan(sample.value):
                samples[sample.name].append((dict(sample.labels), float(sample.value)))
    kind = engine or detect_engine(samples)
    if kind not in ENGINES:
        raise ValueError("no vLLM, SGLang or TGI metrics in this text (metric names start with vllm:, sglang:, tgi_)")
    replica_label = _REPLICA_LABELS.get(kind)
    counters: dict[str, float] = {}
    created: dict[str, float] = {}
    sources: dict[str, str] = {}
    for key, per_engine in _COUNTERS.items():
        found = _first(samples, per_engine.get(kind, ()))
        if found is not None:
            name, series = found
            counters[key] = _combine(series, replica_label, additive=True)
            sources[key] = name
            stamps = [value for _, value in _select(samples, name.removesuffix("_total") + "_created", {})]
            if stamps and name.endswith("_total"):
                created[key] = max(stamps)
    gauges: dict[str, float] = {}
    for key, per_engine in _GAUGES.items():
        found = _first(samples, per_engine.get(kind, ()))
        if found is not None:
            gauges[key] = _combine(found[1], replica_label, additive=key in _ADDITIVE_GAUGES)
    kv_cache_dtype = None
    if kind == "vllm":
        kv_cache_dtype, block_size, capacity = _vllm_cache_config(samples)
        if capacity is not None:
            gauges["kv_tokens_capacity"] = capacity
            if "kv_cache_usage" in gauges:
                gauges["kv_tokens_used"] = gauges["kv_cache_usage"] * capacity
        _prefix_hits_in_tokens(counters, created, samples, help_texts, block_size)
    if "kv_cache_usage" not in gauges and gauges.get("kv_tokens_capacity") and "kv_tokens_reserved" in gauges:
        gauges["kv_cache_usage"] = min(1.0, gauges["kv_tokens_reserved"] / gauges["kv_tokens_capacity"])
    histograms: dict[str, LatencyHistogram] = {}
    for key, families in _HISTOGRAMS.items():
        for family_name in families.get(kind, ()):
            if f"{family_name}_bucket" in samples:
                histogram = _histogram(samples, family_name, replica_label)
                if histogram is not None:
                    histograms[key] = histogram
                    sources[key] = family_name
                break
    started = [value for _, value in samples.get("process_start_time_seconds", [])]
    return EngineReading(
        engine=kind,
        model_name=_model_name(samples, _PREFIXES[kind], kind),
        replicas=_replicas(samples, _PREFIXES[kind], replica_label),
        started_at=max(started) if started else None,
        counters=counters,
        created=created,
        sources=sources,
        gauges=gauges,
        kv_cache_dtype=kv_cache_dtype,
        histograms=histograms,
    )


def _select(samples: Samples, name: str, labels: Mapping[str, str]) -> list[tuple[dict[str, str], float]]:
    return [(lbls, value) for lbls, value in samples.get(name, ()) if all(lbls.get(k) == v for k, v in labels.items())]


def _first(samples: Samples, candidates: Iterable[Selector]) -> tuple[str, list[tuple[dict[str, str], float]]] | None:
    for name, labels in candidates:
        series = _select(samples, name, labels)
        if series:
            return name, series
    return None


SeriesKey = tuple[str, tuple[tuple[str, str], ...]]
#: labels that tell apart ranks of one replica, which print the same series (counted once)
_RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "pid"})


def _series_key(labels: Mapping[str, str], replica_label: str | None) -> SeriesKey:
    """(replica, the other labels but the ranks'): series with the same key are one series repeated per rank."""
    replica = labels.get(replica_label, "") if replica_label else ""
    return replica, tuple(sorted((k, v) for k, v in labels.items() if k not in _RANK_LABELS))


def _combine(series: list[tuple[dict[str, str], float]], replica_label: str | None, *, additive: bool) -> float:
    """Add up (or average) over replicas; within a replica, series that differ in other labels add up too,
    except ranks of one replica (``tp_rank``/``pp_rank``), which repeat the same value and count once."""
    per_replica: dict[str, float] = defaultdict(float)
    per_rank: dict[SeriesKey, float] = {}
    for labels, value in series:
        key = _series_key(labels, replica_label)
        per_rank[key] = max(per_rank.get(key, value), value)
    for (replica, _), value in per_rank.items():
        per_replica[replica] += value
    values = list(per_replica.values())
    return sum(values) if additive else sum(values) / len(values)


def _histogram(samples: Samples, family: str, replica_label: str | None) -> LatencyHistogram | None:
    """One histogram family summed like the counters (:func:`_combine`): bucket by bucket over replicas and other
    labels (SGLang's ``is_streaming``), each rank-repeated series once. None when the series do not add up or their
    edges differ (replicas started with other buckets)."""
    buckets: dict[tuple[tuple[str, str], ...], dict[float, float]] = defaultdict(dict)
    for labels, value in samples.get(f"{family}_bucket", ()):
        try:
            edge = float(labels.get("le", ""))
        except ValueError:
            continue
        buckets[tuple(sorted((k, v) for k, v in labels.items() if k != "le"))][edge] = value
    sums = {tuple(sorted(labels.items())): value for labels, value in samples.get(f"{family}_sum", ())}
    counts = {tuple(sorted(labels.items())): value for labels, value in samples.get(f"{family}_count", ())}
    per_rank: dict[SeriesKey, LatencyHistogram] = {}
    for series, by_edge in buckets.items():
        one = LatencyHistogram.from_buckets(by_edge, sums.get(series, 0.0), counts.get(series))
        if one is None:
            return None
        key = _series_key(dict(series), replica_label)
        if key not in per_rank or one.count > per_rank[key].count:
            per_rank[key] = one
    total: LatencyHistogram | None = None
    for one in per_rank.values():
        total = one if total is None else total.add(one)
        if total is None:
            return None
    return total


def _replicas(samples: Samples, prefix: str, replica_label: str | None) -> int:
    if replica_label is None:
        return 1
    seen = {
        labels[replica_label]
        for name, series in samples.items()
        if name.startswith(prefix)
        for labels, _ in series
        if replica_label in labels
    }
    return max(1, len(seen))


def _model_name(samples: Samples, prefix: str, kind: str) -> str | None:
    """The ``model_name`` label; else (SGLang up to 0.3) the ``name`` label of the families read here, not of any
    family: ``sglang:func_latency_seconds{name=...}`` names a function."""
    for name, series in samples.items():
        if name.startswith(prefix):
            for labels, _ in series:
                if labels.get("model_name"):
                    return labels["model_name"]
    ours = dict.fromkeys(
        name for table in (_COUNTERS, _GAUGES) for key in table for name, _ in table[key].get(kind, ())
    )
    for name in ours:
        for labels, _ in samples.get(name, ()):
            if labels.get("name"):
                return labels["name"]
    return None


def _vllm_cache_config(samples: Samples) -> tuple[str | None, float | None, float | None]:
    """(cache_dtype, block size, KV-cache capacity in tokens) from ``vllm:cache_config_info``, capacity summed over
    engines."""
    dtype, block_size, capacity = None, None, 0.0
    for labels, _ in samples.get("vllm:cache_config_info", []):
        dtype = labels.get("cache_dtype") or dtype
        try:
            block_size = float(labels["block_size"])
            capacity += float(labels["num_gpu_blocks"]) * block_size
        except (KeyError, ValueError):
            continue
    return dtype, block_size, (capacity or None)


def _prefix_hits_in_tokens(
    counters: dict[str, float],
    created: dict[str, float],
    samples: Samples,
    help_texts: Mapping[str, str],
    block_size: float | None,
) -> None:
    """vLLM V1 up to 0.7 counted ``gpu_prefix_cache_hits`` in blocks ("in terms of number of cached blocks"):
    hits are whole blocks, so blocks x block size is the token count; without a block size the counter is dropped
    (the prompt tokens then all count as computed) rather than subtracted in the wrong unit."""
    if "cached_prompt_tokens" not in counters:
        return
    found = _first(samples, _COUNTERS["cached_prompt_tokens"]["vllm"])
    if found is None or "blocks" not in help_texts.get(found[0], ""):
        return
    if block_size:
        counters["cached_prompt_tokens"] *= block_size
    else:
        del counters["cached_prompt_tokens"]
        created.pop("cached_prompt_tokens", None)
