"""``mfumon report``'s remediation section (issue 31 #3): actions, withheld by rail, and the GPU-hours drained."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from mfumon.exporter.ops.html import render_html
from mfumon.exporter.ops.markdown import render_markdown
from mfumon.exporter.ops.remediation import summarize_remediations
from mfumon.exporter.ops.report import fetch_report
from tests.utils.clock import Clock
from tests.utils.factories import node_sample

T0 = 1_800_000_000.0


def _decide(client: TestClient, clock: Clock, **body: Any) -> None:
    decision = {"scheduler": "slurm", "checks": [], "pools": ["train"], "timestamp": clock.now, **body}
    response = client.post("/v1/remediations", json=decision)
    assert response.status_code == 200, response.text


def test_the_report_shows_what_the_loop_did_withheld_and_drained(make_client: Any) -> None:
    client = make_client()
    clock = Clock(client, start=T0)
    for node in ("gpu-01", "gpu-02"):
        sample = {**node_sample(8, pool="train", job_id=f"job-{node}"), "timestamp": clock.now}
        assert client.post(f"/v1/nodes/{node}/samples", json=sample).status_code == 200
    clock.advance(600)
    xid = {"action": "drain", "reason": "xid", "checks": ["xid"]}
    _decide(client, clock, node="gpu-01", outcome="done", failing_since=clock.now - 300, **xid)  # 8 x 300 s
    _decide(client, clock, node="gpu-02", outcome="withheld", **{**xid, "reason": "budget_pool"})
    clock.advance(60)
    _decide(client, clock, node="gpu-02", outcome="withheld", **{**xid, "reason": "budget_pool"})  # same row
    _decide(client, clock, node="gpu-03", outcome="withheld", **{**xid, "reason": "not_ours"})
    clock.advance(3540)  # gpu-01 out for an hour, then resumed
    _decide(client, clock, node="gpu-01", action="resume", reason="healthy", outcome="done")
    _decide(client, clock, node="gpu-02", outcome="done", failing_since=clock.now - 3660, **xid)  # still out
    clock.advance(1800)

    report = fetch_report(client, since="7d", generated_at=clock.now)
    section = report.remediation
    assert section is not None
    assert section.actions == (("drain", "done", 2), ("drain", "withheld", 2), ("resume", "done", 1))
    assert section.withheld == (("budget_pool", 1, 2), ("not_ours", 1, 1))
    assert (section.drains, section.still_out) == (2, 1)
    assert section.drained_gpu_hours == 8 * 1.0 + 8 * 0.5  # gpu-01 an hour, gpu-02 half an hour so far
    assert section.jobs_gpu_hours_before_drain == 8 * 300 / 3600 + 8 * 3660 / 3600

    markdown = render_markdown(report)
    assert "## Remediation" in markdown
    assert "2 drains done (1 still out): 12.0 GPU-hours held out of scheduling" in markdown
    assert "| budget_pool | 1 | 2 |" in markdown
    html = render_html(report)
    assert "<h2>Remediation</h2>" in html and "12.0 GPU-hours held out of scheduling" in html


def test_a_window_without_remediation_says_so() -> None:
    section = summarize_remediations([])
    assert section.empty
    assert section.drained_gpu_hours == 0
