"""The capacity dashboard: whether jobs get the GPUs they ask for, how long they wait, quotas and fragmentation.

Fed by the scheduler adapters (``mfumon scheduler``) and the exporters. Replicas serve identical values (the
queue-wait histogram lives in the database), so ``max by`` collapses them before anything is summed.
"""

from __future__ import annotations

from typing import Any

from _panels import JOB_LINK, dashboard, query_variable, row, table, target, targets, timeseries
from _window import window_increase

POOL = 'pool=~"$pool"'
TEAM = 'team=~"$team"'


def _wait_quantile(q: float) -> str:
    started = window_increase(f"mfumon_started_job_queue_wait_seconds_bucket{{{POOL}}}", "1h")
    buckets = f"max by (pool, team, le) ({started})"
    return f"histogram_quantile({q}, sum by (pool, le) ({buckets}))"


def capacity_queue() -> dict[str, Any]:
    """Per pool and team: satisfaction, queued GPUs and waits, quota use, free GPUs and how they are scattered."""
    panels = [
        row("Satisfaction"),
        timeseries(
            "Resource satisfaction by pool",
            targets((f"pool:mfumon_resource_satisfaction_ratio:max{{{POOL}}}", "{{pool}}")),
            unit="percentunit",
            description="GPUs allocated / GPUs requested by running and queued jobs (the scheduler's numbers when "
            "mfumon scheduler runs; held jobs do not count).",
        ),
        timeseries(
            "Resource satisfaction by team",
            targets((f"max by (team) (mfumon_team_resource_satisfaction_ratio{{{TEAM}}})", "{{team}}")),
            unit="percentunit",
        ),
        row("Queue"),
        timeseries(
            "GPUs queued",
            targets(
                (f"max by (pool) (mfumon_pool_gpus_queued{{{POOL}}})", "{{pool}}"),
                (f"max by (team) (mfumon_team_gpus_queued{{{TEAM}}})", "team {{team}}"),
            ),
            width=8,
        ),
        timeseries(
            "Longest wait of a queued job",
            targets((f"max by (pool) (mfumon_pool_max_queue_wait_seconds{{{POOL}}})", "{{pool}}")),
            unit="s",
            width=8,
        ),
        timeseries(
            "Queue wait of jobs that started (1h)",
            targets((_wait_quantile(0.5), "p50 {{pool}}"), (_wait_quantile(0.9), "p90 {{pool}}")),
            unit="s",
            description="Quantiles of the waits (eligible to start) of scheduler jobs that started in the last hour.",
            width=8,
        ),
        table(
            "Queued jobs",
            [
                target(
                    "max by (job_id, pool, team, name) (mfumon_job_queue_wait_seconds"
                    f" * on (job_id) group_left (pool, team, name) job_id:mfumon_job_info:topk1{{{POOL},{TEAM}}})",
                    instant=True,
                    table=True,
                    ref="A",
                ),
                target(
                    "max by (job_id, pool, team, name) ((mfumon_job_gpus_requested and mfumon_job_queue_wait_seconds)"
                    f" * on (job_id) group_left (pool, team, name) job_id:mfumon_job_info:topk1{{{POOL},{TEAM}}})",
                    instant=True,
                    table=True,
                    ref="B",
                ),
            ],
            renames={"Value #A": "waiting", "Value #B": "GPUs requested"},
            units={"waiting": "s"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
        ),
        row("Quota"),
        timeseries(
            "Quota use",
            targets((f"max by (team, pool) (mfumon_team_gpu_quota_used_ratio{{{TEAM}}})", "{{team}} {{pool}}")),
            unit="percentunit",
            description="GPUs held by the team's running jobs / its quota (pool empty: a quota across pools).",
        ),
        table(
            "Quotas",
            [
                target(f"max by (team, pool) (mfumon_team_gpu_quota{{{TEAM}}})", instant=True, table=True, ref="A"),
                target(
                    f"max by (team, pool) (mfumon_team_gpu_quota_used_ratio{{{TEAM}}})",
                    instant=True,
                    table=True,
                    ref="B",
                ),
            ],
            renames={"Value #A": "quota (GPUs)", "Value #B": "used"},
            units={"used": "percentunit"},
            width=12,
        ),
        row("Fragmentation"),
        timeseries(
            "Nodes by free GPUs",
            targets((f"max by (pool, free) (mfumon_pool_nodes_by_free_gpus{{{POOL}}})", "{{pool}}: {{free}} free")),
            stack=True,
            width=8,
        ),
        timeseries(
            "Largest free block vs free GPUs",
            targets(
                (f"max by (pool) (mfumon_pool_largest_free_block_gpus{{{POOL}}})", "largest block {{pool}}"),
                (f"max by (pool) (mfumon_pool_free_gpus{{{POOL}}})", "free {{pool}}"),
            ),
            description="The largest one-node request each pool can place now, against its free GPUs in total.",
            width=8,
        ),
        timeseries(
            "Fragmented GPUs",
            targets((f"max by (pool) (mfumon_pool_fragmented_gpus{{{POOL}}})", "{{pool}}")),
            description="GPUs of queued jobs that fit on no node whole although the pool has that many free.",
            width=8,
        ),
        row("Scheduler adapters"),
        table(
            "Last sync",
            [
                target(
                    "time() - max by (source, kind) (mfumon_scheduler_last_sync_timestamp_seconds)",
                    instant=True,
                    table=True,
                )
            ],
            renames={"Value": "seconds ago"},
            units={"seconds ago": "s"},
            width=12,
            height=6,
        ),
        timeseries(
            "Jobs listed by the scheduler",
            targets(("max by (source, status) (mfumon_scheduler_jobs)", "{{source}} {{status}}")),
            stack=True,
            width=12,
            height=6,
        ),
    ]
    pool_var = query_variable("pool", "Pool", "label_values(mfumon_pool_gpus_requested, pool)")
    team_var = query_variable("team", "Team", "label_values(mfumon_team_gpus_allocated, team)")
    return dashboard(
        uid="mfumon-capacity",
        title="mfu-monitor / Capacity and queue",
        description="Resource satisfaction, queue waits, quota use and fragmentation per pool and team.",
        variables=[pool_var, team_var],
        panels=panels,
    )
