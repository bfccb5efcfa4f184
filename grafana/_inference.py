"""The Inference dashboard: serving jobs judged by the number that fits each phase (MBU, prefill MFU, KV cache), and
by what their users get: the share of requests within the latency targets (SLO goodput), the latencies against the
targets, and where the GPU-hours of serving go (the serving waterfall).

SLO goodput comes from the engines' latency histograms, whose buckets bound the share of requests under a target from
both sides: the aggregator exports the lower bound ("at least this share met both targets"), which the alerts and the
pool figure use, and the upper bound beside it.
"""

from __future__ import annotations

from typing import Any

from _panels import (
    JOB_LINK,
    Panel,
    bargauge,
    dashboard,
    query_variable,
    right_axis,
    row,
    table,
    target,
    targets,
    timeseries,
)
from _window import window_increase

POOL_VAR = query_variable("pool", "Pool", 'label_values(mfumon_job_info{kind="inference"}, pool)')
TEAM_VAR = query_variable("team", "Team", 'label_values(mfumon_job_info{kind="inference",pool=~"$pool"}, team)')
JOB_VAR = query_variable(
    "job", "Serving job", 'label_values(mfumon_job_info{kind="inference",pool=~"$pool",team=~"$team"}, job_id)'
)
JOBS = 'job_id=~"$job"'
SERVING_GPU_SECONDS = "mfumon_job_serving_gpu_seconds_total"
#: The serving waterfall's categories (mfumon.api.serving.SERVING_CATEGORIES), in the order they are shown.
SERVING_CATEGORIES = ("down", "idle", "prefill", "decode", "recompute", "busy")
CATEGORIES_MEANING = (
    "down: not serving (start-up, restarts, silences, failures); idle: no request running or waiting; prefill and "
    "decode: busy time split by the time each phase's work needs at the hardware limit (TGI: its own times); "
    "recompute: re-prefilling preempted requests; busy: serving, phase split unknown (no peak known for the GPUs)"
)
GOODPUT_BOUNDS = (
    "The engine's histogram buckets bound the share from both sides: 'at least' is the lower bound (the alerts and "
    "the pool figure use it), 'at most' the upper; the truth lies between."
)


def _per_job(expr: str) -> str:
    """A per-job serving series of the selected jobs, kept to serving jobs (the job variable's All matches every
    job) and to the pool and team variables."""
    info = 'max by (job_id) (job_id:mfumon_job_info:topk1{kind="inference", pool=~"$pool", team=~"$team"})'
    return f"{expr} * on (job_id) group_left () {info}"


#: The serving jobs table: (per-job expression of the selected jobs, column, unit); every one keeps job_id and kind.
JOB_COLUMNS = (
    (f"job_id:mfumon_job_mbu_ratio:max{{{JOBS}}}", "MBU", "percentunit"),
    (f"job_id:mfumon_job_mfu_ratio:max{{{JOBS}}}", "MFU", "percentunit"),
    (f"job_id:mfumon_job_requests_waiting:max{{{JOBS}}}", "waiting", ""),
    (f"job_id:mfumon_job_kv_cache_usage_ratio:max{{{JOBS}}}", "KV cache", "percentunit"),
    (f"max by (job_id, kind) (mfumon_job_requests_per_second{{{JOBS}}})", "requests/s", "reqps"),
    (f"job_id:mfumon_job_slo_goodput_ratio:min{{{JOBS}}}", "SLO goodput (at least)", "percentunit"),
    (f"job_id:mfumon_job_slo_objective_ratio:max{{{JOBS}}}", "SLO objective", "percentunit"),
)


def _latency(measure: str, what: str) -> list[dict[str, Any]]:
    """A latency's p90 and p99 per selected job, and the job's target for it."""

    def percentile(quantile: str) -> str:
        selector = f'{JOBS}, measure="{measure}", quantile="{quantile}"'
        return _per_job(f"max by (job_id) (mfumon_job_request_latency_seconds{{{selector}}})")

    target_selector = f'{JOBS}, target="{measure}"'
    return targets(
        (percentile("0.9"), f"{{{{job_id}}}} {what} p90"),
        (percentile("0.99"), f"{{{{job_id}}}} {what} p99"),
        (
            _per_job(f"max by (job_id) (mfumon_job_slo_target_seconds{{{target_selector}}})"),
            f"{{{{job_id}}}} {what} target",
        ),
    )


