"""The workload dashboards: the cluster overview and the drill-down into one job."""

from __future__ import annotations

import re
from typing import Any

from _goodput import job_waterfall_panels
from _panels import (
    JOB_LINK,
    JOB_UID,
    dashboard,
    query_variable,
    row,
    stat,
    table,
    target,
    targets,
    timeseries,
)
from _window import window_increase

MFU_STEPS = [(None, "red"), (0.2, "orange"), (0.35, "green")]

POOL_VAR = query_variable("pool", "Pool", "label_values(mfumon_job_info, pool)")
TEAM_VAR = query_variable("team", "Team", 'label_values(mfumon_job_info{pool=~"$pool"}, team)')
JOB_INFO = 'job_id:mfumon_job_info:topk1{pool=~"$pool", team=~"$team"}'


def _with_info(expr: str) -> str:
    """Join a per-job series with its name, team and pool, filtered by the pool and team variables. An expression
    with `and`/`or`/`unless` is parenthesised: `*` binds tighter, so `a and b * info` would join `b`, not the result,
    and return `a` without the info labels."""
    if re.search(r"\b(?:and|or|unless)\b", expr):
        expr = f"({expr})"
    return f"{expr} * on (job_id) group_left (name, team, pool) {JOB_INFO}"


_STEPS = "data_wait|comm_exposed|bubble|compute"
_JOB_CATEGORIES = f"init|checkpoint|eval|lost|stalled|{_STEPS}"


def _fleet_panels() -> list[dict[str, Any]]:
    """One line per cluster (a global view, the `cluster` variable on several or All): MFU, GPU states, goodput and
    the drain list side by side. On one cluster's Prometheus each shows that cluster."""

    def gpu_seconds(categories: str) -> str:
        growth = window_increase(f'mfumon_cluster_gpu_seconds_total{{category=~"{categories}"}}', "1h")
        return f"max by (category) ({growth})"

    return [
        row("Clusters"),
        timeseries(
            "MFU by cluster",
            [target("cluster:mfumon_mfu_ratio:avg5m", "{{cluster}}")],
            unit="percentunit",
            max_value=1,
            width=6,
        ),
        timeseries(
            "GPUs by cluster and state",
            [target("cluster:mfumon_gpus:max", "{{cluster}} {{state}}")],
            stack=True,
            width=6,
        ),
        timeseries(
            "Goodput by cluster (1h)",
            [
                target(
                    f"sum({gpu_seconds(_STEPS)}) / (sum({gpu_seconds(_JOB_CATEGORIES)}) > 0)",
                    "{{cluster}}",
                )
            ],
            unit="percentunit",
            max_value=1,
            description="Share of the GPU-seconds jobs held over the last hour spent in training steps.",
            width=6,
        ),
        table(
            "Nodes to drain by cluster",
            [target("count(node:mfumon_node_drain:max == 1)", instant=True, table=True)],
            renames={"Value": "nodes to drain"},
            width=6,
        ),
    ]


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
        stat(
            "Reported coverage (5m)",
            target("cluster:mfumon_reported_coverage_ratio:avg5m"),
            unit="percentunit",
            thresholds=[(None, "orange"), (0.8, "green")],
            description="GPUs in jobs that report throughput / busy GPUs: the share of cluster MFU that rests on "
            "reports; the rest is the hardware estimate (tensor activity x SM clock / max SM clock).",
        ),
        stat(
            "Unverified GPUs",
            target("max(mfumon_cluster_gpus_unverified)"),
            decimals=0,
            description="GPUs that job reports claim and no exporter confirms: counted in no state and no MFU.",
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
            targets(("cluster:mfumon_gpus:max", "{{state}}")),
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
        *_cluster_truth_panels(),
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
        *_fleet_panels(),
    ]
    return dashboard(
        uid="mfumon-cluster-overview",
        title="mfu-monitor / Cluster overview",
        description="How much of the cluster's GPU capacity turns into model FLOPs, and where it is lost.",
        variables=[POOL_VAR, TEAM_VAR],
        panels=panels,
    )


#: Jobs and nodes busy without reports for longer than the grace in the last day, as the rules record them. The
#: rules compare with the grace where they run; a panel never matches a fleet constant itself: on a global store fed
#: by Prometheus servers that run the rules, the grace is there once per cluster (grafana/_cluster.py refuses one).
UNREPORTED_LONG = "and on (job_id) job_id:mfumon_job_unreported_seconds:sum1d_over_grace"
UNATTRIBUTED_LONG = "and on (node) node:mfumon_unattributed_busy_seconds:sum1d_over_grace"
HELD_COLUMNS = {
    "Value #A": "GPUs",
    "Value #B": "hardware MFU",
    "Value #C": "hours (24h)",
    "Value #D": "GPU-hours (24h)",
}


