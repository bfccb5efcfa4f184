"""Builders for Grafana's classic dashboard JSON model, shared by generate_dashboards.py.

The dashboards are generated rather than hand-edited so that every panel uses the same datasource variable,
units, legend style and grid, and so that panel ids and positions never collide.
"""

from __future__ import annotations

from typing import Any

from _cluster import CLUSTER_VARIABLE_QUERY, scoped, scoped_label_values

SCHEMA_VERSION = 39  # classic JSON model; Grafana 10.4+ loads it and migrates it forward (up to 42)
GRID_WIDTH = 24
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TAGS = ["mfu-monitor"]

Panel = dict[str, Any]


JOB_UID = "mfumon-job-drilldown"
# data link from a job_id cell (with the clusters shown, so that the drill-down finds the job)
JOB_LINK = f"/d/{JOB_UID}?var-job=${{__value.raw}}&${{cluster:queryparam}}&${{__url_time_range}}"
# Every job_id cell that links to the drill-down also links to the job's page on the aggregator (/ui/jobs/<id>):
# the diagnosis findings, events and before/after comparison live there. ``$aggregator`` is the aggregator's URL as
# the browser reaches it (a text box on each dashboard, like the datasource picker).
AGGREGATOR_URL = "http://localhost:8000"
JOB_PAGE_LINK = "${aggregator}/ui/jobs/${__value.raw}"


def target(
    expr: str, legend: str = "", *, instant: bool = False, table: bool = False, ref: str = "A"
) -> dict[str, Any]:
    """One Prometheus query of a panel, limited to the `$cluster` variable and kept apart per cluster."""
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": scoped(expr),
        "legendFormat": legend or "__auto",
        "range": not instant,
        "instant": instant,
        "format": "table" if table else "time_series",
        "refId": ref,
    }


def targets(*queries: tuple[str, str]) -> list[dict[str, Any]]:
    """Several (expr, legend) queries with refIds A, B, C..."""
    return [target(expr, legend, ref=chr(ord("A") + i)) for i, (expr, legend) in enumerate(queries)]


def _field_config(
    unit: str,
    *,
    min_value: float | None,
    max_value: float | None,
    overrides: list[dict[str, Any]] | None = None,
    **custom: Any,
) -> dict:
    defaults: dict[str, Any] = {"unit": unit, "custom": custom}
    if min_value is not None:
        defaults["min"] = min_value
    if max_value is not None:
        defaults["max"] = max_value
    return {"defaults": defaults, "overrides": overrides or []}


def right_axis(ref: str, unit: str, label: str) -> dict[str, Any]:
    """A time-series override: query `ref`'s series drawn against a second y axis, on the right, in `unit`."""
    return {
        "matcher": {"id": "byFrameRefID", "options": ref},
        "properties": [
            {"id": "unit", "value": unit},
            {"id": "custom.axisPlacement", "value": "right"},
            {"id": "custom.axisLabel", "value": label},
        ],
    }


def timeseries(
    title: str,
    queries: list[dict[str, Any]],
    *,
    unit: str = "short",
    description: str = "",
    stack: bool = False,
    bars: bool = False,
    min_value: float | None = 0,
    max_value: float | None = None,
    overrides: list[dict[str, Any]] | None = None,
    width: int = 12,
    height: int = 8,
) -> Panel:
    """A time-series graph; `overrides` (e.g. :func:`right_axis`) change some series' field settings."""
    custom = {
        "drawStyle": "bars" if bars else "line",
        "fillOpacity": 40 if (stack or bars) else 10,
        "lineWidth": 1,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
    }
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": queries,
        "fieldConfig": _field_config(unit, min_value=min_value, max_value=max_value, overrides=overrides, **custom),
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True, "calcs": ["lastNotNull"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "gridPos": {"w": width, "h": height},
    }


def stat(
    title: str,
    query: dict[str, Any],
    *,
    unit: str = "short",
    description: str = "",
    thresholds: list[tuple[float | None, str]] | None = None,
    decimals: int | None = None,
    width: int = 4,
    height: int = 4,
) -> Panel:
    """A single big number; thresholds are (from_value, color) with None for the base step."""
    steps = [{"value": v, "color": c} for v, c in (thresholds or [(None, "blue")])]
    defaults: dict[str, Any] = {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}}
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": [query],
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background" if thresholds else "value",
            "graphMode": "area",
            "textMode": "auto",
        },
        "gridPos": {"w": width, "h": height},
    }


def bargauge(
    title: str,
    query: dict[str, Any],
    *,
    unit: str = "short",
    description: str = "",
    min_value: float | None = 0,
    max_value: float | None = None,
    width: int = 8,
    height: int = 8,
) -> Panel:
    """Horizontal bars, one per series of an instant query (its legend names the bar), each its latest value."""
    defaults: dict[str, Any] = {
        "unit": unit,
        "color": {"mode": "palette-classic"},
        "thresholds": {"mode": "absolute", "steps": [{"value": None, "color": "blue"}]},
    }
    if min_value is not None:
        defaults["min"] = min_value
    if max_value is not None:
        defaults["max"] = max_value
    return {
        "type": "bargauge",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": [query],
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "horizontal",
            "displayMode": "gradient",
            "valueMode": "color",
            "namePlacement": "auto",
            "showUnfilled": True,
            "sizing": "auto",
        },
        "gridPos": {"w": width, "h": height},
    }