def _by_category(function: str, window: str) -> str:
    """The selected jobs' serving GPU-seconds summed by category: ``rate`` or ``increase`` over ``window`` per job,
    replicas collapsed, kept to the pool and team variables."""
    selector = f"{SERVING_GPU_SECONDS}{{{JOBS}}}"
    growth = window_increase(selector, window) if function == "increase" else f"{function}({selector}[{window}])"
    per_job = f"max by (job_id, category) ({growth})"
    return f"sum by (category) ({_per_job(per_job)})"


def slo_panels() -> list[Panel]:
    """SLO goodput per job and per pool, goodput rate against request rate, TTFT and TPOT against their targets,
    KV-cache pressure."""
    return [
        row("SLO goodput: requests within both latency targets"),
        timeseries(
            "SLO goodput per job (lower bound, upper bound, objective)",
            targets(
                (_per_job(f"job_id:mfumon_job_slo_goodput_ratio:min{{{JOBS}}}"), "{{job_id}} at least"),
                (_per_job(f"job_id:mfumon_job_slo_goodput_upper_ratio:min{{{JOBS}}}"), "{{job_id}} at most"),
                (_per_job(f"job_id:mfumon_job_slo_objective_ratio:max{{{JOBS}}}"), "{{job_id}} objective"),
            ),
            unit="percentunit",
            max_value=1,
            description="The share of the last 5 minutes' requests that met both the time-to-first-token and the "
            f"time-per-output-token target. {GOODPUT_BOUNDS} Objective: the share the job must meet. No line: the "
            "engine exports no TTFT or no per-request TPOT histogram (TGI has no TTFT; vLLM before 0.11 has TPOT per "
            "token only); the job page says which.",
        ),
        timeseries(
            "SLO goodput per pool (lower bound)",
            targets(('pool:mfumon_slo_goodput_ratio:lower{pool=~"$pool"}', "{{pool}} at least")),
            unit="percentunit",
            max_value=1,
            description="Requests within both targets / requests finished, over the pool's serving jobs that have a "
            "goodput (each job's lower bound, weighted by its requests): at least this share of the pool's requests "
            "met their targets. Jobs without the histograms are left out of both sides.",
        ),
        timeseries(
            "TTFT p90 and p99 vs target",
            _latency("ttft", "TTFT"),
            unit="s",
            description="Time to first token per request: the 90th and 99th percentile of the newest report interval "
            "(interpolated inside the engine's histogram bucket), against the job's TTFT target. A p90 above the "
            "target means fewer than 90% of requests met it. Queueing and prefill make it.",
        ),
        timeseries(
            "TPOT p90 and p99 vs target",
            _latency("tpot", "TPOT"),
            unit="s",
            description="Time per output token per request (each request counted once, at its own mean), 90th and "
            "99th percentile of the newest report interval, against the job's TPOT target. Decode batch size and "
            "memory bandwidth make it. Per-token inter-token latency is a different number and not shown here.",
        ),
        timeseries(
            "Goodput rate vs request rate",
            targets(
                (_per_job(f"max by (job_id) (mfumon_job_requests_per_second{{{JOBS}}})"), "{{job_id}} finished"),
                (
                    _per_job(f"max by (job_id) (mfumon_job_slo_goodput_requests_per_second{{{JOBS}}})"),
                    "{{job_id}} within both targets (at least)",
                ),
            ),
            unit="reqps",
            description="Requests finished per second over the last 5 minutes, and those of them that met both "
            "latency targets (the goodput's lower bound x the requests). The gap is traffic served too slowly: more "
            "requests with no more goodput means the job is past its capacity.",
        ),
        timeseries(
            "KV cache pressure: use and preemptions",
            targets(
                (_per_job(f"job_id:mfumon_job_kv_cache_usage_ratio:max{{{JOBS}}}"), "{{job_id}} KV cache used"),
                (
                    _per_job(f"max by (job_id) (mfumon_job_preemptions_per_second{{{JOBS}}})"),
                    "{{job_id}} preemptions/s",
                ),
            ),
            unit="percentunit",
            overrides=[right_axis("B", "short", "preemptions/s")],
            description="The share of the KV cache in use (left axis) and requests the engine preempted per second "
            "over the last 5 minutes (right axis). A full cache evicts running requests to make room; each is "
            "prefilled again later (the waterfall's recompute) and its latency counts against the SLO. TGI exports "
            "no preemption count.",
        ),
    ]


