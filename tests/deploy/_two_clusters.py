"""Rules across clusters: the shipped promtool tests rewritten for two clusters, and a static check of every clause.

A global view (Thanos, Mimir, VictoriaMetrics, a Prometheus receiver) holds every cluster's series, told apart only by
the `cluster` label each Prometheus adds from its external_labels. :func:`two_cluster_suite` turns each unit test in
deploy/prometheus/tests into one where every input series exists twice, as cluster "a" and cluster "b", and every
expected sample and alert is expected once per cluster with the same value. A rule that drops `cluster` from an
aggregation yields a sample without it (or a doubled sum); a join that matches without it meets two series per key
and fails as many-to-many: both fail the rewritten tests. :func:`clause_problems` reads every expression for the same
mistakes without running anything, so a rule no unit test reaches is still checked.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CLUSTERS = ("a", "b")

#: Fleet-wide constants: thresholds and defaults an operator sets once (recorded from vector(), or the first of an
#: override and a default). They carry no cluster, are matched with `on ()` or `on (kind)`, and their samples are
#: expected once, not per cluster.
_FLEET_CONSTANT = re.compile(r"^(kind|cluster):mfumon_[a-z0-9_]+:(default|override|effective)$")
#: Alerts whose `absent()` arm cannot know which clusters exist: expected once when it fires with no series at all.
ABSENT_ALERTS = frozenset({"MfumonAggregatorDown"})

_SELECTOR = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)?(?:\{(?P<labels>.*)\})?$", re.S)
_TRANSPARENT = re.compile(r"^round\((?P<inner>[^()]*)\)$")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_AGGREGATION = re.compile(
    r"\b(sum|min|max|avg|count|group|stddev|stdvar|topk|bottomk|quantile|count_values)\s*"
    r"(?:(?P<kw>by|without)\s*\((?P<labels>[^)]*)\)\s*)?\("
)
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "on", "ignoring", "group_left", "group_right"})
_MATCHING = re.compile(r"\b(?P<kw>on|ignoring)\s*\((?P<labels>[^)]*)\)")


def is_fleet_constant(name: str) -> bool:
    return bool(_FLEET_CONSTANT.match(name))


def with_cluster(selector: str, cluster: str) -> str:
    """`name{l="v"}` with `cluster="<cluster>"` added (a promtool series or expected-sample label string)."""
    match = _SELECTOR.match(selector.strip())
    if match is None:
        raise ValueError(f"not a series selector: {selector!r}")
    labels = match.group("labels")
    inner = f'cluster="{cluster}"' + (f",{labels}" if labels and labels.strip() else "")
    return f"{match.group('name') or ''}{{{inner}}}"


def _series_name(selector: str) -> str | None:
    match = _SELECTOR.match(selector.strip())
    return match.group("name") if match else None


@dataclass(frozen=True)
class Rewritten:
    """One rewritten test file and what it checks."""

    path: Path
    expectations: int  # expected samples and alerts now checked per cluster
    dropped: tuple[str, ...]  # expressions left out: they aggregate across clusters on purpose (e.g. count by)


def expr_target(expr: str) -> str | None:
    """The selector a promql_expr_test reads, if it reads one series name (through label-keeping round())."""
    text = expr.strip()
    if (match := _TRANSPARENT.match(text)) is not None:
        text = match.group("inner").strip()
    return text if _SELECTOR.match(text) and _series_name(text) else None


def _rewrite_expr_test(case: dict[str, Any]) -> dict[str, Any] | None:
    target = expr_target(case["expr"])
    if target is None:
        return None
    samples = case.get("exp_samples") or []
    out = []
    for sample in samples:
        name = _series_name(sample["labels"]) or ""
        if is_fleet_constant(name):
            out.append(sample)
            continue
        out.extend({**sample, "labels": with_cluster(sample["labels"], c)} for c in CLUSTERS)
    return {**case, "exp_samples": out}


def _rewrite_alert_test(case: dict[str, Any]) -> dict[str, Any]:
    alerts = []
    for alert in case.get("exp_alerts") or []:
        labels = alert.get("exp_labels") or {}
        if case["alertname"] in ABSENT_ALERTS and "instance" not in labels:
            alerts.append(alert)
            continue
        alerts.extend({**alert, "exp_labels": {**labels, "cluster": c}} for c in CLUSTERS)
    return {**case, "exp_alerts": alerts}


def _rewrite_group(group: dict[str, Any]) -> tuple[dict[str, Any], int, list[str]]:
    out = copy.deepcopy(group)
    out["input_series"] = [
        {**series, "series": with_cluster(series["series"], c)}
        for series in group.get("input_series") or []
        for c in CLUSTERS
    ]
    expr_tests, dropped = [], []
    for case in group.get("promql_expr_test") or []:
        rewritten = _rewrite_expr_test(case)
        if rewritten is None:
            dropped.append(case["expr"].strip())
        else:
            expr_tests.append(rewritten)
    if "promql_expr_test" in group:
        out["promql_expr_test"] = expr_tests
    if "alert_rule_test" in group:
        out["alert_rule_test"] = [_rewrite_alert_test(case) for case in group["alert_rule_test"]]
    checked = sum(len(c.get("exp_samples") or []) for c in expr_tests) + sum(
        len(c.get("exp_alerts") or []) for c in out.get("alert_rule_test") or []
    )
    return out, checked, dropped


def two_cluster_suite(tests_dir: Path, out_dir: Path) -> list[Rewritten]:
    """Write each test file of `tests_dir` rewritten for clusters a and b into `out_dir` (a sibling of the rules)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(tests_dir.glob("*.test.yml")):
        doc = yaml.safe_load(path.read_text())
        checked, dropped = 0, []
        groups = []
        for group in doc["tests"]:
            rewritten, n, d = _rewrite_group(group)
            groups.append({**rewritten, "name": f"{group['name']} (clusters a and b)"})
            checked += n
            dropped += d
        target = out_dir / path.name
        target.write_text(yaml.safe_dump({**doc, "tests": groups}, sort_keys=False, width=200))
        written.append(Rewritten(target, checked, tuple(dropped)))
    return written