def _links(title: str, url: str) -> list[dict[str, Any]]:
    """A column's data links: the given one, and the job's page beside the drill-down."""
    out: list[dict[str, Any]] = [{"title": title, "url": url}]
    if url == JOB_LINK:
        out.append({"title": "Job page (diagnosis, events, compare)", "url": JOB_PAGE_LINK, "targetBlank": True})
    return out


def table(
    title: str,
    queries: list[dict[str, Any]],
    *,
    description: str = "",
    hidden: tuple[str, ...] = ("Time",),
    renames: dict[str, str] | None = None,
    units: dict[str, str] | None = None,
    links: dict[str, tuple[str, str]] | None = None,
    sort_by: str | None = None,
    width: int = 24,
    height: int = 8,
) -> Panel:
    """A table of instant queries, merged on their labels; `links` maps a column to (title, url)."""
    overrides = [
        {"matcher": {"id": "byName", "options": col}, "properties": [{"id": "unit", "value": unit}]}
        for col, unit in (units or {}).items()
    ]
    overrides += [
        {
            "matcher": {"id": "byName", "options": col},
            "properties": [{"id": "links", "value": _links(link_title, url)}],
        }
        for col, (link_title, url) in (links or {}).items()
    ]
    transformations: list[dict[str, Any]] = [{"id": "merge", "options": {}}]
    transformations.append(
        {
            "id": "organize",
            "options": {
                "excludeByName": {name: True for name in hidden},
                "renameByName": renames or {},
            },
        }
    )
    options: dict[str, Any] = {"showHeader": True, "cellHeight": "sm"}
    if sort_by:
        options["sortBy"] = [{"displayName": sort_by, "desc": False}]
    return {
        "type": "table",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": queries,
        "fieldConfig": {"defaults": {"custom": {"align": "auto"}}, "overrides": overrides},
        "options": options,
        "transformations": transformations,
        "gridPos": {"w": width, "h": height},
    }


def row(title: str) -> Panel:
    """A collapsible section header."""
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "gridPos": {"w": GRID_WIDTH, "h": 1}}


def layout(panels: list[Panel]) -> list[Panel]:
    """Give panels ids and x/y positions, left to right, wrapping at the grid width; rows start a new line."""
    x = y = line_height = 0
    for panel_id, panel in enumerate(panels, start=1):
        pos = panel["gridPos"]
        if panel["type"] == "row" or x + pos["w"] > GRID_WIDTH:
            y += line_height
            x = line_height = 0
        pos["x"], pos["y"] = x, y
        panel["id"] = panel_id
        x += pos["w"]
        line_height = max(line_height, pos["h"])
        if panel["type"] == "row":
            x = GRID_WIDTH  # nothing shares a row header's line
    return panels


def datasource_variable() -> dict[str, Any]:
    """The Prometheus datasource picker every panel refers to by uid."""
    return {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }


def cluster_variable() -> dict[str, Any]:
    """The clusters to show: the `cluster` label Prometheus adds from its external_labels (a global view holds
    several). With one cluster's Prometheus there are none to list and All (`.*`) matches the absent label."""
    return query_variable("cluster", "Cluster", CLUSTER_VARIABLE_QUERY)


def aggregator_variable() -> dict[str, Any]:
    """The aggregator's URL as the browser reaches it, for the links to its pages (edit it on the dashboard)."""
    return {
        "name": "aggregator",
        "label": "Aggregator URL",
        "type": "textbox",
        "query": AGGREGATOR_URL,
        "current": {"text": AGGREGATOR_URL, "value": AGGREGATOR_URL},
        "hide": 0,
        "options": [{"selected": True, "text": AGGREGATOR_URL, "value": AGGREGATOR_URL}],
    }


def query_variable(
    name: str, label: str, query: str, *, multi: bool = True, include_all: bool = True
) -> dict[str, Any]:
    """A variable filled from `label_values(...)`; "All" is the regex .* so jobs without the label still match."""
    variable: dict[str, Any] = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": scoped_label_values(query),
        "query": scoped_label_values(query),
        "current": {},
        "hide": 0,
        "includeAll": include_all,
        "multi": multi,
        "options": [],
        "refresh": 2,  # on time-range change: jobs come and go
        "regex": "",
        "sort": 1,
    }
    if include_all:
        variable["allValue"] = ".*"
    return variable


def dashboard(
    *, uid: str, title: str, description: str, variables: list[dict[str, Any]], panels: list[Panel]
) -> dict[str, Any]:
    """A whole dashboard, linked to the other mfu-monitor dashboards by tag."""
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": TAGS,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "timezone": "browser",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "links": [
            {
                "title": "mfu-monitor",
                "type": "dashboards",
                "tags": TAGS,
                "asDropdown": True,
                "includeVars": False,
                "keepTime": True,
            }
        ],
        "templating": {"list": [datasource_variable(), cluster_variable(), *variables, aggregator_variable()]},
        "panels": layout(panels),
    }
