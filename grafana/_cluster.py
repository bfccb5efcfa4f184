"""Scope every dashboard query to the `$cluster` variable, in one place, so that no panel can forget it.

On a global view (Thanos, Mimir, VictoriaMetrics or a Prometheus remote-write receiver) every cluster's series sit side
by side, told apart by the `cluster` label each cluster's Prometheus adds from its external_labels. :func:`scoped`
rewrites a panel's PromQL so that it (1) selects only the chosen clusters: every series selector gets
``cluster=~"$cluster"``; and (2) never merges them: every aggregation and every vector match keeps ``cluster`` (a bare
``sum(...)`` becomes ``sum by (cluster) (...)``), so picking several clusters, or All, draws one line per cluster. On
one cluster's own Prometheus the label is absent: "All" is the regex ``.*``, which an absent label matches, and grouping
by a missing label changes nothing.

A panel never reads a fleet-wide constant (``cluster:…:default``, ``…:effective``, ``kind:…:default``) and never
matches ``on ()``: :func:`scoped` refuses both. Where the rules run (each cluster's Prometheus, or a global ruler) a
constant is one series, but the dashboards read the global store, which holds it once per cluster (with ``cluster``)
when each cluster's Prometheus runs the rules and remote-writes what it records, and once without ``cluster`` when a
global ruler records it: no match of a constant is right in both. A comparison with a threshold is recorded per
series by the rules instead (e.g. ``job_id:mfumon_job_unreported_seconds:sum1d_over_grace``), and panels read that.
"""

from __future__ import annotations

import re

CLUSTER_MATCHER = 'cluster=~"$cluster"'
CLUSTER_VARIABLE_QUERY = 'label_values(up{job="mfumon-aggregator"}, cluster)'

_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
)
_AGGREGATIONS = frozenset(
    {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values"}
)
_TOKEN = re.compile(
    r'(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<range>\[[^\]]*\])"
    r"|(?P<labels>\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))"
    r"|(?P<number>(?<![\w:$])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[a-z]*)"
    r"|(?P<ident>(?<![\w:$])[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<other>.)",
    re.S,
)
#: Fleet-wide thresholds and defaults (mfumon-thresholds.yml): one per cluster or none on the global store.
_FLEET_CONSTANT = re.compile(r"^(kind|cluster):mfumon_[a-z0-9_]+:(default|override|effective)$")
_CLAUSE = re.compile(r"^(?P<kw>by|on)\s*\((?P<labels>[^)]*)\)$")


def _clause(text: str) -> str:
    """`by (x)` -> `by (cluster, x)`, `on (x)` -> `on (cluster, x)`, `by ()` -> `by (cluster)`; `on ()` is refused."""
    match = _CLAUSE.match(text)
    if match is None:
        return text
    labels = [label.strip() for label in match.group("labels").split(",") if label.strip()]
    if not labels and match.group("kw") == "on":
        raise ValueError(f"{text!r} in a panel: on the global store it meets one series per cluster")
    if "cluster" in labels:
        return text
    return f"{match.group('kw')} ({', '.join(['cluster', *labels])})"


def scoped(expr: str) -> str:
    """`expr` limited to the `$cluster` variable and grouped by cluster wherever it aggregates or matches."""
    out: list[str] = []
    tokens = list(_TOKEN.finditer(expr))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind, text = token.lastgroup, token.group()
        rest = expr[token.end() :]
        if kind == "labels":
            out.append(_clause(text))
        elif kind == "ident" and text in _AGGREGATIONS and rest.lstrip().startswith("("):
            out.append(f"{text} by (cluster) ")  # a bare aggregation: keep clusters apart
        elif kind == "ident" and _FLEET_CONSTANT.match(text):
            raise ValueError(f"fleet constant {text} in a panel: compare with it in a recording rule, read that")
        elif kind == "ident" and text not in _KEYWORDS | _AGGREGATIONS and not rest.lstrip().startswith("("):
            if rest.startswith("{"):
                close = expr.index("}", token.end())
                inner = expr[token.end() + 1 : close].strip()
                out.append(text + "{" + CLUSTER_MATCHER + (", " + inner if inner else "") + "}")
                while i + 1 < len(tokens) and tokens[i + 1].start() <= close:
                    i += 1
            else:
                out.append(text + "{" + CLUSTER_MATCHER + "}")
        else:
            out.append(text)
        i += 1
    return "".join(out)


def scoped_label_values(query: str) -> str:
    """`label_values(metric{...}, label)` limited to the chosen clusters (the cluster variable's own query is not)."""
    match = re.fullmatch(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)", query.strip())
    if match is None or match.group("label") == "cluster":
        return query
    return f"label_values({scoped(match.group('selector'))}, {match.group('label')})"