def _without_strings(expr: str) -> str:
    return _STRING.sub('""', expr)


def _operand_names(expr: str, start: int) -> set[str]:
    """Series names inside the parenthesised operand that starts at `start` (the index of its '(')."""
    depth, end = 0, start
    for end in range(start, len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[end], 0)
        if depth == 0:
            break
    return set(re.findall(r"[a-z_]+:mfumon_[a-z0-9_]+:[a-z0-9_]+|mfumon_[a-z0-9_]+", expr[start : end + 1]))


def _operand_end(text: str, start: int) -> int:
    """The end of the operand that starts at `start`: a parenthesised expression, a call or aggregation with its
    arguments (`max by (kind) (x)`), or a selector with its matchers and range."""
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    if i < len(text) and text[i] != "(":
        word = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", text[i:])
        if word is None:
            return i
        i += word.end()
        after = re.match(r"\s*(?:(?:by|without)\s*\([^)]*\)\s*)?(?=\()", text[i:])
        if after is None:  # a selector
            braces = re.match(r"\s*\{[^}]*\}", text[i:])
            i += braces.end() if braces else 0
            brackets = re.match(r"\s*\[[^\]]*\]", text[i:])
            return i + (brackets.end() if brackets else 0)
        i += after.end()
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j + 1
    return len(text)


def _matched_names(text: str, match_end: int) -> tuple[str | None, set[str]]:
    """After an `on (...)` clause ending at `match_end`: its group modifier, if any, and the series names of the
    operand that follows."""
    rest = text[match_end:]
    group = re.match(r"\s*(?P<kw>group_left|group_right)\s*(?:\([^)]*\))?", rest)
    start = match_end + (group.end() if group else 0)
    operand = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(?:by|without)\s*\([^)]*\)", " ", text[start : _operand_end(text, start)])
    names = {
        m.group()
        for m in re.finditer(r"(?<![\w:.])[A-Za-z_:][A-Za-z0-9_:]*(?![\w:]*\s*\()", operand)
        if m.group() not in _KEYWORDS
    }
    return (group.group("kw") if group else None), names


def clause_problems(expr: str, *, dashboard: bool = False) -> list[str]:
    """Each aggregation or vector match in `expr` that can mix clusters.

    Every `by (...)` and every non-empty `on (...)` must name `cluster`; an aggregation with neither `by` nor
    `without` must be over fleet constants only; `without`/`ignoring` must not drop `cluster`.

    A rule may match `on ()` (or `on (kind)`) a fleet constant, and nothing else: the operand brought in (on the right,
    with `group_left` or none) must read fleet constants only. Where the rules run a constant is one series: on each
    cluster's Prometheus, or on a global ruler that receives no recorded series (docs/operators/deploy.md, "Where the
    rules run"). A dashboard query (`dashboard=True`) reads the global store instead, which holds each constant once
    per cluster when the clusters' Prometheus servers run the rules and remote-write what they record: it may use no
    `on ()`, read no fleet constant, and aggregate nothing, constants included, without `cluster`.
    """
    text = _without_strings(expr)
    problems = []
    for match in _AGGREGATION.finditer(text):
        keyword, labels = match.group("kw"), match.group("labels")
        names = _operand_names(text, match.end() - 1)
        over_constants = not dashboard and bool(names) and all(is_fleet_constant(n) for n in names)
        label_set = {label.strip() for label in (labels or "").split(",") if label.strip()}
        drops = "cluster" in label_set if keyword == "without" else "cluster" not in label_set
        if keyword is not None and drops and not (keyword == "by" and over_constants):
            problems.append(f"{match.group(0).strip()} drops cluster")
        elif keyword is None and not over_constants:
            problems.append(f"{match.group(0).strip()} aggregates every cluster together")
    for match in _MATCHING.finditer(text):
        label_set = {label.strip() for label in match.group("labels").split(",") if label.strip()}
        keyword = match.group("kw")
        if keyword == "on" and "cluster" not in label_set and (not label_set or label_set == {"kind"}):
            group, names = _matched_names(text, match.end())
            if dashboard and not label_set:
                problems.append(f"{match.group(0)} in a dashboard: the global store can hold one series per cluster")
            elif group == "group_right":
                problems.append(f"{match.group(0)} group_right: match the fleet constant on the right (group_left)")
            elif not names or not all(is_fleet_constant(n) for n in names):
                problems.append(f"{match.group(0)} matches across clusters: {', '.join(sorted(names)) or '?'}")
        elif keyword == "on" and "cluster" not in label_set:
            problems.append(f"{match.group(0)} matches across clusters")
        if keyword == "ignoring" and "cluster" in label_set:
            problems.append(f"{match.group(0)} matches across clusters")
    if dashboard:
        read = re.findall(r"[a-z_]+:mfumon_[a-z0-9_]+:[a-z0-9_]+", text)
        constants = sorted({n for n in read if is_fleet_constant(n)})
        problems += [f"reads the fleet constant {n}: the global store can hold one per cluster" for n in constants]
    return problems
