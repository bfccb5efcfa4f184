"""The HTML pages in-process: what each shows, honest unknowns, 4xx pages for bad input, and the read-token rule."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from mfumon.api.pages.findings import CAUSES, RUNBOOK_BASE, cause
from tests.utils.factories import node_sample, report

READER = "pages-reader-token-0123456789ab"
NODES_ONLY = "pages-nodes-token-0123456789abc"
HTML = "text/html; charset=utf-8"


def _hrefs(page: str) -> list[str]:
    return re.findall(r'(?:href|src)="([^"]+)"', page)


def test_the_landing_page_links_the_pages_the_api_and_the_metrics(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"] == HTML
    assert {"/ui", "/ui/jobs", "/docs", "/metrics", "/v1/cluster", "/v1/jobs", "/healthz"} <= set(_hrefs(page.text))
    for href in _hrefs(page.text):
        assert client.get(href).status_code == 200, href


def test_swagger_ui_is_served_from_the_package(client: TestClient) -> None:
    docs = client.get("/docs").text
    assets = [h for h in _hrefs(docs)]
    assert {"/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css"} <= set(assets)
    assert "http" not in docs and "cdn" not in docs and '"validatorUrl": null' in docs
    for asset in assets:
        answer = client.get(asset)
        assert answer.status_code == 200 and len(answer.content) > 500, asset
    assert client.get("/docs/static/swagger-ui-bundle.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/docs/static/nope.js").status_code == 404
    assert client.get("/docs/static/..%2Findex.html").status_code == 404
    assert client.get("/redoc").status_code == 404  # dropped: it would load its script from a CDN


def test_a_job_page_shows_mfu_waterfall_and_baseline_with_units(client: TestClient) -> None:
    for _ in range(3):
        body = report(team="nlp", pool="train", step_seconds=2.0, comm_seconds=0.4, interval_seconds=30, tokens=750_000)
        del body["tokens_per_second"]
        assert client.post("/v1/jobs/run-1/reports", json=body).status_code == 200
    mfu = client.get("/v1/jobs/run-1").json()["latest"]["mfu"]
    page = client.get("/ui/jobs/run-1")
    assert page.status_code == 200, page.text
    text = page.text
    assert f'title="{mfu:.4f}">{mfu * 100:.1f} %' in text  # the ratio as a percentage, the 0-1 value in the title
    assert 'id="chart-mfu"' in text and 'id="chart-waterfall"' in text
    assert "comm_exposed" in text and "GPU-s" in text and "tokens/s" in text
    assert client.get("/v1/jobs/run-1/diagnosis").status_code == 200
    assert "/ui/static/ui.css" in _hrefs(text) and client.get("/ui/static/ui.css").status_code == 200


def test_a_job_page_lists_its_software_stack_first_and_tags_last(client: TestClient) -> None:
    software = {"tag.image": "train:v42", "transformers": "4.57.1", "pytorch": "2.5.1", "driver": "550.54.15"}
    assert client.put("/v1/jobs/sw-page", json={"software": software}).status_code == 200
    assert client.post("/v1/jobs/sw-page/reports", json=report()).status_code == 200
    text = client.get("/ui/jobs/sw-page").text
    rows = re.findall(r"<tr><td><code>([^<]+)</code></td><td><code>([^<]+)</code></td></tr>", text)
    stack = [("driver", "550.54.15"), ("pytorch", "2.5.1"), ("transformers", "4.57.1"), ("tag.image", "train:v42")]
    assert rows == stack
    assert client.post("/v1/jobs/no-sw/reports", json=report()).status_code == 200
    assert "no software fingerprint" in client.get("/ui/jobs/no-sw").text


def test_an_unknown_mfu_is_a_dash_with_the_engines_reason(client: TestClient) -> None:
    answer = client.post("/v1/jobs/odd-gpu/reports", json=report(gpu_model="Unobtainium X1"))
    assert answer.json()["mfu"] is None
    page = client.get("/ui/jobs/odd-gpu").text
    job_mfu = re.search(r'id="job-mfu">(.*?)</div>', page, re.S)
    assert job_mfu and "—" in job_mfu.group(1) and "unknown device" in job_mfu.group(1) and "%" not in job_mfu.group(1)
    assert client.put("/v1/jobs/queued", json={"gpus_requested": 8}).status_code == 200
    queued = client.get("/ui/jobs/queued").text
    assert "no report yet" in queued and "no allocated GPU-time billed yet" in queued
    assert "8 GPUs requested" in queued


def test_the_cluster_page_shows_gpu_states_pools_and_coverage(client: TestClient) -> None:
    assert client.post("/v1/jobs/j1/reports", json=report(pool="train")).status_code == 200
    assert client.post("/v1/nodes/n1/samples", json=node_sample(8, job_id="j1")).status_code == 200
    assert (
        client.post(
            "/v1/nodes/n2/samples", json=node_sample(8, tensor_active=0, utilization=0, sm_active=0)
        ).status_code
        == 200
    )
    page = client.get("/ui").text
    cluster = client.get("/v1/cluster").json()
    assert f'title="{cluster["mfu"]:.4f}"' in page
    assert 'id="chart-gpu-states"' in page and "reporting: 8 GPUs" in page and "idle: 8 GPUs" in page
    assert 'href="/ui/jobs?pool=train"' in page


def test_the_jobs_list_filters_and_refuses_unknown_values(client: TestClient) -> None:
    client.post("/v1/jobs/a-nlp/reports", json=report(team="nlp"))
    client.post("/v1/jobs/b-vision/reports", json=report(team="vision", kind="inference"))
    every = client.get("/ui/jobs").text
    assert "a-nlp" in every and "b-vision" in every
    nlp = client.get("/ui/jobs", params={"team": "nlp"}).text
    assert 'href="/ui/jobs/a-nlp"' in nlp and 'href="/ui/jobs/b-vision"' not in nlp
    inference = client.get("/ui/jobs", params={"kind": "inference", "status": "running"}).text
    assert 'href="/ui/jobs/b-vision"' in inference and 'href="/ui/jobs/a-nlp"' not in inference
    bad = client.get("/ui/jobs", params={"status": "done"})
    assert bad.status_code == 422 and bad.headers["content-type"] == HTML and "pending, running, ended" in bad.text


def test_bad_input_gets_a_4xx_page(client: TestClient) -> None:
    missing = client.get("/ui/jobs/no-such-job")
    assert missing.status_code == 404 and "no-such-job" in missing.text and missing.headers["content-type"] == HTML
    assert client.get("/ui/jobs/-bad-").status_code == 422
    client.post("/v1/jobs/before/reports", json=report())
    assert client.get("/ui/compare").status_code == 200  # the form
    one_sided = client.get("/ui/compare", params={"a": "before"})
    assert one_sided.status_code == 422 and "b must be a job id" in one_sided.text
    unknown = client.get("/ui/compare", params={"a": "before", "b": "after"})
    assert unknown.status_code == 404 and "after" in unknown.text


def test_the_compare_page_puts_two_jobs_side_by_side(client: TestClient) -> None:
    client.post("/v1/jobs/before/reports", json=report(tokens_per_second=20_000.0))
    client.post("/v1/jobs/after/reports", json=report(tokens_per_second=30_000.0))
    page = client.get("/ui/compare", params={"a": "before", "b": "after"})
    assert page.status_code == 200, page.text
    rows = client.get("/v1/compare", params={"a": "before", "b": "after"}).json()["rows"]
    latest = next(r for r in rows if r["metric"] == "latest_mfu")
    assert f'title="{latest["a"]:.4f}"' in page.text and f'title="{latest["b"]:.4f}"' in page.text
    assert f'title="{latest["ratio"]:.4f}">× 1.5' in page.text  # noqa: RUF001
    assert "Same workload signature" in page.text
    assert '+<span title="1250 tokens/s/GPU">1.25 k tokens/s/GPU</span>' in page.text  # (30k - 20k) / 8 GPUs


@pytest.mark.parametrize("path", ["/", "/docs", "/ui", "/ui/jobs", "/ui/compare", "/ui/static/ui.css"])
def test_pages_need_a_read_token_when_reads_do(make_client: Callable[..., TestClient], path: str) -> None:
    client = make_client(
        INGEST_TOKENS=f"{READER} name=viewer scopes=read,{NODES_ONLY} name=x scopes=nodes", READ_REQUIRES_TOKEN=True
    )
    assert client.get(path).status_code == 401
    assert client.get(path, headers={"authorization": f"Bearer {NODES_ONLY}"}).status_code == 403
    assert client.get(path, headers={"authorization": f"Bearer {READER}"}).status_code == 200
    assert client.get("/healthz").status_code == 200


def test_pages_need_no_token_when_reads_do_not(make_client: Callable[..., TestClient]) -> None:
    client = make_client(INGEST_TOKENS=f"{READER} name=viewer scopes=read")
    assert client.get("/ui").status_code == 200 and client.get("/").status_code == 200


def test_an_ended_job_is_read_from_its_summary(client: TestClient) -> None:
    body = report(interval_seconds=30, tokens=750_000, step_seconds=2.0, comm_seconds=0.5)
    del body["tokens_per_second"]
    assert client.post("/v1/jobs/done-1/reports", json=body).status_code == 200
    assert client.post("/v1/jobs/done-1/end", json={"exit_code": 0}).status_code == 200
    page = client.get("/ui/jobs/done-1")
    assert page.status_code == 200, page.text
    assert 'class="status-ended"' in page.text and 'id="chart-waterfall"' in page.text
    assert "the job ended: its GPUs are no longer read" in page.text  # no hardware estimate, and why
    assert 'href="/ui/jobs/done-1"' in client.get("/ui/jobs", params={"status": "ended"}).text


def test_the_mfu_chart_draws_the_hardware_estimate_of_each_report(client: TestClient) -> None:
    sample = node_sample(4, job_id="hw-1", tensor_active=0.5, sm_clock_hz=1485e6, max_sm_clock_hz=1980e6)
    assert client.post("/v1/nodes/n1/samples", json=sample).status_code == 200
    for _ in range(2):
        assert client.post("/v1/jobs/hw-1/reports", json=report(num_gpus=4)).status_code == 200
    assert [h["hardware_mfu"] for h in client.get("/v1/jobs/hw-1").json()["history"]] == [pytest.approx(0.375)] * 2
    text = client.get("/ui/jobs/hw-1").text
    chart = text[text.index('id="chart-mfu"') :]
    assert "hardware estimate" in chart and 'class="line s3"' in chart
    assert "hardware estimate now" not in text  # a series over time, not only today's value as a line


def _rows(page: str, table: str) -> list[str]:
    body = page[page.index(f'<table id="{table}">') :]
    return re.findall(r'<tr><td class="name"><a class="clip" href="([^"]+)"', body[: body.index("</table>")])


def test_pages_take_a_range_reload_themselves_and_stop_when_asked(client: TestClient) -> None:
    assert client.post("/v1/jobs/r-1/reports", json=report(pool="train")).status_code == 200
    for path in ("/ui", "/ui/jobs", "/ui/jobs/r-1"):
        page = client.get(path).text
        assert '<meta http-equiv="refresh" content="60">' in page, path
        assert 'id="refresh-off"' in page and f'href="{path}?range=6h"' in page, path
        for span in ("1h", "6h", "24h", "7d"):
            ranged = client.get(path, params={"range": span, "refresh": 0})
            assert ranged.status_code == 200, (path, span)
            assert "http-equiv" not in ranged.text and 'id="refresh-on"' in ranged.text
            assert f"range={span}" in ranged.text  # the links keep the range
        bad = client.get(path, params={"range": "3w"})
        assert bad.status_code == 422 and "1h, 6h, 24h, 7d" in bad.text
        assert client.get(path, params={"refresh": "soon"}).status_code == 422
    assert "last hour" in client.get("/ui", params={"range": "1h"}).text


def test_tables_sort_by_any_column_server_side(client: TestClient) -> None:
    for job_id, tps in (("low", 5_000.0), ("high", 40_000.0), ("mid", 20_000.0)):
        assert client.post(f"/v1/jobs/{job_id}/reports", json=report(tokens_per_second=tps)).status_code == 200
    page = client.get("/ui/jobs", params={"sort": "jobs.mfu", "dir": "desc"}).text
    assert _rows(page, "jobs") == ["/ui/jobs/high", "/ui/jobs/mid", "/ui/jobs/low"]
    assert 'href="/ui/jobs?sort=jobs.mfu&amp;dir=asc"' in page  # the current column's link turns the order round
    page = client.get("/ui/jobs", params={"sort": "jobs.job", "dir": "asc"}).text
    assert _rows(page, "jobs") == ["/ui/jobs/high", "/ui/jobs/low", "/ui/jobs/mid"]
    for column in ("job", "kind", "status", "team", "pool", "gpus", "mfu", "hardware", "goodput", "last"):
        for direction in ("asc", "desc"):
            answer = client.get("/ui/jobs", params={"sort": f"jobs.{column}", "dir": direction})
            assert answer.status_code == 200 and len(_rows(answer.text, "jobs")) == 3, column
    assert client.get("/ui/jobs", params={"sort": "jobs.nope"}).status_code == 422
    assert client.get("/ui", params={"sort": "pools.mfu", "dir": "desc"}).status_code == 200
    assert client.get("/ui/jobs/high", params={"sort": "events.type"}).status_code == 200


def test_a_pending_job_says_why_and_for_how_long(client: TestClient) -> None:
    import time

    now = time.time()
    body = {
        "kind": "slurm",
        "observed_at": now,
        "jobs": [
            {
                "job_id": "waiting",
                "status": "pending",
                "gpus_requested": 16,
                "pool": "train",
                "submitted_at": now - 7300,
                "queued_at": now - 7200,
                "pending_reason": "Resources",
            },
        ],
    }
    assert client.put("/v1/scheduler/slurm", json=body).status_code == 200
    page = client.get("/ui/jobs/waiting").text
    pending = re.search(r'<p class="notice" id="pending">(.*?)</p>', page, re.S)
    assert pending, page
    text = re.sub(r"<[^>]+>", "", pending.group(1))
    assert "Pending for 2.0 h" in text and "queued since" in text and "Resources" in text
    assert "waiting for free GPUs" in text and "16 GPUs" in text


def test_an_over_claim_and_a_failing_check_are_badges_and_findings_read_as_words(client: TestClient) -> None:
    from tests.api.state.test_cluster_truth import _tokens_per_second_for

    clocks = {"sm_clock_hz": 1485e6, "max_sm_clock_hz": 1980e6}
    sample = node_sample(8, job_id="bragger", tensor_active=0.20, ecc_uncorrected_total=2, **clocks)
    assert client.post("/v1/nodes/n1/samples", json=sample).status_code == 200
    for _ in range(2):
        body = report(tokens_per_second=_tokens_per_second_for(0.40, 8), step_seconds=2.0, comm_seconds=0.6)
        assert client.post("/v1/jobs/bragger/reports", json=body).status_code == 200
    assert client.get("/v1/jobs/bragger").json()["accounting"]["verdict"] == "over_claims"
    page = client.get("/ui/jobs/bragger").text
    top = page[: page.index('<div class="cards">')]
    assert "MFU over-claimed" in top and "Health check failing" in top and "ecc_uncorrectable" in top
    assert "over-claimed: the hardware contradicts it" in page
    findings = client.get("/v1/jobs/bragger/diagnosis").json()["findings"]
    assert findings
    for finding in findings:
        assert f'<h3 title="{finding["cause"]}">{cause(finding["cause"]).label} ' in page
        if cause(finding["cause"]).url:
            assert f'href="{cause(finding["cause"]).url}"' in page
    assert "GPU-00000000-aaaa" not in page.replace('title="GPU-', "")  # UUIDs only in titles
    assert "<dt" in page and not re.search(r"<dt[^>]*>[a-z]+_[a-z_]+</dt>", page)  # no snake_case keys shown
    assert 'id="goodput-vs-waste"' in page and "goodput 100 % and still waste" in page


def test_every_runbook_a_finding_links_exists() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    for key, (_, alert) in CAUSES.items():
        assert (root / "deploy" / "runbooks" / f"{alert}.md").is_file(), key
        assert cause(key).url == f"{RUNBOOK_BASE}{alert}.md"
    assert cause("exposed_tp_communication").runbook == "MfumonCommRatioHigh"
    assert cause("something_new").label == "Something new" and cause("something_new").url is None


def test_pool_mfu_is_mfumon_reports(client: TestClient) -> None:
    """The pools table shows the MFU ``mfumon report`` prints for the same window (/v1/usage's pool MFU), and ``—``
    where it prints its blank: a pool whose GPUs are busy for a job that reports no MFU (a hardware estimate now)
    has no model FLOPs counted."""
    import time

    from mfumon.exporter.ops.report import build_report
    from mfumon.exporter.ops.text import BLANK, pct

    assert client.post("/v1/nodes/n1/samples", json=node_sample(8, job_id="quiet", pool="batch")).status_code == 200
    assert client.post("/v1/nodes/n2/samples", json=node_sample(8, job_id="talker", pool="train")).status_code == 200
    for _ in range(3):
        body = report(pool="train", num_gpus=8, interval_seconds=30, tokens=750_000)
        del body["tokens_per_second"]
        assert client.post("/v1/jobs/talker/reports", json=body).status_code == 200
    snapshot = {p["name"]: p for p in client.get("/v1/cluster").json()["pools"]}
    assert snapshot["batch"]["mfu"] > 0  # the snapshot's figure, now: the page no longer shows it as pool MFU
    now = time.time()
    usage = client.get("/v1/usage", params={"since": "24h"}).json()
    printed = {p.name: pct(p.mfu) for p in build_report(url="x", usage=usage, jobs=[], generated_at=now).pools}
    page = client.get("/ui").text
    pools = page[page.index('<table id="pools">') :]
    cells = dict(re.findall(r'title="(\w+)">\w+</a></td>\s*<td class="num">(.*?)</td>', pools, re.S))
    for name in ("batch", "train"):
        if printed.get(name, BLANK) == BLANK:
            assert "—" in cells[name] and "%" not in cells[name], name
        else:
            mfu = next(p["mfu"] for p in usage["pools"] if p["name"] == name)
            assert f'title="{mfu:.4f}"' in cells[name], name
    assert printed.get("batch", BLANK) == BLANK and printed.get("train") not in (None, BLANK)
