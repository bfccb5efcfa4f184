"""What each serving finding advises, in each engine's own flags, and the engine metrics its evidence cites.

Advice is keyed by ``ServingFacts.engine`` (``vllm``, ``sglang``, ``tgi``); ``None`` holds the generic words, which
name each engine's flag side by side. Flags as the engines' own references spell them: vLLM's engine arguments
(``vllm serve --help``), SGLang's server arguments (``python/sglang/srt/server_args.py``, where a field ``tp_size``
is the flag ``--tp-size``) and TGI's ``text-generation-launcher`` arguments (``docs/source/reference/launcher.md``).
"""

from __future__ import annotations

Advice = dict[str | None, str]

DECODE_MEMORY_BOUND: Advice = {
    "vllm": "Decode is bound by memory bandwidth: every step reads the weights and the KV cache at close to what the "
    "GPUs can deliver, so larger batches or scheduler settings will not make tokens faster. Spread the bytes over "
    "more GPUs (--tensor-parallel-size, or more replicas), read fewer bytes per token (--quantization fp8 or a "
    "quantised checkpoint, --kv-cache-dtype fp8), or make more tokens per read with speculative decoding "
    "(--speculative-config).",
    "sglang": "Decode is bound by memory bandwidth: every step reads the weights and the KV cache at close to what "
    "the GPUs can deliver, so larger batches or scheduler settings will not make tokens faster. Spread the bytes over "
    "more GPUs (--tp-size, or more replicas with --dp-size), read fewer bytes per token (--quantization fp8 or a "
    "quantised checkpoint, --kv-cache-dtype fp8_e4m3), or make more tokens per read with speculative decoding "
    "(--speculative-algorithm, e.g. EAGLE3 with its draft model).",
    "tgi": "Decode is bound by memory bandwidth: every step reads the weights and the KV cache at close to what the "
    "GPUs can deliver, so larger batches or scheduler settings will not make tokens faster. Spread the bytes over "
    "more GPUs (--num-shard, or more replicas), read fewer bytes per token (--quantize fp8 or a quantised "
    "checkpoint, --kv-cache-dtype fp8_e4m3fn), or make more tokens per read with speculative decoding (--speculate, "
    "with a Medusa model or n-gram speculation).",
    None: "Decode is bound by memory bandwidth: every step reads the weights and the KV cache at close to what the "
    "GPUs can deliver, so larger batches or scheduler settings will not make tokens faster. Spread the bytes over "
    "more GPUs (tensor parallelism, or more replicas), read fewer bytes per token (fp8 or int4 weights, an fp8 KV "
    "cache), or make more tokens per read with speculative decoding (vLLM --speculative-config, SGLang "
    "--speculative-algorithm, TGI --speculate).",
}

BATCH_UNDERFILLED: Advice = {
    "vllm": "Requests wait while the KV cache has room: the engine's cap on running sequences holds the batch small, "
    "not its memory. Raise --max-num-seqs and, when long prompts wait, --max-num-batched-tokens (the tokens one step "
    "may schedule); decode is bound by memory bandwidth, so a larger batch makes more tokens for nearly the same "
    "step time.",
    "sglang": "Requests wait while the KV cache has room: the engine's cap on running requests holds the batch small, "
    "not its memory. Raise --max-running-requests and, when long prompts wait, --max-prefill-tokens; SGLang reserves "
    "room for each request's max_new_tokens, so when requests stop well before it a lower "
    "--schedule-conservativeness (e.g. 0.3) admits more.",
    "tgi": "Requests wait while the KV cache has room: the batch's token budget holds it small, not the memory. Raise "
    "--max-batch-total-tokens to what the memory holds (and --max-batch-size where it is set); a lower "
    "--waiting-served-ratio lets waiting requests join the running batch sooner.",
    None: "Requests wait while the KV cache has room: the engine's cap on concurrent requests holds the batch small, "
    "not its memory. Raise it (vLLM --max-num-seqs, SGLang --max-running-requests, TGI --max-batch-total-tokens); "
    "decode is bound by memory bandwidth, so a larger batch makes more tokens for nearly the same step time.",
}