def waterfall_panels() -> list[Panel]:
    """Where the selected serving jobs' GPU-hours go: by category over time, as shares over the range, per job."""
    over_range = _by_category("increase", "$__range")
    growth = window_increase(f"{SERVING_GPU_SECONDS}{{{JOBS}}}", "$__range")
    total = f"sum by (job_id) (max by (job_id, category) ({growth}))"

    def share(category: str) -> str:
        selector = f'{SERVING_GPU_SECONDS}{{{JOBS}, category="{category}"}}'
        part = f"max by (job_id) ({window_increase(selector, '$__range')})"
        return _per_job(f"({part} / on (job_id) ({total} > 0))")

    by_job = [target(_per_job(f"({total} / 3600)"), instant=True, table=True, ref="A")]
    by_job += [
        target(share(category), instant=True, table=True, ref=chr(ord("B") + i))
        for i, category in enumerate(SERVING_CATEGORIES)
    ]
    return [
        row("Where the serving GPU-hours go"),
        timeseries(
            "Serving GPUs by category (selected jobs)",
            targets((_by_category("rate", "5m"), "{{category}}")),
            stack=True,
            width=16,
            description="GPU-equivalents the selected serving jobs spend in each category of the serving waterfall "
            f"(5-minute rate of their allocated GPU-seconds); stacked, the GPUs they hold. {CATEGORIES_MEANING}.",
        ),
        bargauge(
            "Serving waterfall over the range (share)",
            target(
                f"{over_range} / ignoring (category) group_left () sum without (category) ({over_range})",
                "{{category}}",
                instant=True,
            ),
            unit="percentunit",
            max_value=1,
            description="Each category's share of the selected serving jobs' allocated GPU-hours over the dashboard's "
            f"time range. {CATEGORIES_MEANING}.",
        ),
        table(
            "Serving waterfall by job (share of its GPU-hours over the range)",
            by_job,
            description="Each serving job's allocated GPU-hours over the dashboard's time range, and the share of "
            f"them in each category. {CATEGORIES_MEANING}. Why, and what to change: the job page's diagnosis.",
            renames={
                "Value #A": "GPU-hours",
                **{f"Value #{chr(ord('B') + i)}": c for i, c in enumerate(SERVING_CATEGORIES)},
            },
            units=dict.fromkeys(SERVING_CATEGORIES, "percentunit"),
            links={"job_id": ("Job drill-down", JOB_LINK)},
            height=7,
        ),
    ]


