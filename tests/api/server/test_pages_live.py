"""The pages of a real ``mfumon serve`` holding the demo's cluster, in a real headless Chromium (issue 30 #2, #3).

- Nothing a served page references (``src``, ``href``, stylesheets, scripts, CSS ``url(...)``) is on another host,
  and every asset it references answers 200: the pages work on an air-gapped cluster.
- Each page renders its headings and the API's own numbers; its charts are laid out, visible, and every mark lies
  inside its chart; each same-origin link answers 200; Chromium logs no console message (no script error, no
  failed load); Swagger UI renders the API from the package's files.
- A screenshot of each page is kept in the test's tmp dir; with ``UI_SCREENSHOTS_DIR`` set they are also copied
  there (``UI_SCREENSHOTS_DIR=bench/results/ui-screenshots pytest tests/api/server/test_pages_live.py``).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlparse

import httpx
import pytest

from mfumon.api.pages import fmt
from mfumon.api.pages.findings import RUNBOOK_BASE, cause
from mfumon.exporter.demo import cli as demo
from mfumon.exporter.demo.prices import write_demo_prices
from mfumon.exporter.demo.simcluster import default_cluster
from tests.api.routes.test_serving_slo import TTFT_LE, histogram, report_with
from tests.conftest import LiveServer, start_server

pytestmark = pytest.mark.slow

TRAINING, INFERENCE, WITH_FINDINGS, PENDING = (
    "pretrain-llama3-8b",
    "serve-llama3-70b",
    "pretrain-13b-straggler",
    "pretrain-llama3-70b",
)
#: a serving job posted with the engine's latency histograms (SLO goodput, percentiles, every serving chart)
SERVING = "serve-slo-histograms"
SERVING_CHARTS = {
    "chart-ttft",
    "chart-tpot",
    "chart-goodput",
    "chart-requests",
    "chart-queue",
    "chart-kv",
    "chart-preemptions",
    "chart-mfu",
    "chart-serving-waterfall",
}
COMPARE = f"/ui/compare?a=finetune-13b-commbound&b={WITH_FINDINGS}"
#: path -> (screenshot name, headings the page must show, charts it must draw)
PAGES: dict[str, tuple[str, set[str], set[str]]] = {
    "/": ("landing", {"mfu-monitor aggregator"}, set()),
    "/ui": (
        "cluster",
        {"Cluster", "GPUs by state", "Pools", "Top wasters (running jobs)", "Drain list"},
        {"chart-gpu-states"},
    ),
    "/ui/jobs": ("jobs", {"Jobs"}, set()),
    f"/ui/jobs/{TRAINING}": (
        "job-training",
        {f"Job {TRAINING}", "MFU over time", "Events", "Baseline"},
        {"chart-mfu", "chart-waterfall", "chart-tensor"},
    ),
    f"/ui/jobs/{INFERENCE}": (
        "job-inference",
        {
            f"Job {INFERENCE}",
            "Request latency",
            "Serving over time",
            "MFU and MBU over time",
            "Where the GPU-time went",
        },
        {"chart-mfu", "chart-serving-waterfall"},
    ),
    f"/ui/jobs/{SERVING}": (
        "job-serving",
        {f"Job {SERVING}", "Request latency", "Serving over time", "MFU and MBU over time", "Where the GPU-time went"},
        SERVING_CHARTS,
    ),
    f"/ui/jobs/{WITH_FINDINGS}": (
        "job-findings",
        {f"Job {WITH_FINDINGS}", "Diagnosis", "Stragglers"},
        {"chart-mfu", "chart-waterfall", "chart-tensor"},
    ),
    f"/ui/jobs/{PENDING}": ("job-pending", {f"Job {PENDING}"}, set()),
    COMPARE: ("compare", {"Compare two jobs", "Figures"}, {"chart-waterfall-a", "chart-waterfall-b"}),
    "/ui/chargeback": (
        "chargeback",
        {"Chargeback", "Who used the fleet", "The fleet's cost by category", "Pools", "Jobs"},
        {"chart-cost"},
    ),
}
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
#: Injected into a copy of a page: where each heading, chart and mark was laid out, and whether the CSS applied.
_MEASURE = """<script>
window.addEventListener('load', () => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
  const charts = [...document.querySelectorAll('svg.chart')].map(s => ({
    id: s.id, box: box(s),
    visible: getComputedStyle(s).display !== 'none' && getComputedStyle(s).visibility !== 'hidden',
    marks: [...s.querySelectorAll('path.line, rect.bar')].map(m => ({cls: m.getAttribute('class'), box: box(m)}))}));
  const headings = [...document.querySelectorAll('h1, h2')].map(h => h.textContent.replace(/\\s+/g, ' ').trim());
  const header = document.querySelector('header.top');
  const out = document.createElement('pre'); out.id = 'measured';
  out.textContent = JSON.stringify({charts, headings, styled: header ? getComputedStyle(header).backgroundColor : ''});
  document.body.appendChild(out);
});
</script></body>"""
_REF = re.compile(r"""(?:src|href)\s*=\s*["']([^"']*)["']|url\(\s*["']?([^"')]+)["']?\s*\)""", re.I)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium must be installed in CI (.ci/run installs Debian's chromium)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return path


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server holding the demo's simulated cluster and its price list (``mfumon demo``'s: the chargeback has costs
    and an unpriced pool), plus a checkpoint event so the events table has a row."""
    data_dir = tmp_path_factory.mktemp("pages")
    prices = {"MFUMON_PRICES_FILE": str(write_demo_prices(data_dir))}
    with start_server(data_dir, prices) as server:
        result = demo.run_simulation(
            server.url, duration_seconds=4.0, interval_seconds=0.5, cluster=default_cluster(checkpoints=False)
        )
        assert result.report_failures == 0
        event = {"type": "checkpoint_save", "seconds": 12.5, "step": 1200}
        assert httpx.post(f"{server.url}/v1/jobs/{TRAINING}/events", json=event).status_code == 200
        itl = histogram(TTFT_LE, {0.02: 900, 0.04: 990, 0.06: 1000}, 1000, 25.0)
        for _ in range(3):
            body = report_with(preemptions=2, prefill_tokens=40_000, itl_histogram=itl)
            assert httpx.post(f"{server.url}/v1/jobs/{SERVING}/reports", json=body).status_code == 200
        yield server


