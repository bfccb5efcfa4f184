"""Where the GPU-hours go: the waste waterfall of the cluster, its pools and teams over the chosen time range, the
jobs that wasted most, and what it all cost (:mod:`_cost`); the job drill-down's waterfall panels.

Every figure is the growth of the durable waterfall counters over the dashboard's range (``$__range``, read with
:func:`window_increase`, alike in PromQL and MetricsQL), so the numbers are the GPU-hours of that window, whatever it
is. Replicas export the same counters: each series is
collapsed with ``max by`` before it is summed.
"""

from __future__ import annotations

from typing import Any

from _cost import cost_energy_panels
from _panels import JOB_LINK, Panel, dashboard, query_variable, row, stat, table, target, targets, timeseries
from _window import window_increase

STEP = "data_wait|comm_exposed|bubble|compute"
BADPUT = "init|checkpoint|eval|lost|stalled"
JOB_CATEGORIES = f"{BADPUT}|{STEP}"
GOODPUT_STEPS = [(None, "red"), (0.7, "orange"), (0.9, "green")]


def _increase(family: str, by: str, selector: str = "") -> str:
    """GPU-seconds per ``by`` labels over the range, replicas collapsed (``by`` includes ``category``)."""
    return f"max by ({by}) ({window_increase(f'{family}{{{selector}}}', '$__range')})"


def _hours(family: str, group: str, selector: str) -> str:
    """GPU-hours by ``group`` and category over the range."""
    by = f"{group}, category" if group else "category"
    return f"{_increase(family, by, selector)} / 3600"


def _category_hours(family: str, category: str) -> str:
    selector = 'category="' + category + '"'
    return f"sum({_increase(family, 'category', selector)}) / 3600"


def _by(aggregation: str, group: str) -> str:
    """``sum by (group) `` or, with no group, a bare ``sum`` (which the cluster scoping keeps apart per cluster; an
    empty ``by ()`` would add the clusters together)."""
    return f"{aggregation} by ({group}) " if group else aggregation


def _goodput(family: str, group: str, selector: str) -> str:
    """Step time ÷ the jobs' allocated time (idle and unreported GPUs are no job's) over the range."""
    by = f"{group}, category" if group else "category"
    sep = ", " if selector else ""
    steps = _increase(family, by, f'{selector}{sep}category=~"{STEP}"')
    jobs = _increase(family, by, f'{selector}{sep}category=~"{JOB_CATEGORIES}"')
    return f"{_by('sum', group)}({steps}) / ({_by('sum', group)}({jobs}) > 0)"


def _flops_ratio(scope: str, group: str, selector: str) -> str:
    """Useful model FLOPs ÷ peak FLOPs over the jobs' allocated time: the lifetime MFU of the window."""
    model = f"{_by('max', group)}({window_increase(f'mfumon_{scope}_model_flops_total{{{selector}}}', '$__range')})"
    peak = f"{_by('max', group)}({window_increase(f'mfumon_{scope}_peak_flops_total{{{selector}}}', '$__range')})"
    return f"{_by('sum', group)}({model}) / ({_by('sum', group)}({peak}) > 0)"


def _scope_panels(scope: str, label: str, variable: str) -> list[Panel]:
    """A pool's or a team's waterfall over the range, its goodput and MFU."""
    family = f"mfumon_{scope}_gpu_seconds_total"
    selector = f'{label}=~"${variable}"'
    return [
        timeseries(
            f"GPUs by category, per {label}",
            targets(
                (f"max by ({label}, category) (rate({family}{{{selector}}}[5m]))", f"{{{{{label}}}}} {{{{category}}}}")
            ),
            stack=True,
            description=f"GPU-equivalents each {label} spends in each category of the waterfall (5-minute rate).",
        ),
        table(
            f"GPU-hours by {label} and category",
            [target(_hours(family, label, selector), instant=True, table=True)],
            hidden=("Time",),
            renames={"Value": "GPU-hours"},
            sort_by=label,
            width=6,
        ),
        table(
            f"Goodput and MFU by {label}",
            [
                target(_goodput(family, label, selector), instant=True, table=True, ref="A"),
                target(_flops_ratio(scope, label, selector), instant=True, table=True, ref="B"),
            ],
            renames={"Value #A": "goodput", "Value #B": "MFU"},
            units={"goodput": "percentunit", "MFU": "percentunit"},
            sort_by=label,
            width=6,
        ),
    ]


