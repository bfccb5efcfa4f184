"""Scoped tokens (issue 10 #3): node samples, job writes, teams, optional read auth, writes audited by token name.

Before scopes any token could do anything: an exporter's token rewrote another team's job, set ``num_gpus`` to ten
million and ended it; a job's token pushed samples for any node.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.conftest import start_server
from tests.utils.factories import node_sample, report, scrape

TOKENS = """\
# token                 options
admin-secret
exporter-secret         name=exporters scopes=nodes
nlp-secret              name=team-nlp  scopes=jobs teams=nlp
vision-secret           name=team-vision scopes=jobs teams=vision
multi-secret            name=platform scopes=jobs,nodes teams=nlp,vision
grafana-secret          name=grafana scopes=read
slurm-secret            name=slurm-adapter scopes=scheduler
"""


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    return path


@pytest.fixture
def scoped(make_client: Callable[..., TestClient], tokens_file: Path) -> TestClient:
    return make_client(INGEST_TOKENS_FILE=tokens_file)


def _job(client: TestClient, job_id: str) -> dict[str, Any]:
    return client.get(f"/v1/jobs/{job_id}").json()  # type: ignore[no-any-return]


def test_a_line_without_scopes_may_do_everything(scoped: TestClient) -> None:
    admin = _auth("admin-secret")
    assert scoped.put("/v1/jobs/j", json={"team": "research"}, headers=admin).status_code == 200
    assert scoped.post("/v1/jobs/j/reports", json=report(), headers=admin).status_code == 200
    assert scoped.post("/v1/nodes/n/samples", json=node_sample(1), headers=admin).status_code == 200
    assert scoped.post("/v1/jobs/j/end", json={"exit_code": 0}, headers=admin).status_code == 200


def test_an_exporter_token_cannot_touch_jobs(scoped: TestClient) -> None:
    """The issue's case: the exporter token rewrote a team's job, inflated its GPUs and ended it."""
    assert (
        scoped.post("/v1/jobs/train/reports", json=report(team="nlp"), headers=_auth("nlp-secret")).status_code == 200
    )
    before = _job(scoped, "train")
    exporter = _auth("exporter-secret")
    attempts = [
        scoped.put(
            "/v1/jobs/train", json={"team": "vision", "gpu_model": "a100", "num_gpus": 10_000_000}, headers=exporter
        ),
        scoped.post("/v1/jobs/train/reports", json=report(model={"params": 1e12}), headers=exporter),
        scoped.post("/v1/jobs/train/end", json={"exit_code": 137}, headers=exporter),
        scoped.put("/v1/jobs/new-one", json={}, headers=exporter),
    ]
    for response in attempts:
        assert response.status_code == 403, response.text
        assert response.json()["detail"] == "token 'exporters' lacks the 'jobs' scope (it has: nodes)"
    after = _job(scoped, "train")
    assert after == before and after["status"] == "running" and after["num_gpus"] == 8
    assert scoped.get("/v1/jobs/new-one").status_code == 404
    assert scoped.post("/v1/nodes/gpu-01/samples", json=node_sample(2), headers=exporter).status_code == 200
    text = scrape(scoped)
    assert 'mfumon_ingest_requests_total{endpoint="job_update",outcome="forbidden"} 2' in text


def test_a_job_token_cannot_push_samples(scoped: TestClient) -> None:
    response = scoped.post("/v1/nodes/victim/samples", json=node_sample(2), headers=_auth("nlp-secret"))
    assert response.status_code == 403 and "'nodes' scope" in response.json()["detail"]
    assert scoped.get("/v1/nodes").json()["count"] == 0


def test_a_team_token_writes_only_its_teams_jobs(scoped: TestClient) -> None:
    nlp, vision = _auth("nlp-secret"), _auth("vision-secret")
    assert scoped.put("/v1/jobs/v1", json={"team": "vision", "num_gpus": 4}, headers=vision).status_code == 200
    before = _job(scoped, "v1")
    refused = [
        scoped.put("/v1/jobs/v1", json={"num_gpus": 10_000_000}, headers=nlp),
        scoped.post("/v1/jobs/v1/reports", json=report(), headers=nlp),
        scoped.post("/v1/jobs/v1/end", json={"exit_code": 1}, headers=nlp),
    ]
    for response in refused:
        assert response.status_code == 403
        assert response.json()["detail"] == "token 'team-nlp' writes jobs of team(s) nlp; job 'v1' is of team 'vision'"
    assert _job(scoped, "v1") == before
    # It creates jobs only in its team; one without a team gets its team.
    response = scoped.put("/v1/jobs/n2", json={"team": "vision"}, headers=nlp)
    assert response.status_code == 403 and "not of team 'vision'" in response.json()["detail"]
    assert scoped.get("/v1/jobs/n2").status_code == 404
    assert scoped.post("/v1/jobs/n1/reports", json=report(), headers=nlp).json()["mfu"] is not None
    assert _job(scoped, "n1")["team"] == "nlp"
    # ... and cannot move its own job to another team.
    assert scoped.put("/v1/jobs/n1", json={"team": "vision"}, headers=nlp).status_code == 403
    assert _job(scoped, "n1")["team"] == "nlp"


def test_job_events_follow_the_same_scopes_and_teams(scoped: TestClient) -> None:
    assert scoped.put("/v1/jobs/v1", json={"team": "vision"}, headers=_auth("vision-secret")).status_code == 200
    failure = {"type": "failure", "exit_code": 1}
    assert scoped.post("/v1/jobs/v1/events", json=failure, headers=_auth("exporter-secret")).status_code == 403
    response = scoped.post("/v1/jobs/v1/events", json=failure, headers=_auth("nlp-secret"))
    assert response.status_code == 403 and "is of team 'vision'" in response.json()["detail"]
    assert _job(scoped, "v1")["failures"] == 0
    assert scoped.post("/v1/jobs/v1/events", json=failure, headers=_auth("vision-secret")).status_code == 200
    assert _job(scoped, "v1")["failures"] == 1
    future = {"type": "eval", "seconds": 3, "timestamp": time.time() + 3600}
    response = scoped.post("/v1/jobs/v1/events", json=future, headers=_auth("vision-secret"))
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "timestamp"


def test_only_a_scheduler_token_syncs_a_scheduler(scoped: TestClient) -> None:
    """A sync creates and ends every team's jobs: a token with the jobs scope (or any other) may not send one."""
    job = {"job_id": "s1", "status": "pending", "gpus_requested": 8}
    body = {"kind": "slurm", "observed_at": time.time(), "jobs": [job]}
    for secret in ("nlp-secret", "exporter-secret"):
        response = scoped.put("/v1/scheduler/slurm", json=body, headers=_auth(secret))
        assert response.status_code == 403 and "'scheduler' scope" in response.json()["detail"]
    assert scoped.get("/v1/jobs/s1").status_code == 404
    assert scoped.put("/v1/scheduler/slurm", json=body, headers=_auth("slurm-secret")).status_code == 200
    assert scoped.get("/v1/jobs/s1").json()["status"] == "pending"