def _refs(page: str) -> list[str]:
    return [html.unescape(a or b) for a, b in _REF.findall(page)]


def _same_origin(base: str, ref: str) -> str | None:
    """The absolute URL of a reference to this server; None for a fragment, data: or mailto:."""
    if ref.startswith(("#", "data:", "mailto:", RUNBOOK_BASE)):  # a runbook: a link a person follows, nothing loads
        return None
    url = urljoin(base, ref)
    return url if urlparse(url).netloc == urlparse(base).netloc else "EXTERNAL:" + url


def test_no_page_references_another_host_and_every_asset_loads(demo_server: LiveServer) -> None:
    base = demo_server.url + "/"
    with httpx.Client(base_url=demo_server.url, timeout=10) as http:
        for path in [*PAGES, "/docs"]:
            page = http.get(path)
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), path
            refs = _refs(page.text)
            assert refs, path
            targets = [t for ref in refs if (t := _same_origin(base, ref)) is not None]
            assert not [t for t in targets if t.startswith("EXTERNAL:")], (path, targets)
            assets = re.findall(r"""<(?:link|script|img)[^>]+(?:href|src)=["']([^"']+)""", page.text)
            for asset in assets:
                answer = http.get(urljoin(base, html.unescape(asset)))
                assert answer.status_code == 200, (path, asset)
                if asset.endswith(".css"):  # what a stylesheet itself loads
                    for ref in _refs(answer.text):
                        target = _same_origin(base, ref)
                        assert target is None or not target.startswith("EXTERNAL:"), (asset, ref)
            assert "@import" not in page.text and not re.search(r"(?:src|href)=[\"']//", page.text), path