def gpu_hours() -> dict[str, Any]:
    """The cluster's, pools' and teams' waterfalls over the chosen range, and the jobs that wasted most."""
    cluster = "mfumon_cluster_gpu_seconds_total"
    not_computing = _increase(
        "mfumon_job_gpu_seconds_total", "job_id, category", f'category=~"{BADPUT}|data_wait|comm_exposed|bubble"'
    )
    badput = _increase("mfumon_job_gpu_seconds_total", "job_id, category", f'category=~"{BADPUT}"')
    panels = [
        row("Cluster over the chosen range"),
        stat(
            "GPU-hours",
            target(f"sum({_increase(cluster, 'category')}) / 3600", instant=True),
            decimals=0,
            description="Every GPU the exporters report, whatever it did: the waterfall's categories add up to it.",
        ),
        stat(
            "Goodput",
            target(_goodput(cluster, "", ""), instant=True),
            unit="percentunit",
            thresholds=GOODPUT_STEPS,
            description="Step time ÷ the GPU time jobs held (start-up, checkpoints, evaluation, lost and stalled time "
            "are badput).",
        ),
        stat(
            "MFU of the jobs' time",
            target(_flops_ratio("cluster", "", ""), instant=True),
            unit="percentunit",
            description="Useful model FLOPs ÷ the dense peak of the GPUs over all the time jobs held them.",
        ),
        stat(
            "Idle GPU-hours",
            target(_category_hours(cluster, "idle"), instant=True),
            decimals=0,
        ),
        stat(
            "Unreported GPU-hours",
            target(_category_hours(cluster, "unreported"), instant=True),
            decimals=0,
            description="Busy GPUs of jobs that report no throughput: their waste is unknown.",
        ),
        stat(
            "Lost to failures (GPU-hours)",
            target(_category_hours(cluster, "lost"), instant=True),
            decimals=1,
            description="Progress redone after failures: from the last checkpoint to the failure.",
        ),
        table(
            "Waterfall (GPU-hours)",
            [target(_hours(cluster, "", ""), instant=True, table=True)],
            renames={"Value": "GPU-hours"},
            width=6,
            height=10,
        ),
        timeseries(
            "GPUs by category",
            targets((f"max by (category) (rate({cluster}[5m]))", "{{category}}")),
            stack=True,
            width=18,
            height=10,
            description="GPU-equivalents in each category of the waterfall (5-minute rate of the GPU-seconds).",
        ),
        row("Pools"),
        *_scope_panels("pool", "pool", "pool"),
        row("Teams"),
        *_scope_panels("team", "team", "team"),
        row("Top wasters"),
        table(
            "Jobs that wasted most (GPU-hours not computing)",
            [
                target(f"topk(10, sum by (job_id) ({not_computing})) / 3600", instant=True, table=True, ref="A"),
                target(f"sum by (job_id) ({badput}) / 3600", instant=True, table=True, ref="B"),
                target("max by (job_id) (mfumon_job_goodput_ratio)", instant=True, table=True, ref="C"),
            ],
            renames={"Value #A": "not computing (GPU-h)", "Value #B": "badput (GPU-h)", "Value #C": "goodput (life)"},
            units={"goodput (life)": "percentunit"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            sort_by="not computing (GPU-h)",
            height=10,
        ),
        *cost_energy_panels(),
    ]
    pool_var = query_variable("pool", "Pool", "label_values(mfumon_pool_gpu_seconds_total, pool)")
    team_var = query_variable("team", "Team", "label_values(mfumon_team_gpu_seconds_total, team)")
    return dashboard(
        uid="mfumon-gpu-hours",
        title="mfu-monitor / Where the GPU-hours go",
        description="The waste waterfall over the chosen time range: cluster, pools, teams, and the jobs that wasted "
        "most; what it cost and the energy it drew. GET /v1/jobs/<job_id>/diagnosis says why a job wasted its share, "
        "GET /v1/chargeback who pays for what.",
        variables=[pool_var, team_var],
        panels=panels,
    )


def job_waterfall_panels(job: str) -> list[Panel]:
    """The job drill-down's waterfall: where the job's GPU-seconds went, its goodput and straggler signals."""
    family = f"mfumon_job_gpu_seconds_total{{{job}}}"
    return [
        row("Where the job's GPU-hours go"),
        stat(
            "Goodput",
            target(f"max(mfumon_job_goodput_ratio{{{job}}})"),
            unit="percentunit",
            thresholds=GOODPUT_STEPS,
            description="Productive step time ÷ allocated time over the job's life.",
        ),
        stat(
            "Lifetime MFU",
            target(f"max(mfumon_job_lifetime_mfu_ratio{{{job}}})"),
            unit="percentunit",
            description="Useful model FLOPs ÷ dense peak over the job's whole allocated time.",
        ),
        stat(
            "Compute MFU",
            target(f"max(mfumon_job_compute_mfu_ratio{{{job}}})"),
            unit="percentunit",
            description="The same over its compute time only: how good the compute is once the waste is taken out.",
        ),
        stat(
            "Tensor-activity spread",
            target(f"job_id:mfumon_job_gpu_tensor_active_spread_ratio:max{{{job}}}"),
            unit="percentunit",
            thresholds=[(None, "green"), (0.2, "red")],
            description="(max - min) / max tensor activity over the job's GPUs; above 20% a straggler sets the pace.",
        ),
        stat(
            "Step-time deviation",
            target(f"job_id:mfumon_job_step_time_deviation_ratio:max{{{job}}}"),
            unit="percentunit",
            thresholds=[(None, "green"), (0.2, "red")],
        ),
        stat(
            "Allocated GPU-hours",
            target(f"sum(max by (category) ({family})) / 3600"),
            decimals=1,
        ),
        table(
            "Job waterfall (GPU-hours, its life)",
            [target(f"max by (category) ({family}) / 3600", instant=True, table=True)],
            renames={"Value": "GPU-hours"},
            width=6,
            height=10,
        ),
        timeseries(
            "Job GPUs by category",
            targets((f"max by (category) (rate({family}[5m]))", "{{category}}")),
            stack=True,
            width=18,
            height=10,
            description="GPU-equivalents in each category (5-minute rate). The findings and advice: "
            "GET /v1/jobs/<job_id>/diagnosis.",
        ),
    ]
