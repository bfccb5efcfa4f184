"""On-demand profiles through the API: ask, tell the job in its report's answer, receive summaries, list, metrics."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mfumon.exporter.job.profile import load_trace, summarize_trace
from tests.utils.factories import metric_value, report, scrape

FIXTURES = Path(__file__).parents[2] / "exporter" / "job" / "profile" / "fixtures"


def _summary(name: str, rank: int, **overrides: Any) -> dict[str, Any]:
    """A real summary: the summariser's output for one of the HTA fixture traces, as a rank would send it."""
    body = summarize_trace(load_trace(FIXTURES / name), group_overrides={"0": "dp"}).to_json()
    body["rank"] = rank
    body.update(overrides)
    return body


def _by_hand(summaries: list[dict[str, Any]], key: str) -> float:
    return sum(s[key] for s in summaries) / sum(s["span_seconds"] for s in summaries)


def test_a_profile_asked_is_told_in_the_report_answer_and_summed_over_ranks(client: TestClient) -> None:
    assert client.post("/v1/jobs/p1/reports", json=report(comm_seconds=0.1, step_seconds=1.0)).status_code == 200
    asked = client.post("/v1/jobs/p1/profile", json={"steps": 3, "ranks": [0, 1]})
    assert asked.status_code == 202, asked.text
    profile_id = asked.json()["id"]
    assert asked.json()["status"] == "requested" and asked.json()["requested_by"] == "anonymous"
    again = client.post("/v1/jobs/p1/profile", json={"steps": 3})
    assert again.status_code == 409 and "one profile at a time" in again.json()["detail"]

    answer = client.post("/v1/jobs/p1/reports", json=report(comm_seconds=0.1, step_seconds=1.0)).json()
    assert answer["profile_request"] == {"id": profile_id, "steps": 3, "ranks": [0, 1]}
    assert answer["comm_source"] == "hooks" and answer["comm_ratio"] == pytest.approx(0.1)
    told = client.post("/v1/jobs/p1/reports", json=report(profiled_steps=3)).json()
    assert told["profile_request"]["id"] == profile_id  # told until a rank answers: an answer can be lost

    ranks = [
        _summary("hta_trace_filter_sampled_rank0.json.gz", 0, profile_id=profile_id),
        _summary("hta_trace_filter_sampled_rank1.json.gz", 1, profile_id=profile_id),
    ]
    for body in ranks:
        response = client.post("/v1/jobs/p1/profiles", json=body)
        assert response.status_code == 200, response.text
    listed = client.get("/v1/jobs/p1/profiles").json()
    assert listed["count"] == 1
    profile = listed["data"][0]
    assert profile["status"] == "done" and profile["ranks_reported"] == [0, 1]
    assert profile["exposed_comm_ratio"] == pytest.approx(_by_hand(ranks, "exposed_comm_seconds"))
    assert profile["idle_ratio"] == pytest.approx(_by_hand(ranks, "idle_seconds"))
    other = next(g for g in profile["groups"] if g["group"] == "other")  # send/recv with no process-group fields
    assert other["exposed_comm_ratio"] == pytest.approx(profile["exposed_comm_ratio"])

    after = client.post("/v1/jobs/p1/reports", json=report(comm_seconds=0.1, step_seconds=1.0)).json()
    assert after["profile_request"] is None
    assert after["comm_source"] == "profile" and after["comm_ratio"] == pytest.approx(profile["exposed_comm_ratio"])
    text = scrape(client)
    exposed = metric_value(text, "mfumon_job_profile_exposed_comm_ratio", job_id="p1", group="other")
    assert exposed == pytest.approx(profile["exposed_comm_ratio"])
    assert metric_value(text, "mfumon_job_profile_comm_ratio", job_id="p1", group="tp") == 0
    assert metric_value(text, "mfumon_job_profile_idle_ratio", job_id="p1") == pytest.approx(profile["idle_ratio"])
    assert metric_value(text, "mfumon_job_profile_timestamp_seconds", job_id="p1") is not None
    assert metric_value(text, "mfumon_job_comm_ratio", job_id="p1") == pytest.approx(profile["exposed_comm_ratio"])
    assert client.post("/v1/jobs/p1/profile", json={"steps": 2, "ranks": "all"}).status_code == 202  # next one

    assert client.post("/v1/jobs/p1/end").status_code == 200
    assert metric_value(scrape(client), "mfumon_job_profile_idle_ratio", job_id="p1") is None


def test_a_summary_sent_unasked_and_its_process_group(client: TestClient) -> None:
    client.post("/v1/jobs/p2/reports", json=report())
    body = _summary("hta_nccl_parser_config_rank0.json.gz", 0)
    assert client.post("/v1/jobs/p2/profiles", json=body).status_code == 200
    profile = client.get("/v1/jobs/p2/profiles").json()["data"][0]
    dp = next(g for g in profile["groups"] if g["group"] == "dp")
    assert dp["exposed_comm_ratio"] == pytest.approx(body["exposed_comm_seconds"] / body["span_seconds"])
    assert profile["steps"] is None and profile["summaries"][0]["collectives"][0]["collective"] == "allreduce"
    client.post("/v1/jobs/p2/reports", json=report())
    findings = {f["cause"]: f for f in client.get("/v1/jobs/p2/diagnosis").json()["findings"]}
    cited = findings["exposed_dp_communication"]["evidence"]
    assert cited["profile_id"] == profile["id"] and cited["top_collective"] == "allreduce"
    assert cited["exposed_comm_ratio"] == pytest.approx(dp["exposed_comm_ratio"], abs=1e-4)


