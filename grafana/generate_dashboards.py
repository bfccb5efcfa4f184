"""Generate the mfu-monitor Grafana dashboards into grafana/dashboards/*.json.

    python grafana/generate_dashboards.py          # rewrite the JSON files
    python grafana/generate_dashboards.py --check  # exit 1 if the committed JSON differs from this script

Queries use the recording rules of deploy/prometheus/rules/ where one exists (replicas collapsed, windows
precomputed), and `max by (...)` over raw aggregator series otherwise, so that two aggregator replicas never
double a value.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _panels import (
    dashboard,
    query_variable,
    row,
    stat,
    table,
    target,
    targets,
    timeseries,
)

OUTPUT_DIR = Path(__file__).resolve().parent / "dashboards"
JOB_UID = "mfumon-job-drilldown"
JOB_LINK = f"/d/{JOB_UID}?var-job=${{__value.raw}}&${{__url_time_range}}"
MFU_STEPS = [(None, "red"), (0.2, "orange"), (0.35, "green")]

POOL_VAR = query_variable("pool", "Pool", "label_values(mfumon_job_info, pool)")
TEAM_VAR = query_variable("team", "Team", 'label_values(mfumon_job_info{pool=~"$pool"}, team)')
JOB_INFO = 'job_id:mfumon_job_info:topk1{pool=~"$pool", team=~"$team"}'


def _with_info(expr: str) -> str:
    """Join a per-job series with its name, team and pool, filtered by the pool and team variables."""
    return f"{expr} * on (job_id) group_left (name, team, pool) {JOB_INFO}"


def cluster_overview() -> dict[str, Any]:
    """Cluster MFU, achieved against peak FLOP/s, idle and wasted GPUs, worst jobs."""
    panels = [
        row("Now"),
        stat(
            "Cluster MFU (5m)",
            target("cluster:mfumon_mfu_ratio:avg5m"),
            unit="percentunit",
            thresholds=MFU_STEPS,
            description="Model FLOP/s of all jobs / dense peak of every GPU known, idle ones included.",
        ),
        stat("Cluster MFU (24h)", target("cluster:mfumon_mfu_ratio:avg1d"), unit="percentunit", thresholds=MFU_STEPS),
        stat(
            "MFU of allocated GPUs (5m)",
            target("cluster:mfumon_allocated_mfu_ratio:avg5m"),
            unit="percentunit",
            thresholds=MFU_STEPS,
            description="As cluster MFU, counting only GPUs that jobs hold.",
        ),
        stat("Idle GPUs", target("cluster:mfumon_gpus_idle:max"), decimals=0),
        stat(
            "Idle GPU-hours (24h)",
            target("cluster:mfumon_idle_gpu_seconds:sum1d / 3600"),
            decimals=0,
            description="GPUs no job held, integrated over the last 24 hours.",
        ),
        stat(
            "Wasted GPU-hours (24h)",
            target("cluster:mfumon_wasted_gpu_seconds:sum1d / 3600"),
            decimals=0,
            description="Allocated GPUs x (1 - MFU), integrated over the last 24 hours.",
        ),
        row("Utilization"),
        timeseries(
            "Cluster MFU",
            targets(
                ("cluster:mfumon_mfu_ratio:avg5m", "all GPUs (5m)"),
                ("cluster:mfumon_mfu_ratio:avg1h", "all GPUs (1h)"),
                ("cluster:mfumon_allocated_mfu_ratio:avg5m", "allocated GPUs (5m)"),
            ),
            unit="percentunit",
        ),
        timeseries(
            "Achieved vs peak FLOP/s",
            targets(
                ("max(mfumon_cluster_model_flops_per_second)", "achieved (model FLOP/s)"),
                ("cluster:mfumon_peak_flops_per_second:max", "dense peak of all GPUs"),
            ),
            unit="flops",
        ),
        timeseries(
            "GPUs by state",
            targets(("max by (state) (mfumon_cluster_gpus)", "{{state}}")),
            stack=True,
            width=8,
        ),
        timeseries(
            "Wasted GPUs by team",
            targets(('team:mfumon_wasted_gpus:sum{team=~"$team"}', "{{team}}")),
            stack=True,
            width=8,
            description="GPU-equivalents held but not turned into model FLOPs: allocated x (1 - MFU).",
        ),
        timeseries(
            "Wasted GPUs by pool",
            targets(('pool:mfumon_wasted_gpus:sum{pool=~"$pool"}', "{{pool}}")),
            stack=True,
            width=8,
        ),
        timeseries(
            "Pool MFU (1h)",
            targets(('pool:mfumon_mfu_ratio:avg1h{pool=~"$pool"}', "{{pool}}")),
            unit="percentunit",
        ),
        timeseries(
            "Team MFU (1h)",
            targets(('team:mfumon_mfu_ratio:avg1h{team=~"$team"}', "{{team}}")),
            unit="percentunit",
        ),
        row("Jobs"),
        table(
            "Worst jobs by MFU",
            [target(_with_info("bottomk(15, job_id:mfumon_job_mfu_ratio:max)"), instant=True, table=True)],
            renames={"Value": "MFU"},
            units={"MFU": "percentunit"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            sort_by="MFU",
            width=12,
        ),
        table(
            "Most wasted GPUs by job",
            [target(_with_info("topk(15, job_id:mfumon_wasted_gpus:max)"), instant=True, table=True)],
            renames={"Value": "wasted GPUs"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            width=12,
        ),
    ]
    return dashboard(
        uid="mfumon-cluster-overview",
        title="mfu-monitor / Cluster overview",
        description="How much of the cluster's GPU capacity turns into model FLOPs, and where it is lost.",
        variables=[POOL_VAR, TEAM_VAR],
        panels=panels,
    )


def _job_gpu_series(metric: str) -> str:
    """A GPU metric for each GPU the selected job holds (through mfumon_gpu_info's job_id)."""
    gpus = 'max by (node, gpu, uuid) (mfumon_gpu_info{job_id="$job"})'
    return f"max by (node, gpu) ({metric} * on (node, gpu, uuid) group_left () {gpus})"


def job_drilldown() -> dict[str, Any]:
    """One job: MFU against baseline, throughput, step breakdown and its GPUs' activity."""
    job = 'job_id="$job"'
    step = f"max(mfumon_job_step_seconds{{{job}}})"
    comm = f"max(mfumon_job_comm_ratio{{{job}}})"
    wait = f"max(mfumon_job_data_wait_ratio{{{job}}})"
    panels = [
        row("Job"),
        stat("MFU", target(f"job_id:mfumon_job_mfu_ratio:max{{{job}}}"), unit="percentunit", thresholds=MFU_STEPS),
        stat("Baseline MFU", target(f"job_id:mfumon_job_baseline_mfu_ratio:max{{{job}}}"), unit="percentunit"),
        stat(
            "HFU",
            target(f"max(mfumon_job_hfu_ratio{{{job}}})"),
            unit="percentunit",
            description="Hardware FLOPs utilization: counts activation recomputation, so HFU >= MFU.",
        ),
        stat("Tokens/s", target(f"max(mfumon_job_tokens_per_second{{{job}}})"), unit="short"),
        stat("GPUs allocated", target(f"max(mfumon_job_gpus_allocated{{{job}}})"), decimals=0),
        stat("Wasted GPUs", target(f"job_id:mfumon_wasted_gpus:max{{{job}}}"), decimals=1),
        table(
            "Job",
            [
                target(
                    f"max by (job_id, kind, name, team, pool, model, gpu_model, dtype) (mfumon_job_info{{{job}}})",
                    instant=True,
                    table=True,
                )
            ],
            hidden=("Time", "Value"),
            height=3,
        ),
        row("Efficiency"),
        timeseries(
            "MFU against baseline and alert threshold",
            targets(
                (f"job_id:mfumon_job_mfu_ratio:max{{{job}}}", "MFU"),
                (f"max(mfumon_job_hfu_ratio{{{job}}})", "HFU"),
                (f"job_id:mfumon_job_baseline_mfu_ratio:max{{{job}}}", "baseline"),
                (f"job_id:mfumon_job_mfu_threshold_ratio:effective{{{job}}}", "alert threshold"),
            ),
            unit="percentunit",
        ),
        timeseries(
            "Model FLOP/s vs peak",
            targets(
                (f"max(mfumon_job_model_flops_per_second{{{job}}})", "achieved"),
                (f"max(mfumon_job_peak_flops_per_second{{{job}}})", "dense peak of the job's GPUs"),
            ),
            unit="flops",
        ),
        timeseries(
            "Throughput",
            targets((f"max(mfumon_job_tokens_per_second{{{job}}})", "tokens/s")),
            unit="short",
            width=8,
        ),
        timeseries(
            "Step time breakdown",
            targets(
                (f"{step} * (1 - ({comm} or vector(0)) - ({wait} or vector(0)))", "compute and other"),
                (f"{step} * {comm}", "exposed communication"),
                (f"{step} * {wait}", "data wait"),
            ),
            unit="s",
            stack=True,
            width=8,
            description="Mean step time split by the job's reported exposed communication and data-wait ratios.",
        ),
        timeseries(
            "Communication and data-wait share of step",
            targets((comm, "exposed communication"), (wait, "data wait")),
            unit="percentunit",
            max_value=1,
            width=8,
        ),
        row("The job's GPUs"),
        timeseries(
            "Tensor-core activity per GPU",
            targets(
                (_job_gpu_series("mfumon_gpu_tensor_active_ratio"), "{{node}}/{{gpu}}"),
                (f"job_id:mfumon_gpu_tensor_active_ratio:avg{{{job}}}", "job average"),
            ),
            unit="percentunit",
            max_value=1,
        ),
        timeseries(
            "SM activity per GPU",
            targets(
                (_job_gpu_series("mfumon_gpu_sm_active_ratio"), "{{node}}/{{gpu}}"),
                (f"job_id:mfumon_gpu_sm_active_ratio:avg{{{job}}}", "job average"),
            ),
            unit="percentunit",
            max_value=1,
        ),
        timeseries(
            "Utilization (nvidia-smi) per GPU",
            targets((_job_gpu_series("mfumon_gpu_utilization_ratio"), "{{node}}/{{gpu}}")),
            unit="percentunit",
            max_value=1,
            description="Share of time any kernel ran: high with low MFU means slow kernels, not idle GPUs.",
        ),
        timeseries(
            "Power per GPU",
            targets((_job_gpu_series("mfumon_gpu_power_watts"), "{{node}}/{{gpu}}")),
            unit="watt",
        ),
    ]
    job_var = query_variable(
        "job",
        "Job",
        'label_values(mfumon_job_info{pool=~"$pool", team=~"$team"}, job_id)',
        multi=False,
        include_all=False,
    )
    return dashboard(
        uid=JOB_UID,
        title="mfu-monitor / Job drill-down",
        description="One job's MFU against its baseline, where its step time goes, and what its GPUs do.",
        variables=[POOL_VAR, TEAM_VAR, job_var],
        panels=panels,
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


DASHBOARDS = {
    "mfumon-cluster-overview.json": cluster_overview,
    "mfumon-job-drilldown.json": job_drilldown,
    "mfumon-nodes-gpus.json": nodes_gpus,
    "mfumon-pools.json": pools,
}


def render_all() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render_all().items():
        path = OUTPUT_DIR / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python grafana/generate_dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