KV_CACHE_SATURATED: Advice = {
    "vllm": "The KV cache fills up and vLLM preempts running requests, which are recomputed from their prompts when "
    "room frees up. Give the cache more memory (raise --gpu-memory-utilization), store it in fewer bytes "
    "(--kv-cache-dtype fp8), shard the weights over more GPUs so that each has more room left for it "
    "(--tensor-parallel-size), or admit fewer sequences at once (lower --max-num-seqs or --max-num-batched-tokens).",
    "sglang": "The KV cache pool fills up and SGLang retracts running requests, which are recomputed later. Give the "
    "pool more memory (raise --mem-fraction-static), store it in fewer bytes (--kv-cache-dtype fp8_e4m3), shard the "
    "weights over more GPUs (--tp-size), or admit fewer requests: raise --schedule-conservativeness (SGLang's own "
    "advice when requests are retracted often) or lower --max-running-requests.",
    "tgi": "The KV cache fills up and requests are evicted to be recomputed. Store it in fewer bytes "
    "(--kv-cache-dtype fp8_e4m3fn), shard the weights over more GPUs (--num-shard), or admit fewer tokens at once "
    "(lower --max-batch-total-tokens).",
    None: "The KV cache fills up and the engine preempts running requests, which are recomputed later. Give the "
    "cache more memory (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static), store it in fp8, shard the "
    "weights over more GPUs, or admit fewer requests at once.",
}

PREFILL_INTERFERENCE: Advice = {
    "vllm": "Prompts computed in the same steps as the running decodes stretch those steps. Cap the prompt tokens "
    "per step: with chunked prefill (--enable-chunked-prefill, always on in the V1 engine) a smaller "
    "--max-num-batched-tokens (about 2048 favours inter-token latency, 8192 and more throughput). Where prompts are "
    "long, separate prefill from decode with disaggregated prefill (--kv-transfer-config: a kv_producer prefill "
    "instance and a kv_consumer decode instance).",
    "sglang": "Prompts computed in the same steps as the running decodes stretch those steps. Cap the prompt tokens "
    "per step with a smaller --chunked-prefill-size (and --max-prefill-tokens). Where prompts are long, run prefill "
    "and decode on separate instances (--disaggregation-mode prefill and decode, joined by "
    "--disaggregation-transfer-backend).",
    "tgi": "TGI pauses the running batch to prefill new requests, which stretches the running requests' tokens. Cap "
    "each prefill with a smaller --max-batch-prefill-tokens, and prefill less often with a larger "
    "--max-waiting-tokens or --waiting-served-ratio (new requests then wait a little longer for their first token).",
    None: "Prompts computed in the same steps as the running decodes stretch those steps. Cap the prompt tokens per "
    "step (chunked prefill with a smaller budget: vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size, TGI "
    "--max-batch-prefill-tokens), or run prefill and decode on separate instances (disaggregated prefill).",
}

IDLE_REPLICAS = (
    "Most of the allocation serves no request: run fewer replicas or GPUs, or autoscale on the engine's queue and "
    "running requests{metrics}, down to a floor that covers the traffic's lows; a replica scaled to zero pays its "
    "start-up (loading the weights, capturing CUDA graphs) on the next request."
)

SLO_TTFT_QUEUED: Advice = {
    "vllm": "Time to first token misses while requests queue: the queue is capacity. Add replicas (or GPUs: "
    "--tensor-parallel-size); if the KV cache has room raise --max-num-seqs so that waiting requests start; chunked "
    "prefill (--enable-chunked-prefill) starts new prompts beside the running decodes, and a larger "
    "--max-num-batched-tokens starts them sooner at some cost to TPOT.",
    "sglang": "Time to first token misses while requests queue: the queue is capacity. Add replicas (--dp-size) or "
    "GPUs (--tp-size); if the KV cache has room raise --max-running-requests (or lower --schedule-conservativeness) "
    "so that waiting requests start; a larger --chunked-prefill-size starts new prompts sooner at some cost to TPOT.",
    "tgi": "Time to first token misses while requests queue: the queue is capacity. Add replicas or shards "
    "(--num-shard); raise --max-batch-total-tokens if the memory allows; a lower --max-waiting-tokens or "
    "--waiting-served-ratio prefills waiting requests sooner at some cost to TPOT.",
    None: "Time to first token misses while requests queue: the queue is capacity. Add replicas or GPUs per replica, "
    "raise the engine's cap on running requests if the KV cache has room (vLLM --max-num-seqs, SGLang "
    "--max-running-requests, TGI --max-batch-total-tokens), and let new prompts start beside the running decodes "
    "(chunked prefill).",
}