def inference() -> dict[str, Any]:
    """Serving jobs: SLO goodput and latency, the serving waterfall, MBU, MFU by phase, tokens/s by phase, memory
    traffic, batch, context, queue, KV cache."""
    panels = [
        row("Serving jobs now"),
        table(
            "Serving jobs",
            [
                target(_per_job(expr), instant=True, table=True, ref=chr(ord("A") + i))
                for i, (expr, _, _) in enumerate(JOB_COLUMNS)
            ],
            description="MBU judges decode (memory-bound), MFU the whole job; a queue with low MBU is badly batched. "
            "SLO goodput: at least this share of the last 5 minutes' requests met both latency targets (a lower "
            "bound), against the objective; empty where the engine exports no latency histograms.",
            renames={f"Value #{chr(ord('A') + i)}": name for i, (_, name, _) in enumerate(JOB_COLUMNS)},
            units={name: unit for _, name, unit in JOB_COLUMNS if unit},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            height=7,
        ),
        *slo_panels(),
        *waterfall_panels(),
        row("Efficiency"),
        timeseries(
            "MBU",
            targets(
                (_per_job(f"job_id:mfumon_job_mbu_ratio:max{{{JOBS}}}"), "{{job_id}}"),
                (f"job_id:mfumon_job_mbu_threshold_ratio:effective{{{JOBS}}}", "{{job_id}} alert threshold"),
            ),
            unit="percentunit",
            description="Bytes read per second by decode steps (weights + KV cache) / peak memory bandwidth.",
        ),
        timeseries(
            "MFU by phase",
            targets((_per_job(f"job_id:mfumon_job_phase_mfu_ratio:max{{{JOBS}}}"), "{{job_id}} {{phase}}")),
            unit="percentunit",
            stack=True,
            description="Each phase's model FLOP/s over the job's dense peak; stacked, they are the job's MFU.",
        ),
        timeseries(
            "MFU: ours vs the engine's own",
            targets(
                (_per_job(f"job_id:mfumon_job_mfu_ratio:max{{{JOBS}}}"), "{{job_id}} mfu-monitor"),
                (_per_job(f"max by (job_id) (mfumon_job_engine_mfu_ratio{{{JOBS}}})"), "{{job_id}} engine"),
            ),
            unit="percentunit",
            description="vLLM/SGLang with --enable-mfu-metrics count FLOPs their own way; the job page's diagnosis "
            "names both conventions when the two differ by more than 0.8-1.25x.",
        ),
        timeseries(
            "Active MFU by phase",
            targets((_per_job(f"job_id:mfumon_job_phase_active_mfu_ratio:max{{{JOBS}}}"), "{{job_id}} {{phase}}")),
            unit="percentunit",
            description="FLOPs of a phase over the time the engine spent in it (TGI): how well prefill uses the GPUs.",
            width=8,
        ),
        timeseries(
            "Memory read vs peak bandwidth",
            targets(
                (_per_job(f"max by (job_id) (mfumon_job_memory_bytes_per_second{{{JOBS}}})"), "{{job_id}} read"),
                (_per_job(f"max by (job_id) (mfumon_job_peak_memory_bytes_per_second{{{JOBS}}})"), "{{job_id}} peak"),
            ),
            unit="Bps",
            description="Bytes the decode steps read per second, against the GPUs' peak memory bandwidth: MBU is "
            "their ratio.",
            width=8,
        ),
        timeseries(
            "Bytes per decode step",
            targets(
                (_per_job(f"max by (job_id, part) (mfumon_job_decode_step_bytes{{{JOBS}}})"), "{{job_id}} {{part}}")
            ),
            unit="bytes",
            stack=True,
            description="What one decode step reads: the weights once, and the KV cache of every sequence.",
            width=8,
        ),
        row("Traffic and scheduler"),
        timeseries(
            "Tokens/s by phase",
            targets((_per_job(f"job_id:mfumon_job_phase_tokens_per_second:max{{{JOBS}}}"), "{{job_id}} {{phase}}")),
            unit="short",
            stack=True,
            description="Prompt tokens computed (prefill; prefix-cache hits excluded) and tokens generated (decode).",
        ),
        timeseries(
            "Running and waiting requests",
            targets(
                (_per_job(f"max by (job_id) (mfumon_job_requests_running{{{JOBS}}})"), "{{job_id}} running"),
                (_per_job(f"job_id:mfumon_job_requests_waiting:max{{{JOBS}}}"), "{{job_id}} waiting"),
            ),
            unit="short",
            description="Requests the engine is running, and those waiting in its queue: a queue that stays is "
            "time added to every request's time to first token.",
        ),
        timeseries(
            "Batch size",
            targets((_per_job(f"max by (job_id) (mfumon_job_batch_size{{{JOBS}}})"), "{{job_id}}")),
            unit="short",
            description="Mean sequences per decode step of one model replica.",
            width=8,
        ),
        timeseries(
            "Context length",
            targets((_per_job(f"max by (job_id) (mfumon_job_context_tokens{{{JOBS}}})"), "{{job_id}}")),
            unit="short",
            description="Mean tokens of context of a sequence being decoded.",
            width=8,
        ),
        timeseries(
            "KV cache use",
            targets(
                (_per_job(f"job_id:mfumon_job_kv_cache_usage_ratio:max{{{JOBS}}}"), "{{job_id}}"),
                (f"job_id:mfumon_job_kv_cache_usage_threshold_ratio:effective{{{JOBS}}}", "{{job_id}} full at"),
            ),
            unit="percentunit",
            max_value=1,
            description="The share of the engine's KV cache in use, against the level the alert calls full.",
            width=8,
        ),
    ]
    return dashboard(
        uid="mfumon-inference",
        title="mfu-monitor / Inference",
        description="Serving jobs: SLO goodput (a lower bound) and latency against the targets, where the serving "
        "GPU-hours go, MBU for decode, MFU by phase, tokens/s by phase, batch, context, queue, KV cache.",
        variables=[POOL_VAR, TEAM_VAR, JOB_VAR],
        panels=panels,
    )