def test_a_job_without_a_team_belongs_to_no_team_token(scoped: TestClient) -> None:
    assert scoped.put("/v1/jobs/shared", json={}, headers=_auth("admin-secret")).status_code == 200
    response = scoped.post("/v1/jobs/shared/end", headers=_auth("nlp-secret"))
    assert response.status_code == 403 and "is of no team" in response.json()["detail"]


def test_a_token_of_several_teams_must_name_the_team(scoped: TestClient) -> None:
    multi = _auth("multi-secret")
    response = scoped.put("/v1/jobs/m1", json={}, headers=multi)
    assert response.status_code == 403 and "name the job's team" in response.json()["detail"]
    assert scoped.put("/v1/jobs/m1", json={"team": "vision"}, headers=multi).status_code == 200
    assert scoped.put("/v1/jobs/m1", json={"team": "nlp"}, headers=multi).status_code == 200  # among its teams
    assert _job(scoped, "m1")["team"] == "nlp"


def test_reads_stay_open_unless_asked(scoped: TestClient) -> None:
    assert scoped.get("/v1/jobs").status_code == 200 and scoped.get("/metrics").status_code == 200


def test_reads_can_require_a_read_token(make_client: Callable[..., TestClient], tokens_file: Path) -> None:
    client = make_client(INGEST_TOKENS_FILE=tokens_file, READ_REQUIRES_TOKEN=True)
    for path in ("/v1/jobs", "/v1/nodes", "/v1/cluster", "/metrics", "/v1/jobs/x"):
        response = client.get(path)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer", path
        assert client.get(path, headers=_auth("exporter-secret")).status_code == 403, path
        assert client.get(path, headers=_auth("grafana-secret")).status_code in (200, 404), path
        assert client.get(path, headers=_auth("admin-secret")).status_code in (200, 404), path
    assert client.get("/healthz").status_code == 200 and client.get("/readyz").status_code == 200
    # A read token writes nothing; writers still write without the read scope.
    assert client.put("/v1/jobs/j", json={}, headers=_auth("grafana-secret")).status_code == 403
    assert client.post("/v1/nodes/n/samples", json=node_sample(1), headers=_auth("exporter-secret")).status_code == 200


