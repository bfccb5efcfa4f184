"""Every metric the aggregator exposes, gathered in one place from the modules that declare and render them.

Each resource module of :mod:`mfumon.api.metrics` declares its families beside the code that renders them (node,
job, cluster, capacity, health, durable, self_metrics); this module only collects them, under the names readers of
the whole list use (the README's metric reference check, the alerting rules' tests). Nothing renders from here.
"""

from __future__ import annotations

from mfumon.api.metrics import cluster, self_metrics
from mfumon.api.metrics._text import Family
from mfumon.api.metrics.capacity import CAPACITY_FAMILIES
from mfumon.api.metrics.collective import COLLECTIVE_FAMILIES
from mfumon.api.metrics.cost import COST_FAMILIES
from mfumon.api.metrics.durable import DURABLE_FAMILIES
from mfumon.api.metrics.health import HEALTH_COUNTER_METRICS, HEALTH_FAMILIES, HEALTH_SUMMARY_FAMILIES, IB_PORT_METRICS
from mfumon.api.metrics.job import JOB_FAMILIES
from mfumon.api.metrics.node import COUNTER_METRICS, GPU_FAMILIES, GPU_LINE_METRICS, THROTTLE_GROUPS
from mfumon.api.metrics.regression import REGRESSION_FAMILIES
from mfumon.api.metrics.remediation import REMEDIATION_FAMILIES

__all__ = [
    "CAPACITY_FAMILIES",
    "COLLECTIVE_FAMILIES",
    "COST_FAMILIES",
    "COUNTER_METRICS",
    "DURABLE_FAMILIES",
    "GPU_FAMILIES",
    "GPU_LINE_METRICS",
    "HEALTH_COUNTER_METRICS",
    "HEALTH_FAMILIES",
    "HEALTH_SUMMARY_FAMILIES",
    "IB_PORT_METRICS",
    "JOB_FAMILIES",
    "REGRESSION_FAMILIES",
    "REMEDIATION_FAMILIES",
    "SUMMARY_FAMILIES",
    "THROTTLE_GROUPS",
    "Family",
]

#: Cluster, pool, team and self-metrics: few series, rendered on every scrape, in this order.
SUMMARY_FAMILIES: dict[str, Family] = {**cluster.CLUSTER_FAMILIES, **self_metrics.SELF_FAMILIES}