@pytest.mark.parametrize(
    "body",
    [{"steps": 0}, {"steps": 21}, {"steps": 2, "ranks": "some"}, {"steps": 2, "ranks": []}, {"steps": True}],
)
def test_bad_requests_change_nothing(client: TestClient, body: dict[str, Any]) -> None:
    client.post("/v1/jobs/p3/reports", json=report())
    assert client.post("/v1/jobs/p3/profile", json=body).status_code == 422
    assert client.get("/v1/jobs/p3/profiles").json()["count"] == 0


@pytest.mark.parametrize("steps", [-1, 10_000_001, 999_999_999_999_999_999])
def test_a_report_with_impossible_profiled_steps_changes_nothing(client: TestClient, steps: int) -> None:
    """Found by schemathesis on PostgreSQL: a count past a 32-bit column is a 422, not the database's error."""
    client.post("/v1/jobs/p5/reports", json=report())
    before = client.get("/v1/jobs/p5").json()["reports_received"]
    response = client.post("/v1/jobs/p5/reports", json=report(profiled_steps=steps))
    assert response.status_code == 422, response.text
    assert "profiled_steps" in str(response.json()["detail"])
    assert client.get("/v1/jobs/p5").json()["reports_received"] == before


def test_bad_summaries_change_nothing(client: TestClient) -> None:
    client.post("/v1/jobs/p4/reports", json=report())
    good = _summary("hta_trace_filter_sampled_rank0.json.gz", 0)
    for bad, field in (
        ({**good, "exposed_comm_seconds": good["comm_seconds"] * 2}, "exposed_comm_seconds"),
        ({**good, "groups": [{"group": "xp", "comm_seconds": 0.1, "exposed_seconds": 0.0}]}, "groups"),
        ({**good, "idle_seconds": good["span_seconds"] + 1}, "idle_seconds"),
        ({**good, "groups": [good["groups"][0], good["groups"][0]]}, "groups"),
        ({**good, "captured_at": 4e10}, "captured_at"),
    ):
        response = client.post("/v1/jobs/p4/profiles", json=bad)
        assert response.status_code == 422, response.text
        assert any(field in str(d.get("field", d.get("loc"))) for d in response.json()["detail"])
    assert client.post("/v1/jobs/p4/profiles", json={**good, "profile_id": 999}).status_code == 404
    assert client.post("/v1/jobs/nope/profiles", json=good).status_code == 404
    assert client.get("/v1/jobs/p4/profiles").json()["count"] == 0
    assert metric_value(scrape(client), "mfumon_job_profile_idle_ratio", job_id="p4") is None


def test_only_running_jobs_are_profiled(client: TestClient) -> None:
    assert client.post("/v1/jobs/ghost/profile", json={"steps": 2}).status_code == 404
    client.put("/v1/jobs/pending", json={"gpus_requested": 8})
    assert client.post("/v1/jobs/pending/profile", json={"steps": 2}).status_code == 409


def test_asking_needs_the_profile_scope(make_client: Callable[..., TestClient], tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(
        "job-secret-0123456789 name=trainer scopes=jobs\nprof-secret-0123456789 name=oncall scopes=profile\n"
    )
    client = make_client(INGEST_TOKENS_FILE=tokens)
    trainer = {"Authorization": "Bearer job-secret-0123456789"}
    assert client.post("/v1/jobs/p5/reports", json=report(), headers=trainer).status_code == 200
    assert client.post("/v1/jobs/p5/profile", json={"steps": 2}).status_code == 401
    refused = client.post("/v1/jobs/p5/profile", json={"steps": 2}, headers=trainer)
    assert refused.status_code == 403 and "profile" in refused.json()["detail"]
    ok = client.post(
        "/v1/jobs/p5/profile", json={"steps": 2}, headers={"Authorization": "Bearer prof-secret-0123456789"}
    )
    assert ok.status_code == 202 and ok.json()["requested_by"] == "oncall"


def test_profiled_intervals_never_make_a_baseline(make_client: Callable[..., TestClient]) -> None:
    """Three steady reports make a baseline (no warm-up here); one of them profiled keeps the window from it."""
    client = make_client(BASELINE_WARMUP_REPORTS=0, BASELINE_WINDOW_REPORTS=3)
    for fields in ({}, {"profiled_steps": 4}, {}, {}):
        assert client.post("/v1/jobs/p6/reports", json=report(**fields)).status_code == 200
    assert client.get("/v1/baselines").json()["count"] == 0
    client.post("/v1/jobs/p6/reports", json=report())
    assert client.get("/v1/baselines").json()["count"] == 1


def test_a_team_token_asks_only_of_its_teams_jobs(make_client: Callable[..., TestClient], tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(
        "admin-secret-0123456789 name=admin\nnlp-secret-0123456789 name=nlp scopes=jobs,profile teams=nlp\n"
    )
    client = make_client(INGEST_TOKENS_FILE=tokens)
    admin, nlp = ({"Authorization": f"Bearer {t}-secret-0123456789"} for t in ("admin", "nlp"))
    assert client.post("/v1/jobs/vision-job/reports", json=report(team="vision"), headers=admin).status_code == 200
    assert client.post("/v1/jobs/nlp-job/reports", json=report(team="nlp"), headers=admin).status_code == 200
    assert client.post("/v1/jobs/vision-job/profile", json={"steps": 2}, headers=nlp).status_code == 403
    assert client.post("/v1/jobs/nlp-job/profile", json={"steps": 2}, headers=nlp).status_code == 202
    assert client.get("/v1/jobs/vision-job/profiles").json()["count"] == 0
