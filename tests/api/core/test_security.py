"""Ingest tokens: required beyond loopback, compared in constant time, never logged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from mfumon.api.core.security import (
    TokenVerifier,
    check_startup_security,
    is_loopback,
    parse_tokens,
)
from mfumon.api.errors import InsecureConfigError
from tests.conftest import start_server
from tests.utils.factories import node_sample, report

SECRET = "s3cret-token-value"


def test_tokens_guard_ingest_but_not_reads(make_client) -> None:  # type: ignore[no-untyped-def]
    client: TestClient = make_client(INGEST_TOKENS=f"other,{SECRET}")
    assert client.post("/v1/jobs/j/reports", json=report()).status_code == 401
    wrong = client.post("/v1/jobs/j/reports", json=report(), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert client.post("/v1/nodes/n/samples", json=node_sample(1)).status_code == 401
    assert client.put("/v1/jobs/j", json={}).status_code == 401
    assert client.get("/v1/jobs").json()["count"] == 0
    ok = client.post("/v1/jobs/j/reports", json=report(), headers={"Authorization": f"Bearer {SECRET}"})
    assert ok.status_code == 200
    metrics = client.get("/metrics").text
    assert 'mfumon_ingest_requests_total{endpoint="job_reports",outcome="unauthorized"} 2' in metrics
    assert 'mfumon_ingest_requests_total{endpoint="job_reports",outcome="accepted"} 1' in metrics


def test_token_file(make_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "tokens"
    path.write_text(f"# exporters\n{SECRET}\n\n")
    client: TestClient = make_client(INGEST_TOKENS_FILE=path)
    assert (
        client.post("/v1/jobs/j/reports", json=report(), headers={"Authorization": f"Bearer {SECRET}"}).status_code
        == 200
    )
    assert (
        client.post("/v1/jobs/j/reports", json=report(), headers={"Authorization": "Bearer # exporters"}).status_code
        == 401
    )


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
        ("::", False),
    ],
)
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_startup_rule() -> None:
    with pytest.raises(InsecureConfigError, match="--insecure"):
        check_startup_security("0.0.0.0", [], allow_insecure=False)
    check_startup_security("0.0.0.0", parse_tokens([SECRET], []), allow_insecure=False)
    check_startup_security("0.0.0.0", [], allow_insecure=True)
    check_startup_security("127.0.0.1", [], allow_insecure=False)


def test_a_weak_token_cannot_guard_a_network_port() -> None:
    """A one-character token was enough to listen beyond loopback (issue 28 #7)."""
    for weak in ("x", "short-token", "a" * 40, "1212121212121212"):
        with pytest.raises(InsecureConfigError, match=r"secrets\.token_urlsafe"):
            check_startup_security("0.0.0.0", parse_tokens([SECRET, weak], []), allow_insecure=False)
    check_startup_security("127.0.0.1", parse_tokens(["x"], []), allow_insecure=False)  # loopback: the host's own
    check_startup_security("0.0.0.0", parse_tokens(["x"], []), allow_insecure=True)  # said so explicitly


def test_serve_names_the_weak_token(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mfumon", "serve", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "MFUMON_INGEST_TOKENS": f"{SECRET},x"},
    )
    assert result.returncode == 1 and "env-2" in result.stderr and "16 characters" in result.stderr


def test_verifier_compares_every_token() -> None:
    verifier = TokenVerifier(parse_tokens(["a", SECRET], []))
    assert verifier.verify(f"Bearer {SECRET}") and verifier.verify(f"bearer  {SECRET} ")
    assert not verifier.verify(SECRET) and not verifier.verify(None) and not verifier.verify("Bearer ")


def test_serve_refuses_network_address_without_tokens(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mfumon", "serve", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1
    assert "refusing to listen" in result.stderr and "MFUMON_INGEST_TOKENS" in result.stderr


@pytest.mark.slow
def test_live_server_never_logs_the_token(tmp_path: Path) -> None:
    with start_server(tmp_path, env={"MFUMON_INGEST_TOKENS": SECRET, "MFUMON_LOG_LEVEL": "DEBUG"}) as server:
        bad = httpx.post(f"{server.url}/v1/jobs/j/reports", json=report(), headers={"Authorization": "Bearer wrong"})
        good = httpx.post(
            f"{server.url}/v1/jobs/j/reports", json=report(), headers={"Authorization": f"Bearer {SECRET}"}
        )
        assert (bad.status_code, good.status_code) == (401, 200)
        log = server.log()
    assert "1 token(s)" in log and SECRET not in log
