"""How much a durable counter grew over a window, written so that PromQL and MetricsQL give the same answer.

``increase()`` is not portable: Prometheus extrapolates to the window's edges and needs two samples inside it, while
VictoriaMetrics (MetricsQL) does not extrapolate, takes the sample before the window as its base and counts a young
series from zero when its first value looks small. The aggregator's durable counters (stored in the database: they
never reset, and every replica exports the same values) need none of that, so the boards and the rules read them with
arithmetic both engines evaluate alike, by cases:

1. the series existed at the window's start: its value now minus its value then (exact);
2. it did not, and some scrape of its aggregator inside the window (``up`` summed: the successful ones) lacks it: it
   was born inside the window, and durable counters are born at zero, so all of it is the window's (exact);
3. otherwise the store has not seen the window's start (it is younger, or the aggregator was down then): the value now
   minus the first the store saw (never more than the truth).

A series that ended (a finished job's) drops out with it, on the boards as in the rules (deploy/prometheus/rules
spells out the same cases); tests/deploy/test_engine_neutral.py checks that no board or rule reads a durable counter
with ``increase()``, the promtool tests pin each case, and tests/deploy/test_victoria_metrics.py compares the engines.
"""

from __future__ import annotations


def window_increase(series: str, window: str) -> str:
    """The growth of the durable counter `series` (a selector) over `window` (``1h``, ``$__range``), per series."""
    born_inside = (
        f"count_over_time({series}[{window}]) < on (cluster, job, instance) group_left () sum_over_time(up[{window}])"
    )
    return (
        f"({series} - {series} offset {window})"
        f" or ({series} and ({born_inside}))"
        f" or ({series} - min_over_time({series}[{window}]))"
    )
