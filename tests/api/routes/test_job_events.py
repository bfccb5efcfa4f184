"""Job events and the job lifecycle: restarts are explicit and counted, ends are counted once, counters are durable."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from mfumon.api.services.expiry import expire_silent_jobs
from tests.utils.factories import metric_value, report, scrape


def _event(client: TestClient, job_id: str, **body: object) -> dict:
    response = client.post(f"/v1/jobs/{job_id}/events", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_every_event_type_is_stored_and_counted(client: TestClient) -> None:
    _event(client, "ev", type="init", seconds=42.5, timestamp=1.7e9)
    _event(client, "ev", type="checkpoint_load", seconds=3.0, step=1000)
    client.post("/v1/jobs/ev/reports", json=report(step=1))
    _event(client, "ev", type="eval", seconds=12.0, step=1100)
    _event(client, "ev", type="checkpoint_save", seconds=8.0, step=1200)
    failed = _event(client, "ev", type="failure", exit_code=137, step=1234)
    assert failed["failures"] == 1 and failed["status"] == "running" and failed["restarted"] is False
    again = _event(client, "ev", type="restart")
    assert again["restarts"] == 1 and again["restarted"] is True

    events = client.get("/v1/jobs/ev/events").json()
    assert [e["type"] for e in events["data"]] == [
        "init",
        "checkpoint_load",
        "eval",
        "checkpoint_save",
        "failure",
        "restart",
    ]
    assert events["data"][0]["seconds"] == 42.5 and events["data"][0]["timestamp"] == 1.7e9
    assert events["data"][4]["exit_code"] == 137 and events["data"][4]["attempt"] == 0
    assert events["data"][5]["attempt"] == 1 and events["data"][5]["inferred"] is None

    text = scrape(client)
    for event_type in ("init", "checkpoint_load", "eval", "checkpoint_save", "failure", "restart"):
        assert metric_value(text, "mfumon_job_events_total", kind="training", type=event_type) == 1
    assert metric_value(text, "mfumon_job_restarts_total", job_id="ev") == 1
    assert metric_value(text, "mfumon_job_failures_total", job_id="ev") == 1
    assert client.get("/v1/jobs/missing/events").status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "lunch"}, "type"),
        ({"type": "eval", "seconds": -1}, "seconds"),
        ({"type": "eval", "seconds": 30 * 86400}, "seconds"),
        ({"type": "eval", "seconds": "NaN"}, "seconds"),
        ({"type": "eval", "step": -3}, "step"),
        ({"type": "eval", "timestamp": 0}, "timestamp"),
        ({"type": "checkpoint_save", "exit_code": 1}, "body"),
        ({"type": "failure", "exit_code": 99999}, "exit_code"),
        ({"type": "eval", "colour": "red"}, "colour"),
        ({}, "type"),
    ],
)
def test_bad_events_are_rejected_and_change_nothing(client: TestClient, body: dict, field: str) -> None:
    response = client.post("/v1/jobs/bad/events", json=body)
    assert response.status_code == 422
    fields = [d["field"] for d in response.json()["detail"]]
    assert any(field in f for f in fields), fields
    assert client.get("/v1/jobs/bad").status_code == 404
    assert 'outcome="invalid"' in scrape(client) and 'endpoint="job_events"' in scrape(client)


def test_report_to_an_ended_job_is_a_counted_restart(client: TestClient) -> None:
    client.post("/v1/jobs/back/reports", json=report())
    ended = client.post("/v1/jobs/back/end", json={"exit_code": 1}).json()
    assert ended["status"] == "ended" and ended["outcome"] == "failure" and ended["failures"] == 1
    assert 'job_id="back"' not in scrape(client)

    client.post("/v1/jobs/back/reports", json=report())
    job = client.get("/v1/jobs/back").json()
    assert job["status"] == "running" and job["restarts"] == 1
    assert job["exit_code"] is None and job["ended_at"] is None and job["outcome"] is None
    inferred = client.get("/v1/jobs/back/events").json()["data"][-1]
    assert inferred["type"] == "restart" and "after the job had ended" in inferred["inferred"]
    text = scrape(client)
    assert metric_value(text, "mfumon_job_restarts_total", job_id="back") == 1
    assert metric_value(text, "mfumon_job_events_total", kind="training", type="restart") == 1
    assert metric_value(text, "mfumon_job_ends_total", kind="training", outcome="failure") == 1
    # A late failure event does not reopen the job; a checkpoint_load (a resumed process) does.
    client.post("/v1/jobs/back/end", json={"exit_code": 0})
    assert _event(client, "back", type="failure")["status"] == "ended"
    resumed = _event(client, "back", type="checkpoint_load", step=500)
    assert resumed["restarted"] is True and resumed["restarts"] == 2


def test_ends_are_counted_once_by_outcome(client: TestClient) -> None:
    for job_id, code in (("ok", 0), ("crash", 3), ("quiet", None)):
        client.post(f"/v1/jobs/{job_id}/reports", json=report())
        body = {} if code is None else {"exit_code": code}
        client.post(f"/v1/jobs/{job_id}/end", json=body)
        client.post(f"/v1/jobs/{job_id}/end", json={"exit_code": 0})  # a retried end changes nothing
    # A failure event then an end without exit code: the end is a failure with the event's code.
    client.post("/v1/jobs/oom/reports", json=report())
    _event(client, "oom", type="failure", exit_code=137)
    ended = client.post("/v1/jobs/oom/end").json()
    assert ended["outcome"] == "failure" and ended["exit_code"] == 137 and ended["failures"] == 1
    text = scrape(client)
    assert metric_value(text, "mfumon_job_ends_total", kind="training", outcome="success") == 1
    assert metric_value(text, "mfumon_job_ends_total", kind="training", outcome="failure") == 2
    assert metric_value(text, "mfumon_job_ends_total", kind="training", outcome="unknown") == 1
    assert client.get("/v1/jobs/crash").json()["exit_code"] == 3


def test_a_step_going_back_is_an_inferred_restart(client: TestClient) -> None:
    for step in (100, 200, 300):
        client.post("/v1/jobs/requeued/reports", json=report(step=step))
    client.post("/v1/jobs/requeued/reports", json=report(step=20))  # a new process counting from the start
    client.post("/v1/jobs/requeued/reports", json=report(step=40))
    job = client.get("/v1/jobs/requeued").json()
    assert job["restarts"] == 1 and job["status"] == "running"
    inferred = client.get("/v1/jobs/requeued/events").json()["data"]
    assert [e["inferred"] for e in inferred] == ["report step went back from 300 to 20"]
    # An announced restart resets the mark: the new process's steps count from there, no second inference.
    _event(client, "requeued", type="restart")
    client.post("/v1/jobs/requeued/reports", json=report(step=5))
    assert client.get("/v1/jobs/requeued").json()["restarts"] == 2


def test_silent_jobs_expire_once(make_client: Callable[..., TestClient]) -> None:
    client = make_client(JOB_TTL_SECONDS=60)
    client.post("/v1/jobs/gone/reports", json=report())
    client.post("/v1/jobs/alive/reports", json=report())
    ctx = client.app.state.ctx  # type: ignore[attr-defined]
    real_clock = ctx.clock
    ctx.clock = lambda: real_clock() + 45
    client.post("/v1/jobs/alive/reports", json=report())
    ctx.clock = lambda: real_clock() + 61
    assert expire_silent_jobs(ctx) == 1
    assert expire_silent_jobs(ctx) == 0
    gone = client.get("/v1/jobs/gone").json()
    assert gone["status"] == "ended" and gone["outcome"] == "expired"
    assert client.get("/v1/jobs/alive").json()["status"] == "running"
    assert metric_value(scrape(client), "mfumon_job_ends_total", kind="training", outcome="expired") == 1


def test_durable_counters_survive_a_restart_of_the_aggregator(make_client: Callable[..., TestClient]) -> None:
    first = make_client()
    first.post("/v1/jobs/a/reports", json=report())
    first.post("/v1/jobs/a/end", json={"exit_code": 0})
    _event(first, "b", type="failure", exit_code=1)
    first.__exit__(None, None, None)
    second = make_client()  # a new process on the same database
    text = scrape(second)
    assert metric_value(text, "mfumon_job_ends_total", kind="training", outcome="success") == 1
    assert metric_value(text, "mfumon_job_events_total", kind="training", type="failure") == 1


def test_concurrent_events_to_a_new_job_lose_nothing(client: TestClient) -> None:
    threads, per_thread = 6, 5
    errors: list[str] = []

    def send() -> None:
        for _ in range(per_thread):
            response = client.post("/v1/jobs/burst/events", json={"type": "restart"})
            if response.status_code != 200:
                errors.append(response.text)

    workers = [threading.Thread(target=send) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    assert client.get("/v1/jobs/burst").json()["restarts"] == threads * per_thread
    total = metric_value(scrape(client), "mfumon_job_events_total", kind="training", type="restart")
    assert total == threads * per_thread
