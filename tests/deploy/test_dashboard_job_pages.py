"""Grafana's job tables link to the job's page on the aggregator (issue 30 #3), beside the drill-down."""

from __future__ import annotations

from tests.deploy._support import iter_panels, load_dashboards, variables

PAGE = "${aggregator}/ui/jobs/${__value.raw}"


def _job_id_links(panel: dict) -> list[list[dict]]:
    return [
        prop["value"]
        for override in panel.get("fieldConfig", {}).get("overrides", [])
        if override["matcher"] == {"id": "byName", "options": "job_id"}
        for prop in override["properties"]
        if prop["id"] == "links"
    ]


def test_every_job_table_links_each_job_id_to_its_page() -> None:
    tables = 0
    for name, dashboard in load_dashboards().items():
        for panel in iter_panels(dashboard):
            for links in _job_id_links(panel):
                tables += 1
                urls = [link["url"] for link in links]
                assert any(u.startswith("/d/mfumon-job-drilldown") for u in urls), (name, panel["title"])
                assert PAGE in urls, (name, panel["title"], urls)
    assert tables >= 8  # the worst-jobs, wasters, queue, inference and health tables


def test_the_aggregator_url_is_a_variable_of_every_dashboard() -> None:
    for name, dashboard in load_dashboards().items():
        variable = variables(dashboard).get("aggregator")
        assert variable is not None, name
        assert variable["type"] == "textbox" and variable["query"].startswith("http"), name
