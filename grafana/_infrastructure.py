"""The infrastructure dashboards: nodes and their GPUs, and pools."""

from __future__ import annotations

from typing import Any

from _panels import (
    JOB_LINK,
    dashboard,
    query_variable,
    row,
    table,
    target,
    targets,
    timeseries,
)


def _per_gpu(metric: str) -> str:
    return f'max by (node, gpu) ({metric}{{node=~"$node"}})'


def nodes_gpus() -> dict[str, Any]:
    """Every GPU of the selected nodes: activity, power, temperature, memory, NVLink, errors."""
    legend = "{{node}}/{{gpu}}"
    panels = [
        row("Nodes"),
        table(
            "Seconds since last sample",
            [
                target(
                    'time() - max by (node) (mfumon_node_last_seen_timestamp_seconds{node=~"$node"})',
                    instant=True,
                    table=True,
                )
            ],
            renames={"Value": "silent for"},
            units={"silent for": "s"},
            width=8,
        ),
        table(
            "GPUs",
            [
                target(
                    'max by (node, gpu, uuid, model, job_id, mig_profile) (mfumon_gpu_info{node=~"$node"})',
                    instant=True,
                    table=True,
                )
            ],
            hidden=("Time", "Value"),
            links={"job_id": ("Job drill-down", JOB_LINK)},
            width=16,
        ),
        row("Activity"),
        timeseries(
            "Utilization (nvidia-smi)",
            targets((_per_gpu("mfumon_gpu_utilization_ratio"), legend)),
            unit="percentunit",
            max_value=1,
            width=8,
        ),
        timeseries(
            "SM active",
            targets((_per_gpu("mfumon_gpu_sm_active_ratio"), legend)),
            unit="percentunit",
            max_value=1,
            width=8,
        ),
        timeseries(
            "Tensor-core active",
            targets((_per_gpu("mfumon_gpu_tensor_active_ratio"), legend)),
            unit="percentunit",
            max_value=1,
            width=8,
        ),
        timeseries(
            "Hardware MFU estimate",
            targets((_per_gpu("mfumon_gpu_hardware_mfu_ratio"), legend)),
            unit="percentunit",
            max_value=1,
            width=8,
            description="Tensor-pipe activity x SM clock / max SM clock: what the tensor cores executed against the "
            "dense peak. Absent on GPUs without tensor counters.",
        ),
        timeseries(
            "SM occupancy",
            targets((_per_gpu("mfumon_gpu_sm_occupancy_ratio"), legend)),
            unit="percentunit",
            max_value=1,
            width=8,
        ),
        timeseries(
            "DRAM active",
            targets((_per_gpu("mfumon_gpu_dram_active_ratio"), legend)),
            unit="percentunit",
            max_value=1,
            width=8,
        ),
        timeseries(
            "SM clock",
            targets(
                (_per_gpu("mfumon_gpu_sm_clock_hz"), legend),
                (f"max({_per_gpu('mfumon_gpu_max_sm_clock_hz')})", "max SM clock"),
            ),
            unit="hertz",
            width=8,
        ),
        row("Power, temperature, memory"),
        timeseries("Power", targets((_per_gpu("mfumon_gpu_power_watts"), legend)), unit="watt", width=8),
        timeseries(
            "Temperature", targets((_per_gpu("mfumon_gpu_temperature_celsius"), legend)), unit="celsius", width=8
        ),
        timeseries(
            "Memory used",
            targets(
                (f"{_per_gpu('mfumon_gpu_memory_used_bytes')} / {_per_gpu('mfumon_gpu_memory_total_bytes')}", legend)
            ),
            unit="percentunit",
            max_value=1,
            width=8,
        ),
        row("Interconnect and health"),
        timeseries(
            "NVLink throughput",
            targets(
                (_per_gpu("mfumon_gpu_nvlink_tx_bytes_per_second"), "tx {{node}}/{{gpu}}"),
                (_per_gpu("mfumon_gpu_nvlink_rx_bytes_per_second"), "rx {{node}}/{{gpu}}"),
            ),
            unit="Bps",
            width=8,
        ),
        timeseries(
            "XID and uncorrectable ECC errors",
            targets(
                (
                    'max by (node, gpu) (increase(mfumon_gpu_xid_errors_total{node=~"$node"}[$__rate_interval]))',
                    "XID {{node}}/{{gpu}}",
                ),
                (
                    'max by (node, gpu) (increase(mfumon_gpu_ecc_uncorrected_total{node=~"$node"}[$__rate_interval]))',
                    "ECC {{node}}/{{gpu}}",
                ),
            ),
            bars=True,
            width=8,
        ),
        timeseries(
            "Throttled and lost GPUs",
            targets(
                (
                    'sum by (reason) (max by (node, gpu, reason) (mfumon_gpu_throttled{node=~"$node"}))',
                    "throttled: {{reason}}",
                ),
                ('sum(1 - max by (node, gpu) (mfumon_gpu_up{node=~"$node"}))', "lost"),
            ),
            width=8,
            description="How many of the selected GPUs are clock-throttled, by reason, and how many are unreadable.",
        ),
    ]
    node_var = query_variable("node", "Node", "label_values(mfumon_gpu_info, node)")
    return dashboard(
        uid="mfumon-nodes-gpus",
        title="mfu-monitor / Nodes and GPUs",
        description="Per-GPU activity, power, temperature, memory, NVLink and error counters.",
        variables=[node_var],
        panels=panels,
    )


