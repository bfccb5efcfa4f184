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

Series of one engine are combined across replicas the engine labels (vLLM's ``engine``, SGLang's ``dp_rank``): counters
and request gauges add up, usage is averaged; series repeated per tensor/pipeline rank are counted once (max).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["ENGINES", "EngineReading", "detect_engine", "parse_engine_metrics"]

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
        sources: the sample name each counter was read from (an engine may start printing a newer name mid-run).
        gauges: scheduler state now.
        kv_cache_dtype: vLLM's ``cache_config_info`` ``cache_dtype`` label (``auto`` = the model's dtype).
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
    )


def _select(samples: Samples, name: str, labels: Mapping[str, str]) -> list[tuple[dict[str, str], float]]:
    return [(lbls, value) for lbls, value in samples.get(name, ()) if all(lbls.get(k) == v for k, v in labels.items())]


def _first(samples: Samples, candidates: Iterable[Selector]) -> tuple[str, list[tuple[dict[str, str], float]]] | None:
    for name, labels in candidates:
        series = _select(samples, name, labels)
        if series:
            return name, series
    return None


def _combine(series: list[tuple[dict[str, str], float]], replica_label: str | None, *, additive: bool) -> float:
    """Add up (or average) over replicas; within a replica, series that differ in other labels add up too,
    except ranks of one replica (``tp_rank``/``pp_rank``), which repeat the same value and count once."""
    per_replica: dict[str, float] = defaultdict(float)
    per_rank: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for labels, value in series:
        replica = labels.get(replica_label, "") if replica_label else ""
        rest = tuple(sorted((k, v) for k, v in labels.items() if k not in ("tp_rank", "pp_rank", "moe_ep_rank", "pid")))
        key = (replica, rest)
        per_rank[key] = max(per_rank.get(key, value), value)
    for (replica, _), value in per_rank.items():
        per_replica[replica] += value
    values = list(per_replica.values())
    return sum(values) if additive else sum(values) / len(values)


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
