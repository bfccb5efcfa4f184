"""The Inference dashboard: serving jobs judged by the number that fits each phase (MBU, prefill MFU, KV cache)."""

from __future__ import annotations

from typing import Any

from _panels import JOB_LINK, dashboard, query_variable, row, table, target, targets, timeseries

POOL_VAR = query_variable("pool", "Pool", 'label_values(mfumon_job_info{kind="inference"}, pool)')
TEAM_VAR = query_variable("team", "Team", 'label_values(mfumon_job_info{kind="inference",pool=~"$pool"}, team)')
JOB_VAR = query_variable(
    "job", "Serving job", 'label_values(mfumon_job_info{kind="inference",pool=~"$pool",team=~"$team"}, job_id)'
)
JOBS = 'job_id=~"$job"'


def _per_job(expr: str) -> str:
    """A per-job serving series of the selected jobs, kept to the pool and team variables."""
    info = 'max by (job_id) (job_id:mfumon_job_info:topk1{pool=~"$pool", team=~"$team"})'
    return f"{expr} * on (job_id) group_left () {info}"


def inference() -> dict[str, Any]:
    """Serving jobs: MBU, MFU by phase, tokens/s by phase, memory traffic, batch, context, queue, KV cache."""
    panels = [
        row("Serving jobs now"),
        table(
            "Serving jobs",
            [
                target(_per_job(f"{series}{{{JOBS}}}"), instant=True, table=True, ref=ref)
                for ref, series in zip(
                    "ABCD",
                    (
                        "job_id:mfumon_job_mbu_ratio:max",
                        "job_id:mfumon_job_mfu_ratio:max",
                        "job_id:mfumon_job_requests_waiting:max",
                        "job_id:mfumon_job_kv_cache_usage_ratio:max",
                    ),
                    strict=True,
                )
            ],
            description="MBU judges decode (memory-bound), MFU the whole job; a queue with low MBU is badly batched.",
            renames={"Value #A": "MBU", "Value #B": "MFU", "Value #C": "waiting", "Value #D": "KV cache"},
            units={"MBU": "percentunit", "MFU": "percentunit", "KV cache": "percentunit"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            height=7,
        ),
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
            width=8,
        ),
    ]
    return dashboard(
        uid="mfumon-inference",
        title="mfu-monitor / Inference",
        description="Serving jobs: MBU for decode, MFU by phase, tokens/s by phase, batch, context, queue, KV cache.",
        variables=[POOL_VAR, TEAM_VAR, JOB_VAR],
        panels=panels,
    )