SLO_TTFT_SLOW: Advice = {
    "vllm": "Time to first token misses with no queue to speak of: the prompts themselves take too long. Reuse shared "
    "prefixes (--enable-prefix-caching, on by default in the V1 engine: keep the shared part at the start of the "
    "prompt), prefill over more GPUs (--tensor-parallel-size), or send shorter prompts.",
    "sglang": "Time to first token misses with no queue to speak of: the prompts themselves take too long. Reuse "
    "shared prefixes (the radix cache, on unless --disable-radix-cache is set: keep the shared part at the start of "
    "the prompt), prefill over more GPUs (--tp-size), or send shorter prompts.",
    "tgi": "Time to first token misses with no queue to speak of: the prompts themselves take too long. Prefill over "
    "more GPUs (--num-shard), keep shared text at the start of the prompt so that cached prefixes are reused, or "
    "send shorter prompts.",
    None: "Time to first token misses with no queue to speak of: the prompts themselves take too long. Reuse shared "
    "prefixes (prefix caching), prefill over more GPUs (tensor parallelism), or send shorter prompts.",
}

SLO_TPOT: Advice = {
    "vllm": "Time per output token misses: each step serves too many sequences or reads too many bytes. A smaller "
    "batch (lower --max-num-seqs) makes each token faster at some cost to throughput; more GPUs per replica "
    "(--tensor-parallel-size) split the bytes each step reads; speculative decoding (--speculative-config) makes "
    "more tokens per step; long prompts in the same steps call for a smaller --max-num-batched-tokens.",
    "sglang": "Time per output token misses: each step serves too many sequences or reads too many bytes. A smaller "
    "batch (lower --max-running-requests) makes each token faster at some cost to throughput; more GPUs per replica "
    "(--tp-size) split the bytes each step reads; speculative decoding (--speculative-algorithm) makes more tokens "
    "per step; long prompts in the same steps call for a smaller --chunked-prefill-size.",
    "tgi": "Time per output token misses: each step serves too many sequences or reads too many bytes. A smaller "
    "batch (lower --max-batch-total-tokens, or --max-batch-size) makes each token faster at some cost to throughput; "
    "more shards (--num-shard) split the bytes each step reads; speculative decoding (--speculate) makes more tokens "
    "per step; frequent prefills call for a larger --max-waiting-tokens.",
    None: "Time per output token misses: each step serves too many sequences or reads too many bytes. Smaller "
    "batches (vLLM --max-num-seqs, SGLang --max-running-requests, TGI --max-batch-total-tokens) make each token "
    "faster at some cost to throughput; more GPUs per replica (tensor parallelism) split the bytes each step reads; "
    "speculative decoding makes more tokens per step.",
}


def say(advice: Advice, engine: str | None) -> str:
    """The engine's advice, or the generic words for an engine not named."""
    return advice.get(engine, advice[None]) if engine is not None else advice[None]


#: The engine metric each ServingFacts figure comes from, cited in the evidence: the node agent's mapping in
#: exporter/node/inference/engines.py (the newest name where it reads several; TGI exports no KV use, preemptions,
#: time to first token or inter-token latency).
METRICS: dict[str, dict[str, str]] = {
    "vllm": {
        "requests_running": "vllm:num_requests_running",
        "requests_waiting": "vllm:num_requests_waiting",
        "kv_cache_usage": "vllm:kv_cache_usage_perc",
        "preemptions": "vllm:num_preemptions_total",
        "ttft": "vllm:time_to_first_token_seconds",
        "tpot": "vllm:request_time_per_output_token_seconds",
        "itl": "vllm:inter_token_latency_seconds",
    },
    "sglang": {
        "requests_running": "sglang:num_running_reqs",
        "requests_waiting": "sglang:num_queue_reqs",
        "kv_cache_usage": "sglang:token_usage",
        "preemptions": "sglang:num_retracted_requests_total",
        "ttft": "sglang:time_to_first_token_seconds",
        "tpot": "sglang:request_time_per_output_token_seconds",
        "itl": "sglang:inter_token_latency_seconds",
    },
    "tgi": {
        "requests_running": "tgi_batch_current_size",
        "requests_waiting": "tgi_queue_size",
        "tpot": "tgi_request_mean_time_per_token_duration",
    },
}


def metrics(engine: str | None, *figures: str) -> dict[str, str]:
    """The engine's metric names for ``figures`` (those it exports); empty when the engine is not known."""
    names = METRICS.get(engine or "", {})
    return {f: names[f] for f in figures if f in names}