def pools() -> dict[str, Any]:
    """Per pool: resource satisfaction, requested against allocated GPUs, pending jobs, MFU and waste."""
    pool = 'pool=~"$pool"'
    panels = [
        row("Demand"),
        timeseries(
            "Resource satisfaction",
            targets((f"pool:mfumon_resource_satisfaction_ratio:max{{{pool}}}", "{{pool}}")),
            unit="percentunit",
            description="GPUs allocated to the pool's jobs / GPUs they requested.",
        ),
        timeseries(
            "GPUs requested vs allocated",
            targets(
                (f"max by (pool) (mfumon_pool_gpus_requested{{{pool}}})", "requested {{pool}}"),
                (f"max by (pool) (mfumon_pool_gpus_allocated{{{pool}}})", "allocated {{pool}}"),
            ),
        ),
        timeseries(
            "GPUs by state",
            targets((f"pool:mfumon_gpus:max{{{pool}}}", "{{pool}} {{state}}")),
            stack=True,
            description="Every GPU of the pool's nodes: reporting, unreported (busy, no reports), idle, down.",
        ),
        timeseries(
            "Reported coverage",
            targets((f"pool:mfumon_reported_coverage_ratio:avg5m{{{pool}}}", "{{pool}}")),
            unit="percentunit",
            max_value=1,
            description="GPUs in reporting jobs / busy GPUs of the pool.",
        ),
        timeseries(
            "Pending jobs",
            targets((f"max by (pool) (mfumon_pool_jobs_pending{{{pool}}})", "{{pool}}")),
            width=8,
        ),
        timeseries(
            "Pool MFU",
            targets(
                (f"pool:mfumon_mfu_ratio:avg5m{{{pool}}}", "{{pool}} (5m)"),
                (f"pool:mfumon_mfu_ratio:avg1d{{{pool}}}", "{{pool}} (24h)"),
            ),
            unit="percentunit",
            width=8,
        ),
        timeseries(
            "Wasted GPUs",
            targets((f"pool:mfumon_wasted_gpus:sum{{{pool}}}", "{{pool}}")),
            stack=True,
            width=8,
        ),
        row("Jobs"),
        table(
            "Jobs by pool",
            [
                target(
                    "max by (job_id, pool, team, name) (mfumon_job_gpus_requested"
                    f" * on (job_id) group_left (pool, team, name) job_id:mfumon_job_info:topk1{{{pool}}})",
                    instant=True,
                    table=True,
                    ref="A",
                ),
                target(
                    "max by (job_id, pool, team, name) (mfumon_job_gpus_allocated"
                    f" * on (job_id) group_left (pool, team, name) job_id:mfumon_job_info:topk1{{{pool}}})",
                    instant=True,
                    table=True,
                    ref="B",
                ),
            ],
            renames={"Value #A": "GPUs requested", "Value #B": "GPUs allocated"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
        ),
        table(
            "Wasted GPU-hours (24h)",
            [target(f"pool:mfumon_wasted_gpu_seconds:sum1d{{{pool}}} / 3600", instant=True, table=True)],
            renames={"Value": "wasted GPU-hours"},
            width=12,
            height=6,
        ),
    ]
    pool_var = query_variable("pool", "Pool", "label_values(mfumon_pool_gpus_requested, pool)")
    return dashboard(
        uid="mfumon-pools",
        title="mfu-monitor / Pools",
        description="Whether each pool's jobs get the GPUs they ask for, and how well they use them.",
        variables=[pool_var],
        panels=panels,
    )