def test_concurrent_first_writes_to_one_job(scoped: TestClient) -> None:
    """Every first write to a new id succeeds (it used to fail on the primary key), and the team check holds."""
    codes: Counter[tuple[str, int]] = Counter()
    lock = threading.Lock()

    def write(i: int, job_id: str) -> None:
        secret = ("nlp-secret", "vision-secret", "admin-secret")[i % 3]
        if i % 2:
            response = scoped.put(f"/v1/jobs/{job_id}", json={"num_gpus": 8}, headers=_auth(secret))
        else:
            response = scoped.post(f"/v1/jobs/{job_id}/reports", json=report(), headers=_auth(secret))
        with lock:
            codes[(secret, response.status_code)] += 1

    for j in range(8):
        threads = [threading.Thread(target=write, args=(i, f"race-{j}")) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        job = _job(scoped, f"race-{j}")
        first_team = job["team"]
        assert first_team in ("nlp", "vision", None)
    assert all(code in (200, 403) for _, code in codes), codes
    assert codes[("admin-secret", 200)] == 16  # the untethered token always writes
    assert scoped.get("/v1/jobs").json()["count"] == 8


def test_writes_are_logged_and_counted_by_token_name(tmp_path: Path, tokens_file: Path) -> None:
    env = {"MFUMON_INGEST_TOKENS_FILE": str(tokens_file)}
    with start_server(tmp_path, env=env) as server, httpx.Client(base_url=server.url, timeout=10) as http:
        for _ in range(3):
            http.post("/v1/nodes/gpu-01/samples", json=node_sample(1), headers=_auth("exporter-secret"))
        http.put("/v1/jobs/j", json={"team": "nlp"}, headers=_auth("nlp-secret"))
        http.put("/v1/jobs/j", json={"team": "vision"}, headers=_auth("nlp-secret"))  # 403, still audited
        http.put("/v1/jobs/j", json={}, headers=_auth("wrong"))  # 401: no token name to log
        text = http.get("/metrics").text
        log = server.log()
    assert 'mfumon_token_writes_total{token_name="exporters",endpoint="node_samples",outcome="accepted"} 3' in text
    assert 'mfumon_token_writes_total{token_name="team-nlp",endpoint="job_update",outcome="accepted"} 1' in text
    assert 'mfumon_token_writes_total{token_name="team-nlp",endpoint="job_update",outcome="rejected"} 1' in text
    assert "POST /v1/nodes/gpu-01/samples by token exporters: 200" in log
    assert "PUT /v1/jobs/j by token team-nlp: 403" in log
    assert "7 token(s): line-2 (baselines,jobs,nodes,prices,profile,read,remediate,scheduler), exporters (nodes)" in log
    for secret in ("admin-secret", "exporter-secret", "nlp-secret", "wrong"):
        assert secret not in log


def _serve_refuses(tmp_path: Path, env: dict[str, str]) -> str:
    """Start ``mfumon serve`` with this environment; it must exit 1 at once. Its stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "mfumon", "serve", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    assert result.returncode == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("tok scopes=nodes,admin", "unknown scope(s) ['admin']"),
        ("tok teams=nlp scopes=nodes", "no 'jobs' scope"),
        ("tok teams=nlp scopes=jobs,scheduler", "cannot have teams="),
        ("tok role=x", "unknown option 'role'"),
        ("a name=x\nb name=x", "token names must be unique: ['x']"),
        ("tok name=has/slash", "must match"),
    ],
)
def test_a_bad_token_file_stops_the_server(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "tokens").write_text(line + "\n")
    assert message in _serve_refuses(tmp_path, {"MFUMON_INGEST_TOKENS_FILE": str(tmp_path / "tokens")})


def test_read_auth_without_a_read_token_stops_the_server(tmp_path: Path) -> None:
    env = {"MFUMON_INGEST_TOKENS": "t name=x scopes=nodes", "MFUMON_READ_REQUIRES_TOKEN": "1"}
    assert "no token has the 'read' scope" in _serve_refuses(tmp_path, env)
