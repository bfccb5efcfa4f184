"""``mfumon report`` (issue 11 #7) against a real aggregator with a simulated week: the figures it prints are the
API's, the top wasters and jobs below baseline are the right ones, costs follow the price list, the HTML page is
self-contained and renders its charts in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mfumon.exporter.links import job_page_url
from mfumon.exporter.ops import cli
from mfumon.exporter.ops.html import render_html
from mfumon.exporter.ops.markdown import render_markdown
from mfumon.exporter.ops.prices import parse_prices
from mfumon.exporter.ops.report import Report, fetch_report
from mfumon.exporter.ops.text import hours, money, pct
from tests.api.routes.test_regressions_api import _job, upgrade_fleet
from tests.utils.clock import Clock
from tests.utils.factories import node_sample, report

T0 = 1_800_000_000.0
PRICES = parse_prices(["h100-sxm=2.5"], "EUR")


def _train(client: TestClient, clock: Clock, job_id: str, rate: float, n: int = 4, **fields: Any) -> None:
    for _ in range(n):
        clock.advance(300)
        body = report(interval_seconds=300, tokens=int(rate * 300), step_seconds=1.0, **fields)
        del body["tokens_per_second"]
        assert client.post(f"/v1/jobs/{job_id}/reports", json=body).status_code == 200


def _event(client: TestClient, job_id: str, **body: Any) -> None:
    assert client.post(f"/v1/jobs/{job_id}/events", json=body).status_code == 200


def _week(client: TestClient) -> Clock:
    """Two teams on pool 'train': a reference run, a slow run of the same workload, a data-bound job, and a job
    that fails once, restarts and fails for good."""
    clock = Clock(client, start=T0)
    node = {**node_sample(8, pool="train"), "timestamp": clock.now}
    assert client.post("/v1/nodes/gpu-01/samples", json=node).status_code == 200
    nlp = {"team": "nlp", "pool": "train"}
    _train(client, clock, "llama-ref", 25_000, data_wait_seconds=0.05, **nlp)
    client.post("/v1/jobs/llama-ref/end", json={"exit_code": 0})
    _train(client, clock, "llama-slow", 15_000, comm_seconds=0.3, **nlp)
    vision = {"team": "vision", "pool": "train", "num_gpus": 16}
    _train(client, clock, "vit-data-bound", 20_000, data_wait_seconds=0.6, **vision)
    _event(client, "vit-flaky", type="init", seconds=600)
    _train(client, clock, "vit-flaky", 20_000, n=2, **vision)
    _event(client, "vit-flaky", type="failure", exit_code=137)
    _event(client, "vit-flaky", type="restart")
    _train(client, clock, "vit-flaky", 20_000, n=2, **vision)
    client.post("/v1/jobs/vit-flaky/end", json={"exit_code": 1})
    return clock


@pytest.fixture
def week(make_client: Any) -> tuple[TestClient, Clock]:
    client = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)
    return client, _week(client)


def _report(client: TestClient, clock: Clock, **kwargs: Any) -> Report:
    return fetch_report(client, since="7d", generated_at=clock.now, **kwargs)


def test_the_report_holds_the_apis_figures(week: tuple[TestClient, Clock]) -> None:
    client, clock = week
    usage = client.get("/v1/usage", params={"since": "7d"}).json()
    jobs = {j["job_id"]: j for j in client.get("/v1/jobs").json()["data"]}
    rep = _report(client, clock)
    assert rep.cluster.gpu_hours == pytest.approx(usage["cluster"]["total_gpu_seconds"] / 3600)
    assert {t.name: t.gpu_hours for t in rep.teams} == pytest.approx(
        {t["name"]: t["total_gpu_seconds"] / 3600 for t in usage["teams"]}
    )
    assert [p.name for p in rep.pools] == ["train"] and rep.jobs_in_window == 4
    # The wasters, in the order of their GPU-seconds outside compute as the API gives them.
    waste = {
        job_id: sum(w["gpu_seconds"] for w in job["waterfall"] if w["category"] != "compute")
        for job_id, job in jobs.items()
    }
    assert [j.job_id for j in rep.top_wasters] == sorted(waste, key=lambda k: -waste[k])
    data_bound = next(j for j in rep.top_wasters if j.job_id == "vit-data-bound")
    assert data_bound.biggest_waste == ("data_wait", pytest.approx(0.6 * 4 * 300 * 16 / 3600))
    flaky = next(j for j in rep.top_wasters if j.job_id == "vit-flaky")
    assert flaky.hours("init") == pytest.approx(600 * 16 / 3600) and flaky.hours("lost") > 0
    # Below baseline: the slow run of the reference workload only (60% of it).
    assert [j.job_id for j in rep.below_baseline] == ["llama-slow"]
    assert rep.below_baseline[0].vs_baseline == pytest.approx(jobs["llama-slow"]["mfu_vs_baseline"])
    assert rep.failures == 1 and rep.ends == {"training": {"failure": 1, "success": 1}}
    assert [j.job_id for j in rep.failed_jobs] == ["vit-flaky"] and rep.failed_jobs[0].failures == 2
    assert rep.currency is None and rep.cluster.cost is None

    text = render_markdown(rep)
    assert text.startswith("# GPU-hours report: ")
    assert f"**{hours(rep.cluster.gpu_hours)} GPU-hours**" in text and f"MFU **{pct(rep.cluster.mfu)}**" in text
    for team in rep.teams:
        assert re.search(rf"^\| {team.name} \| {re.escape(hours(team.gpu_hours))} \| ", text, re.M), team.name
    wasters = text.split("## The 4 jobs that wasted most")[1].split("##")[0]
    linked = re.findall(r"^\| \[`([^`]+)`\]\((\S+)\)", wasters, re.M)  # each job links to its page
    assert linked == [(j.job_id, job_page_url(rep.url, j.job_id)) for j in rep.top_wasters]
    assert linked[0][1] == f"{rep.url.rstrip('/')}/ui/jobs/{linked[0][0]}"
    assert f"([cluster page]({rep.url.rstrip('/')}/ui))" in text
    below = text.split("## Jobs below baseline")[1].split("##")[0]
    assert "`llama-slow`" in below and "`llama-ref`" not in below and pct(rep.below_baseline[0].vs_baseline) in below
    assert (
        "Jobs ended in failure: **1**" in text
        and f"| [`vit-flaky`]({job_page_url(rep.url, 'vit-flaky')}) | vision | 2 | 1 | failure | 1 |" in text
    )
    assert "cost" not in text


def test_costs_follow_the_price_list(week: tuple[TestClient, Clock]) -> None:
    client, clock = week
    rep = _report(client, clock, prices=PRICES)
    assert rep.currency == "EUR" and rep.unpriced == ()
    assert rep.cluster.cost == pytest.approx(rep.cluster.gpu_hours * 2.5)
    assert all(t.cost == pytest.approx(t.gpu_hours * 2.5) for t in rep.teams)
    top = rep.top_wasters[0]
    assert top.wasted_cost == pytest.approx(top.wasted_gpu_hours * 2.5)
    text = render_markdown(rep)
    assert f"- Cost: **{money(rep.cluster.cost, 'EUR')}**" in text and money(top.wasted_cost, "EUR") in text
    # A device without a price: its costs are left blank and named, never priced as something else.
    partial = _report(client, clock, prices=parse_prices(["a100-sxm4-80gb=1.2"]))
    assert partial.unpriced == ("h100-sxm",) and partial.cluster.cost is None and partial.top_wasters[0].cost is None
    assert "No price for h100-sxm" in render_markdown(partial)
    assert _report(client, clock, prices=parse_prices(["default=1"])).cluster.cost == pytest.approx(
        rep.cluster.gpu_hours
    )


@pytest.mark.parametrize("bad", ["h100-sxm", "h100-sxm=cheap", "h100-sxm=-1", "h100-sxm=inf", "=2", "H 100=2"])
def test_bad_prices_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="price"):
        parse_prices([bad])


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium must be installed in CI (.ci/run installs Debian's chromium)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return path


_CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: Injected into a copy of the page (the report itself has no script): the laid-out size of every chart and bar.
_MEASURE = """<script>
window.addEventListener('load', () => {
  const box = e => { const r = e.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; };
  const charts = [...document.querySelectorAll('svg.chart')].map(s => ({
    id: s.id, size: box(s), bars: [...s.querySelectorAll('rect.bar')].map(box),
    visible: getComputedStyle(s).display !== 'none'}));
  const out = document.createElement('pre'); out.id = 'measured';
  out.textContent = JSON.stringify({charts, width: document.body.scrollWidth, images: document.images.length});
  document.body.appendChild(out);
});
</script></body>"""


def test_html_is_self_contained_and_renders_its_charts(week: tuple[TestClient, Clock], tmp_path: Path) -> None:
    chromium = _chromium()
    client, clock = week
    rep = _report(client, clock, prices=PRICES)
    page = render_html(rep)
    # One file: no script, stylesheet, image or font fetched from anywhere.
    assert "<script" not in page and "<link" not in page and "<img" not in page and "@import" not in page
    assert not re.search(r"""src\s*=\s*["']?(?:https?:)?//""", page)
    # Its only addresses are links (followed, never loaded) to the aggregator's pages: the cluster and each job.
    hrefs = re.findall(r"""href\s*=\s*["']?([^"'\s>]+)""", page)
    assert hrefs == re.findall(r'<a href="([^"]+)"', page) and len(hrefs) > 1
    assert all(h.startswith(f"{rep.url.rstrip('/')}/ui") for h in hrefs), hrefs
    measured_page = tmp_path / "measured.html"
    measured_page.write_text(page.replace("</body>", _MEASURE), encoding="utf-8")
    profile = tmp_path / "profile"
    dom = subprocess.run(
        [
            chromium,
            *_CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            measured_page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    layout = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    charts = {c["id"]: c for c in layout["charts"]}
    assert set(charts) == {"chart-cluster", "chart-pools", "chart-teams", "chart-wasters"}
    for chart in charts.values():
        assert chart["visible"] and chart["size"][0] >= 600 and chart["size"][1] >= 40, chart
        assert chart["bars"] and all(w > 0 and h > 0 for w, h in chart["bars"]), chart
    assert len(charts["chart-teams"]["bars"]) >= len(rep.teams)  # a segment or more per team
    assert len(charts["chart-wasters"]["bars"]) >= len(rep.top_wasters)
    # And a screenshot of the page as written: a real PNG of a real render.
    report_file = tmp_path / "report.html"
    report_file.write_text(page, encoding="utf-8")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            chromium,
            *_CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            "--window-size=1000,1600",
            report_file.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_the_cli_prints_markdown_and_writes_html(
    live_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {**report(team="nlp", pool="train", interval_seconds=30, tokens=600_000)}
    del body["tokens_per_second"]
    assert httpx.post(f"{live_server.url}/v1/jobs/cli-job/reports", json=body).status_code == 200
    assert cli.main(["--url", live_server.url, "--since", "24h"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# GPU-hours report: ") and "## Teams" in out and f"| nlp | {hours(8 * 30 / 3600)} |" in out
    assert "`cli-job`" not in out  # all its time computed: no waste
    target = tmp_path / "week.html"
    assert cli.main(["--url", live_server.url, "--format", "html", "-o", str(target), "--price", "default=2"]) == 0
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and f'<a href="{live_server.url}/ui">its cluster page</a>' in page
    assert f"([cluster page]({live_server.url}/ui))" in out


def test_the_cli_says_what_went_wrong(live_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--url", live_server.url, "--since", "yesterday"]) == 1
    assert "since" in capsys.readouterr().err
    assert cli.main(["--url", "http://127.0.0.1:9", "--timeout", "2"]) == 1
    assert "cannot reach the aggregator" in capsys.readouterr().err
    for argv in (["--price", "h100=abc"], ["--format", "pdf"], ["--below-baseline", "2"], ["--top", "0"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(["--url", live_server.url, *argv])
        assert exc.value.code == 2


def test_the_software_section_lists_the_called_changes_regressions_first(make_client: Any) -> None:
    """Issue 59: the report's software changes are GET /v1/regressions' called ones, largest drop first."""
    client = make_client()
    clock = upgrade_fleet(client, driver_jobs=0)
    for i in range(2):  # two jobs on a new PyTorch: too few to tell
        _job(client, clock, f"new-torch-{i}", 23_500.0, nccl="2.23.4", pytorch="2.6.0")
    rep = _report(client, clock)
    assert rep.software is not None
    (change,) = rep.software.changes
    assert (change.verdict, change.component, change.before, change.after) == ("regression", "nccl", "2.21.5", "2.23.4")
    assert change.relative_change == pytest.approx(-0.06, abs=0.003) and change.jobs_after == 4
    assert rep.software.undecided == 1
    text = render_markdown(rep)
    section = text.split("## Software changes")[1]
    assert "1 software change(s) moved MFU beyond the noise (1 regression(s)); 1 more had too few jobs" in section
    assert re.search(r"^\| regression \| nccl \| 2.21.5 -> 2.23.4 \| -6.0 % \|", section, re.M)
    assert "<h2>Software changes</h2>" in render_html(rep)
