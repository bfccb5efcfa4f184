"""A JSON body without its content type (curl -d's default, or none) is read as JSON; another type gets 415 naming
the header (issue 30 #5). FastAPI used to answer both "Input should be a valid dictionary or object to extract
fields from"."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.conftest import start_server
from tests.utils.factories import node_sample, report

FORM = "application/x-www-form-urlencoded"  # what curl -d sends unless told otherwise


def _post(client: TestClient, path: str, body: object, content_type: str | None) -> httpx.Response:
    headers = {} if content_type is None else {"content-type": content_type}
    return client.post(path, content=json.dumps(body).encode(), headers=headers)


@pytest.mark.parametrize("content_type", [None, FORM, "application/json; charset=utf-8", "application/merge+json"])
def test_a_report_without_the_json_type_is_read_as_json(client: TestClient, content_type: str | None) -> None:
    answer = _post(client, "/v1/jobs/curl-run/reports", report(), content_type)
    assert answer.status_code == 200, answer.text
    assert answer.json()["mfu"] is not None


@pytest.mark.parametrize("content_type", [None, FORM])
def test_every_kind_of_write_reads_it(client: TestClient, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    put = client.put("/v1/jobs/curl-put", content=json.dumps({"gpus_requested": 8}).encode(), headers=headers)
    assert put.status_code == 200, put.text
    pushed = _post(client, "/v1/nodes/curl-node/samples", node_sample(2), content_type)
    assert pushed.status_code == 200, pushed.text
    event = _post(client, "/v1/jobs/curl-put/events", {"type": "init", "seconds": 3.0}, content_type)
    assert event.status_code in (200, 201), event.text


@pytest.mark.parametrize("content_type", ["text/plain", "multipart/form-data; boundary=x", "application/xml"])
def test_another_type_gets_415_naming_the_header_and_changes_nothing(client: TestClient, content_type: str) -> None:
    answer = _post(client, "/v1/jobs/wrong-type/reports", report(), content_type)
    assert answer.status_code == 415
    assert "Content-Type: application/json" in answer.json()["detail"] and content_type in answer.json()["detail"]
    assert client.get("/v1/jobs/wrong-type").status_code == 404


def test_invalid_json_is_still_a_clear_422(client: TestClient) -> None:
    answer = client.post("/v1/jobs/bad-json/reports", content=b"tokens_per_second=5", headers={"content-type": FORM})
    assert answer.status_code == 422
    assert "JSON" in answer.text or "json" in answer.text


@pytest.mark.slow
def test_admission_still_decides_on_the_head(tmp_path: Path) -> None:
    """Under mfumon serve the door checks the token before this runs: no token is 401, a token and no type is 200."""
    with start_server(tmp_path, env={"MFUMON_INGEST_TOKENS": "s3cret"}) as server:
        body = json.dumps(report()).encode()
        refused = httpx.post(f"{server.url}/v1/jobs/door/reports", content=body, timeout=10)
        assert refused.status_code == 401
        headers = {"Authorization": "Bearer s3cret"}
        taken = httpx.post(f"{server.url}/v1/jobs/door/reports", content=body, headers=headers, timeout=10)
        assert taken.status_code == 200, taken.text