def _instant(*exprs: str) -> list[dict[str, Any]]:
    """Instant table queries with refIds A, B, C..., merged by a table on their labels."""
    return [target(expr, instant=True, table=True, ref=chr(ord("A") + i)) for i, expr in enumerate(exprs)]


def _cluster_truth_panels() -> list[dict[str, Any]]:
    """Where the cluster's numbers come from: coverage by reports, the cross-check, GPUs busy without reports."""
    checked = "job_id:mfumon_job_mfu_hardware_agreement_ratio:max"
    return [
        row("Cluster truth: reports and hardware"),
        timeseries(
            "Reported coverage",
            targets(
                ("cluster:mfumon_reported_coverage_ratio:avg5m", "cluster"),
                ('pool:mfumon_reported_coverage_ratio:avg5m{pool=~"$pool"}', "{{pool}}"),
            ),
            unit="percentunit",
            max_value=1,
            description="GPUs in reporting jobs / busy GPUs. Below 1, MFU rests partly on hardware estimates.",
        ),
        table(
            "MFU cross-check: reported vs hardware",
            _instant(
                _with_info(f"job_id:mfumon_job_mfu_ratio:max and on (job_id) {checked}"),
                _with_info(f"job_id:mfumon_job_hardware_mfu_ratio:max and on (job_id) {checked}"),
                _with_info(checked),
            ),
            description="Reported MFU / hardware estimate: above 1.2 the job claims more model FLOPs than its tensor "
            "cores executed (model size, seq_len, GPU count, dtype); below 0.5 it leaves executed work uncounted.",
            renames={"Value #A": "reported MFU", "Value #B": "hardware MFU", "Value #C": "reported / hardware"},
            units={"reported MFU": "percentunit", "hardware MFU": "percentunit"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            sort_by="reported / hardware",
            width=12,
        ),
        table(
            "Busy but not reporting: jobs",
            _instant(
                _with_info(f"job_id:mfumon_job_gpus_unreported:max {UNREPORTED_LONG}"),
                _with_info(f"job_id:mfumon_job_hardware_mfu_ratio:max {UNREPORTED_LONG}"),
                _with_info(f"job_id:mfumon_job_unreported_seconds:sum1d / 3600 {UNREPORTED_LONG}"),
                _with_info(f"job_id:mfumon_job_unreported_gpu_seconds:sum1d / 3600 {UNREPORTED_LONG}"),
            ),
            description="Jobs holding GPUs without reporting throughput for longer than the grace "
            "(cluster:mfumon_unreported_grace_seconds:effective) in the last day: take the list to their owners.",
            renames=HELD_COLUMNS,
            units={"hardware MFU": "percentunit"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            width=12,
        ),
        table(
            "Busy but not reporting: GPUs with no job id",
            _instant(
                f"node:mfumon_gpus_unattributed_busy:max {UNATTRIBUTED_LONG}",
                f"node:mfumon_unattributed_hardware_mfu_ratio:avg {UNATTRIBUTED_LONG}",
                f"node:mfumon_unattributed_busy_seconds:sum1d / 3600 {UNATTRIBUTED_LONG}",
                f"node:mfumon_unattributed_busy_gpu_seconds:sum1d / 3600 {UNATTRIBUTED_LONG}",
            ),
            description="Nodes whose GPUs run compute processes that no job id was found for, past the grace.",
            renames=HELD_COLUMNS,
            units={"hardware MFU": "percentunit"},
            width=12,
        ),
    ]


def _job_gpu_series(metric: str) -> str:
    """A GPU metric for each GPU the selected job holds (through mfumon_gpu_info's job_id)."""
    gpus = 'max by (node, gpu, uuid) (mfumon_gpu_info{job_id="$job"})'
    return f"max by (node, gpu) ({metric} * on (node, gpu, uuid) group_left () {gpus})"


_NO_INSPECTOR = (
    " Empty when no node agent of the job reads NCCL Inspector output (mfumon exporter --nccl-inspector.dir; "
    "docs/operators/nccl-inspector.md)."
)


def _collective_panels(job: str) -> list[dict[str, Any]]:
    """The job's NCCL collectives as the node agents read them from NCCL Inspector (issue 61), by process group:
    bus bandwidth and time share over the agents' last interval, seconds per collective, records lost; the ranks
    their peers wait for and the weakest links."""

    def per_second(family: str, by: str) -> str:  # the agents' counters: an agent restart is a reset rate() takes
        return f"max by ({by}) (rate({family}{{{job}}}[$__rate_interval]))"

    return [
        row("Collectives (NCCL Inspector)"),
        timeseries(
            "Collective bus bandwidth by group",
            targets(
                (
                    f"max by (job_id, group) (mfumon_job_collective_bus_bandwidth_bytes_per_second{{{job}}})",
                    "{{group}}",
                )
            ),
            unit="Bps",
            description="Bus bytes / GPU-timed seconds of the job's collectives per process group over the agents' "
            "last read interval (NCCL's bus bandwidth, comparable across group sizes)." + _NO_INSPECTOR,
            width=6,
        ),
        timeseries(
            "Time in collectives by group",
            targets((f"max by (job_id, group) (mfumon_job_collective_time_ratio{{{job}}})", "{{group}}")),
            unit="percentunit",
            max_value=1,
            description="Share of the group's ranks' time in collective kernels, overlapped with compute or not "
            "(exposed communication is the reported or profiled figure above)." + _NO_INSPECTOR,
            width=6,
        ),
        timeseries(
            "Collective GPU-seconds per second by collective",
            targets(
                (
                    per_second("mfumon_job_collective_seconds_total", "job_id, group, collective"),
                    "{{group}} {{collective}}",
                )
            ),
            stack=True,
            description="GPU-seconds per second the job's ranks spend in each collective's kernels (GPU-timed), "
            "by process group: about the ranks in collectives at once." + _NO_INSPECTOR,
            width=6,
        ),
        timeseries(
            "Inspector records lost per second",
            targets((per_second("mfumon_job_collective_records_lost_total", "job_id, group"), "{{group}}")),
            description="Records NCCL overwrote before the agent read them (left out of the other figures): the "
            "agent reads too seldom for the job's rate of collectives." + _NO_INSPECTOR,
            width=6,
        ),
        timeseries(
            "Ranks their peers wait for",
            targets(
                (
                    f"max by (job_id, group, collective, node, rank) (mfumon_job_collective_rank_lag_seconds{{{job}}})",
                    "{{group}} {{collective}} {{node}} rank {{rank}}",
                )
            ),
            unit="s",
            description="Per operation, how much longer the communicator's median rank spends in the collective "
            "kernel than this rank: the others wait inside theirs for it, so a late rank (a slow or throttled GPU, "
            "a straggling data loader) has the shortest kernel. The largest 3 per group and collective; the "
            "slow_rank finding names the worst." + _NO_INSPECTOR,
            width=12,
        ),
        timeseries(
            "Weakest links against the fabric",
            targets(
                (
                    f"min by (job_id, group, node, peer_node) (mfumon_job_link_expected_ratio{{{job}}})",
                    "{{group}} {{node}} - {{peer_node}}",
                )
            ),
            unit="percentunit",
            description="Point-to-point (Send/Recv, NCCL 2.30) bus bandwidth of the weakest GPU pair between two "
            "nodes (or inside one) / what NVLink carries one way, or the weaker end's ports per GPU; messages of "
            "8 MiB or more only. Below 25 % the slow_link finding names the pair." + _NO_INSPECTOR,
            width=12,
        ),
    ]


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
        stat(
            "Hardware MFU (estimate)",
            target(f"job_id:mfumon_job_hardware_mfu_ratio:max{{{job}}}"),
            unit="percentunit",
            thresholds=MFU_STEPS,
            description="Tensor-pipe activity x SM clock / max SM clock, mean over the job's GPUs: tensor work "
            "executed (recompute included), against the dense peak of the dtype the pipes ran.",
        ),
        stat(
            "Reported / hardware MFU",
            target(f"job_id:mfumon_job_mfu_hardware_agreement_ratio:max{{{job}}}"),
            decimals=2,
            thresholds=[(None, "orange"), (0.5, "green"), (1.2, "red")],
            description="Above 1.2 the job claims more model FLOPs than ran; below 0.5 it leaves work uncounted.",
        ),
        stat(
            "Unverified GPUs",
            target(f"job_id:mfumon_job_gpus_unverified:max{{{job}}}"),
            decimals=0,
            description="GPUs the job reports (num_gpus) beyond those exporters attribute to it.",
        ),
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
            "MFU against the hardware estimate",
            targets(
                (f"job_id:mfumon_job_mfu_ratio:max{{{job}}}", "reported MFU"),
                (f"max(mfumon_job_hfu_ratio{{{job}}})", "reported HFU"),
                (f"job_id:mfumon_job_hardware_mfu_ratio:max{{{job}}}", "hardware estimate"),
            ),
            unit="percentunit",
            description="The hardware estimate counts recompute, so it tracks HFU more than MFU.",
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
        timeseries(
            "Exposed communication by parallelism (latest profile)",
            targets((f"max by (group) (mfumon_job_profile_exposed_comm_ratio{{{job}}})", "{{group}}")),
            unit="percentunit",
            stack=True,
            description="From the job's latest on-demand profile (mfumon profile JOB_ID): communication with no "
            "compute kernel running, / device time, by process group (tp, pp, dp, ep, cp, other). Empty until the "
            "job is profiled; its age is time() - mfumon_job_profile_timestamp_seconds.",
        ),
        *_collective_panels(job),
        *job_waterfall_panels(job),
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
