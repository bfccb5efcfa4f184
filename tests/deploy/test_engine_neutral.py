"""No board or rule reads a durable counter with increase(): its answer differs between PromQL and MetricsQL.

Prometheus extrapolates increase() to the window's edges and needs two samples in it; VictoriaMetrics takes the sample
before the window as the base and counts a young series from zero. The aggregator's durable counters never reset, so
the boards (grafana/_window.py) and the rules measure their growth with arithmetic both engines evaluate alike;
tests/deploy/test_victoria_metrics.py compares the two on the same samples, and the promtool tests pin each case. This
static check keeps a new panel or rule from going back to increase() on them.
"""

from __future__ import annotations

import re

import pytest

from mfumon.api.metrics.cost import COST_FAMILIES
from mfumon.api.metrics.durable import DURABLE_FAMILIES
from mfumon.api.metrics.remediation import REMEDIATION_FAMILIES
from tests.deploy._support import all_rules, exposed_metric_names, iter_queries, load_dashboards

#: Counters stored in the database (they survive restarts; every replica exports the same values), beyond the
#: durable and remediation declarations: the cost and energy counters (issue 60; not their gauges), the jobs'
#: waterfalls (their ledgers) and the started jobs' queue waits.
DURABLE = {
    *DURABLE_FAMILIES,
    *REMEDIATION_FAMILIES,
    *(name for name, family in COST_FAMILIES.items() if family.type == "counter"),
    "mfumon_job_gpu_seconds_total",
    "mfumon_job_serving_gpu_seconds_total",
    "mfumon_started_job_queue_wait_seconds_bucket",
}
_INCREASE = re.compile(r"\bincrease\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)")


def durable_increases(expr: str) -> list[str]:
    """The durable counters `expr` reads with increase()."""
    return [name for name in _INCREASE.findall(expr) if name in DURABLE]


def _shipped() -> list[tuple[str, str]]:
    queries = [(f"{name}: {title}", expr) for name, d in load_dashboards().items() for title, expr in iter_queries(d)]
    return queries + [(rule.get("record") or rule["alert"], rule["expr"]) for rule in all_rules()]


def test_the_durable_counters_are_exported() -> None:
    assert not DURABLE - exposed_metric_names()


def test_no_board_or_rule_reads_a_durable_counter_with_increase() -> None:
    offending = [(where, names) for where, expr in _shipped() if (names := durable_increases(expr))]
    assert not offending


def test_window_growth_is_what_they_use() -> None:
    # the boards' GPU-hours and queue waits, the goodput, waste, unreported and remediation rules
    users = [where for where, expr in _shipped() if "min_over_time(mfumon_" in expr]
    assert len(users) >= 30, users


@pytest.mark.parametrize(
    "expr",
    [
        'max by (category) (increase(mfumon_cluster_gpu_seconds_total{category="idle"}[1h]))',
        "histogram_quantile(0.5, sum by (le) (increase( mfumon_started_job_queue_wait_seconds_bucket[1h])))",
        "sum(increase(mfumon_remediation_actions_total[30m])) > 0",
        'sum by (team) (increase(mfumon_team_cost_total{category="energy"}[1d]))',
    ],
)
def test_a_planted_increase_is_caught(expr: str) -> None:
    assert durable_increases(expr)


def test_increase_of_a_counter_that_resets_is_left_alone() -> None:
    # per-process and node counters reset with their process: only increase() handles that
    assert not durable_increases("max by (node) (increase(mfumon_gpu_xid_errors_total[10m])) > 0")