def _run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _console(stderr: str) -> list[str]:
    """Console messages Chromium logged (``--enable-logging=stderr``): script errors, failed loads."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def _inside(mark: list[float], chart: list[float]) -> bool:
    (mx, my, mw, mh), (cx, cy, cw, ch) = mark, chart
    return mx >= cx - 1 and my >= cy - 1 and mx + mw <= cx + cw + 1 and my + mh <= cy + ch + 1


@pytest.mark.parametrize("path", list(PAGES))
def test_each_page_renders_in_chromium(demo_server: LiveServer, path: str, tmp_path: Path) -> None:
    chromium = _chromium()
    name, headings, charts = PAGES[path]
    url = demo_server.url + path
    page = httpx.get(url, timeout=10).text
    # Laid out as the browser does it: a copy of the page, its links resolved against the server, measured.
    measured_page = tmp_path / f"{name}.html"
    measured_page.write_text(
        page.replace("<head>", f'<head><base href="{demo_server.url}/">', 1).replace("</body>", _MEASURE),
        encoding="utf-8",
    )
    dom = _run(chromium, tmp_path / "p1", "--virtual-time-budget=5000", "--dump-dom", measured_page.as_uri()).stdout
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["styled"] == "rgb(22, 33, 58)", "the stylesheet did not apply"
    missing = [h for h in headings if not any(shown.startswith(h) for shown in layout["headings"])]
    assert not missing, (missing, layout["headings"])
    drawn = {c["id"]: c for c in layout["charts"]}
    assert charts <= set(drawn), (charts, set(drawn))
    for chart in drawn.values():
        assert chart["visible"] and chart["box"][2] >= 300 and chart["box"][3] >= 20, chart
        assert chart["marks"], chart["id"]
        for mark in chart["marks"]:
            _, _, w, h = mark["box"]
            assert (w > 0 and h > 0) if "bar" in mark["cls"] else (w > 0 or h > 0), (chart["id"], mark)
            assert _inside(mark["box"], chart["box"]), (chart["id"], mark, chart["box"])
    # The page itself, from the server: no console message, and a screenshot.
    shot = tmp_path / f"{name}.png"
    loaded = _run(
        chromium,
        tmp_path / "p2",
        "--enable-logging=stderr",
        "--v=0",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        url,
    )
    assert not _console(loaded.stderr), _console(loaded.stderr)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    if target := os.environ.get("UI_SCREENSHOTS_DIR"):
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(target) / shot.name)
    # Every same-origin link on the page answers.
    with httpx.Client(timeout=10) as http:
        for ref in _refs(page):
            target_url = _same_origin(demo_server.url + path, ref)
            if target_url is not None:
                assert http.get(target_url).status_code == 200, (path, ref)


def test_the_pages_show_the_apis_numbers(demo_server: LiveServer) -> None:
    with httpx.Client(base_url=demo_server.url, timeout=10) as http:
        cluster = http.get("/v1/cluster").json()
        assert f'title="{cluster["mfu"]:.4f}">{cluster["mfu"] * 100:.1f} %' in http.get("/ui").text
        for job_id in (TRAINING, INFERENCE, WITH_FINDINGS):
            mfu = http.get(f"/v1/jobs/{job_id}").json()["latest"]["mfu"]
            assert f'title="{mfu:.4f}">{mfu * 100:.1f} %' in http.get(f"/ui/jobs/{job_id}").text, job_id
        findings = http.get(f"/v1/jobs/{WITH_FINDINGS}/diagnosis").json()["findings"]
        assert findings
        page = http.get(f"/ui/jobs/{WITH_FINDINGS}").text
        for finding in findings:
            label = cause(finding["cause"]).label
            assert f'<h3 title="{finding["cause"]}">{label} ' in page and finding["advice"] in html.unescape(page)
        assert "checkpoint_save" in http.get(f"/ui/jobs/{TRAINING}").text
        serving = http.get(f"/v1/jobs/{SERVING}").json()["serving"]
        page = http.get(f"/ui/jobs/{SERVING}").text
        good = serving["slo_goodput"]
        assert good["ratio"] > 0 and f"at least</small> {fmt.ratio(good['ratio'])}" in page
        assert f"at most</small> {fmt.ratio(good['upper_ratio'])}" in page
        assert str(fmt.latency(serving["latency"]["ttft_p90"])) in page
        assert str(fmt.latency(serving["latency"]["tpot_p90"])) in page
        for training in (http.get(f"/ui/jobs/{SERVING}").text, http.get(f"/ui/jobs/{INFERENCE}").text):
            assert "Goodput (step time" not in training and 'id="waterfall"' not in training
        assert "Goodput (step time" in http.get(f"/ui/jobs/{TRAINING}").text
        assert "no report yet" in http.get(f"/ui/jobs/{PENDING}").text
        chargeback = http.get("/v1/chargeback").json()  # the demo's price list: costs in USD, one pool unpriced
        page = http.get("/ui/chargeback").text
        assert chargeback["priced"] and 'id="prices"' in page and "<strong>USD</strong>" in page
        assert chargeback["jobs"] and all(f'href="/ui/jobs/{j["job_id"]}"' in page for j in chargeback["jobs"])


def test_swagger_ui_renders_the_api_offline(demo_server: LiveServer, tmp_path: Path) -> None:
    chromium = _chromium()
    shot = tmp_path / "api-docs.png"
    loaded = _run(
        chromium,
        tmp_path / "p",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        "--dump-dom",
        f"{demo_server.url}/docs",
    )
    # Drawn by Swagger UI from /openapi.json (the page as served has neither): the operations, as blocks.
    assert "/v1/jobs/{job_id}/reports" in loaded.stdout and 'class="opblock' in loaded.stdout
    assert not [line for line in _console(loaded.stderr) if "rror" in line], _console(loaded.stderr)
    _run(
        chromium,
        tmp_path / "p",
        "--virtual-time-budget=10000",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        f"{demo_server.url}/docs",
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if target := os.environ.get("UI_SCREENSHOTS_DIR"):
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(target) / shot.name)


def test_mfumon_serve_asks_the_pages_for_a_read_token_when_reads_need_one(tmp_path: Path) -> None:
    """At the door of ``mfumon serve`` (not only in the app's middleware): the pages are reads like any other."""
    reader = "pages-live-reader-0123456789abcdef"
    env = {"MFUMON_INGEST_TOKENS": f"{reader} name=viewer scopes=read", "MFUMON_READ_REQUIRES_TOKEN": "true"}
    with start_server(tmp_path, env) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        for path in ("/", "/ui", "/ui/jobs", "/ui/compare", "/docs", "/docs/static/swagger-ui.css"):
            assert http.get(path).status_code == 401, path
            assert http.get(path, headers={"authorization": f"Bearer {reader}"}).status_code == 200, path


#: the pages people keep open, at a laptop's and a desktop's width (issue 58 #4)
WIDE_PAGES = {
    "/ui/jobs": "jobs",
    f"/ui/jobs/{TRAINING}": "job-training",
    f"/ui/jobs/{PENDING}": "job-pending",
    "/ui": "cluster",
    "/ui/regressions": "regressions",
    "/ui/chargeback": "chargeback",
}
_OVERFLOW = """<script>
window.addEventListener('load', () => {
  const out = document.createElement('pre'); out.id = 'overflow';
  const wide = [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1)
    .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
  out.textContent = JSON.stringify({scroll: document.documentElement.scrollWidth, inner: innerWidth, wide});
  document.body.appendChild(out);
});
</script></body>"""


@pytest.mark.parametrize("width", [1024, 1400])
@pytest.mark.parametrize("path", list(WIDE_PAGES))
def test_pages_fit_1024_and_1400_px_without_horizontal_overflow(
    demo_server: LiveServer, path: str, width: int, tmp_path: Path
) -> None:
    chromium = _chromium()
    name = f"{WIDE_PAGES[path]}-{width}"
    url = f"{demo_server.url}{path}{'&' if '?' in path else '?'}refresh=0"
    page = httpx.get(url, timeout=10).text
    assert "http-equiv" not in page and 'id="refresh-on"' in page
    measured = tmp_path / f"{name}.html"
    measured.write_text(
        page.replace("<head>", f'<head><base href="{demo_server.url}/">', 1).replace("</body>", _OVERFLOW),
        encoding="utf-8",
    )
    size = f"--window-size={width},2000"
    dom = _run(chromium, tmp_path / "p1", size, "--virtual-time-budget=5000", "--dump-dom", measured.as_uri()).stdout
    found = re.search(r'<pre id="overflow">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["inner"] == width, layout
    assert layout["scroll"] <= layout["inner"], layout  # no horizontal scroll, nothing cut
    shot = tmp_path / f"{name}.png"
    _run(chromium, tmp_path / "p2", f"--screenshot={shot}", size, url)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if target := os.environ.get("UI_SCREENSHOTS_DIR"):
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(target) / shot.name)
