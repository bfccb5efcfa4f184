"""The "Fleet health" dashboard: the drain list, the errors that silently cost MFU, idle energy and fault rates."""

from __future__ import annotations

from typing import Any

from _panels import dashboard, query_variable, row, stat, table, target, targets, timeseries
from _window import window_increase

NODE = 'node=~"$node"'
POOL = 'pool=~"$pool"'
#: What mfumon remediate's drains cost over the last day, alike in PromQL and MetricsQL.
REMEDIATION_GPU_SECONDS_1D = window_increase("mfumon_remediation_gpu_seconds_total", "1d")


def _per_gpu_rate(metric: str) -> str:
    return f"max by (node, gpu) (rate({metric}{{{NODE}}}[$__rate_interval]))"


def _per_port(metric: str, fn: str = "rate") -> str:
    return f"max by (node, device, port) ({fn}({metric}{{{NODE}}}[$__rate_interval]))"


def fleet_health() -> dict[str, Any]:
    """Which nodes to drain and why; GPU, NVLink, PCIe and InfiniBand errors; what idle GPUs cost; fault rates."""
    gpu_legend = "{{node}}/{{gpu}}"
    port_legend = "{{node}} {{device}}:{{port}}"
    panels = [
        row("Drain list"),
        stat(
            "Nodes to drain",
            # 0 per cluster shown when none of its nodes is listed (not one unlabelled 0 beside the clusters)
            target(
                f"count(count by (node) (node:mfumon_node_drain:max{{{NODE}}}))"
                " or on (cluster) (0 * max(mfumon_cluster_nodes))",
                instant=True,
            ),
            thresholds=[(None, "green"), (1, "red")],
            description="Nodes failing a check that needs them out of the scheduler (GET /v1/nodes?drain=true).",
        ),
        stat(
            "Degraded nodes",
            target('max(mfumon_cluster_nodes_by_health{status="degraded"})', instant=True),
            thresholds=[(None, "green"), (1, "orange")],
            description="Nodes failing a check that slows jobs without needing a drain (throttling, error rates).",
        ),
        stat(
            "Idle GPU power",
            target(f"sum(pool:mfumon_idle_power_watts:rate5m{{{POOL}}})", instant=True),
            unit="watt",
            description="Power drawn now by idle GPUs (up, no job, no compute work).",
        ),
        stat(
            "Idle GPU energy (24h)",
            target(f"sum(pool:mfumon_idle_energy_joules:increase1d{{{POOL}}}) / 3.6e6", instant=True),
            unit="kwatth",
        ),
        stat(
            "Idle GPU-hours (24h)",
            target(f"sum(pool:mfumon_idle_gpu_hours:increase1d{{{POOL}}})", instant=True),
            decimals=1,
        ),
        stat(
            "Faults per 1,000 GPU-months",
            target("cluster:mfumon_gpu_faults_per_1000_gpu_months:rate7d", instant=True),
            decimals=1,
            description="GPUs that started failing a drain check over the last 7 days, per 1,000 GPU-months.",
        ),
        table(
            "Nodes to drain, with the reason",
            [
                target(
                    f"node:mfumon_node_drain:max{{{NODE}}} * on (node) group_left (pool) node:mfumon_node_info:topk1",
                    instant=True,
                    table=True,
                )
            ],
            hidden=("Time", "Value"),
            description="Reasons are health checks; the runbook MfumonNodeDrain says what each means and what to do.",
            width=12,
        ),
        table(
            "Failing checks",
            [
                target(f"max by (node, gpu, check) (mfumon_gpu_health{{{NODE}}}) == 0", instant=True, table=True),
                target(f"max by (node, check) (mfumon_node_health{{{NODE}}}) == 0", instant=True, table=True, ref="B"),
            ],
            hidden=("Time", "Value", "Value #A", "Value #B"),
            description="Every failing GPU check (gpu set) and node check (gpu empty): drain and degrade alike.",
            width=12,
        ),
        row("GPU errors"),
        timeseries(
            "NVLink errors per second",
            targets(
                (_per_gpu_rate("mfumon_gpu_nvlink_crc_flit_errors_total"), "CRC flit " + gpu_legend),
                (_per_gpu_rate("mfumon_gpu_nvlink_crc_data_errors_total"), "CRC data " + gpu_legend),
                (_per_gpu_rate("mfumon_gpu_nvlink_replay_errors_total"), "replay " + gpu_legend),
                (_per_gpu_rate("mfumon_gpu_nvlink_recovery_errors_total"), "recovery " + gpu_legend),
            ),
            width=8,
            description="Replays retransmit; recoveries retrain the link (a flapping NVLink, drain).",
        ),
        timeseries(
            "PCIe replays per second",
            targets((_per_gpu_rate("mfumon_gpu_pcie_replays_total"), gpu_legend)),
            width=8,
        ),
        timeseries(
            "Remapped rows and pending remaps",
            targets(
                (
                    f"max by (node, gpu) (mfumon_gpu_remapped_rows_uncorrectable_total{{{NODE}}})",
                    "uncorrectable " + gpu_legend,
                ),
                (
                    f"max by (node, gpu) (mfumon_gpu_remapped_rows_correctable_total{{{NODE}}})",
                    "correctable " + gpu_legend,
                ),
                (f"max by (node, gpu) (mfumon_gpu_row_remap_pending{{{NODE}}}) > 0", "pending reset " + gpu_legend),
            ),
            width=8,
        ),
        row("InfiniBand / RoCE"),
        timeseries(
            "Link down events",
            targets((_per_port("mfumon_ib_port_link_downed_total", "increase"), port_legend)),
            bars=True,
            width=8,
            description="A port whose link_downed grows is flapping: every rank of the job waits on it.",
        ),
        timeseries(
            "Port errors per second",
            targets(
                (_per_port("mfumon_ib_port_symbol_errors_total"), "symbol " + port_legend),
                (_per_port("mfumon_ib_port_receive_errors_total"), "receive " + port_legend),
                (_per_port("mfumon_ib_port_link_error_recovery_total"), "recovery " + port_legend),
            ),
            width=8,
        ),
        timeseries(
            "Port throughput",
            targets(
                (_per_port("mfumon_ib_port_transmit_bytes_total"), "tx " + port_legend),
                (_per_port("mfumon_ib_port_receive_bytes_total"), "rx " + port_legend),
            ),
            unit="Bps",
            width=8,
        ),
        row("Idle energy and faults"),
        timeseries(
            "Idle GPU power by pool",
            targets((f"pool:mfumon_idle_power_watts:rate5m{{{POOL}}}", "{{pool}}")),
            unit="watt",
            stack=True,
            width=8,
            description="Energy drawn by idle GPUs per second (up, no job, no compute work): an idle GPU is not free.",
        ),
        timeseries(
            "Idle GPU-hours by pool (24h)",
            targets((f"pool:mfumon_idle_gpu_hours:increase1d{{{POOL}}}", "{{pool}}")),
            width=8,
        ),
        timeseries(
            "Faults per 1,000 GPU-months (7d) by pool",
            targets((f"pool:mfumon_gpu_faults_per_1000_gpu_months:rate7d{{{POOL}}}", "{{pool}}")),
            width=8,
            description="Large fleets report about 3 GPU failures per 1,000 GPUs per month.",
        ),
        row("Remediation"),
        timeseries(
            "Remediation actions (1h) by action and outcome",
            targets(
                (
                    "sum by (action, outcome) (cluster:mfumon_remediation_actions:increase1h)",
                    "{{action}} {{outcome}}",
                )
            ),
            width=12,
            description="Decisions of mfumon remediate over the last hour: done, failed, dry runs, and drains or "
            "resumes withheld by a rail (kill switch, budget, rate limit, a person's drain). GET /v1/remediations.",
        ),
        table(
            "Remediation decisions (1h) by reason",
            [target("cluster:mfumon_remediation_actions:increase1h > 0", instant=True, table=True)],
            hidden=("Time",),
            description="The reason is the failing check (a drain), healthy (a resume), or the rail that withheld it.",
            width=12,
        ),
        timeseries(
            "Remediation GPU-hours (24h): drained, and lost before the drain",
            targets(
                (
                    f"max by (category) ({REMEDIATION_GPU_SECONDS_1D}) / 3600 or vector(0)",
                    "{{category}}",
                )
            ),
            width=24,
            description="drained: GPU-hours the loop kept failing nodes out of scheduling (its cost in capacity, "
            "counted when it resumes them); lost_before_drain: the drained nodes' jobs' GPU-hours between the fault "
            "and the drain (what acting sooner saves); 0 while the loop drained nothing (a dry run). Per drain: GET "
            "/v1/remediations; per week: mfumon report.",
        ),
    ]
    return dashboard(
        uid="mfumon-fleet-health",
        title="mfu-monitor / Fleet health",
        description="The drain list, the errors that silently cost MFU on some nodes, idle GPU energy, fault rates.",
        variables=[
            query_variable("node", "Node", "label_values(mfumon_gpu_info, node)"),
            query_variable("pool", "Pool", "label_values(mfumon_pool_idle_gpu_seconds_total, pool)"),
        ],
        panels=panels,
    )
