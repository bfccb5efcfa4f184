"""A 401/403 says the fix once, then is retried quietly with backoff and counted (issue 30 #5)."""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from mfumon.exporter import auth
from mfumon.exporter.job.reporter import JobReporter
from mfumon.exporter.job.reporter import _client as reporter_client
from mfumon.exporter.node.push import RetryPolicy, Sender
from mfumon.exporter.node.selfmetrics import ExporterMetrics
from mfumon.exporter.node.spool import MemorySpool
from mfumon.exporter.samples import GpuSample, NodeBatch


class _Refusing(http.server.BaseHTTPRequestHandler):
    requests = 0

    def _refuse(self) -> None:
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"detail":"missing or invalid token"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = _refuse

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_url() -> Iterator[str]:
    _Refusing.requests = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _wait_for(what: str, check: Callable[[], bool], timeout_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings, less the reporter's start-up line naming the job's page (issue 58: said once, by design)."""
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return [m for m in messages if not m.startswith("mfumon: reporting job ")]


def test_the_exporter_says_the_fix_once_and_counts_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"detail": "missing or invalid token"})

    metrics = ExporterMetrics()
    sender = Sender(
        "http://aggregator",
        MemorySpool(1024**2),
        metrics=metrics,
        retry=RetryPolicy(initial_seconds=0.01, max_seconds=0.02),
        transport=httpx.MockTransport(refuse),
    )
    sender.start()
    gpu = GpuSample(uuid="GPU-1", index=0, name="NVIDIA H100 80GB HBM3")
    sender.submit(NodeBatch(node="n1", timestamp=1000.0, gpus=(gpu,)))

    def count() -> float:
        return metrics.registry.get_sample_value("mfumon_exporter_auth_failures_total", {"status": "401"}) or 0.0

    _wait_for("five refused pushes", lambda: count() >= 5)
    warnings = _warnings(caplog)
    sender.stop(timeout_seconds=5)
    assert len(warnings) == 1, warnings
    assert "--token-file" in warnings[0] and "MFUMON_TOKEN_FILE" in warnings[0] and "MFUMON_TOKEN=" in warnings[0]
    assert "HTTP 401: missing or invalid token" in warnings[0]
    assert len(sender.spool) == 1  # kept for when the token is fixed, not dropped


def test_the_reporter_says_the_fix_once_then_backs_off(
    refusing_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="mfumon.exporter.job.reporter")
    reporter = JobReporter("rep-401", url=refusing_url, model={"params": 1e6}, start=False)
    for _ in range(3):
        reporter.step(100, step_seconds=0.01)
        assert reporter.flush(timeout_seconds=5) is False
    assert _Refusing.requests == 1  # the later rounds waited out the backoff without asking again
    monkeypatch.setattr(reporter_client, "_AUTH_BACKOFF_SECONDS", (0.0, 0.0))
    reporter._delivery._auth_not_before = 0.0  # type: ignore[union-attr]  # as if the backoff had passed
    for _ in range(3):
        assert reporter.flush(timeout_seconds=5) is False
    stats = reporter.stats()
    assert stats.auth_failures == 4 and stats.sent == 0 and stats.rejected == 0 and stats.pending >= 3
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "mfumon wrap --token-file" in warnings[0] and "MFUMON_TOKEN" in warnings[0]
    reporter.close(timeout_seconds=0.5)


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        (None, {}, None),
        (None, {"MFUMON_TOKEN": " t1 "}, "t1"),
        (None, {"MFUMON_TOKEN_FILE": "FILE", "MFUMON_TOKEN": "t1"}, "from-file"),
        ("FILE", {"MFUMON_TOKEN": "t1"}, "from-file"),
    ],
)
def test_one_token_rule_for_every_command(
    tmp_path: Path, flag: str | None, env: dict[str, str], expected: str | None
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\nsecond line is ignored\n")
    env = {k: str(token_file) if v == "FILE" else v for k, v in env.items()}
    assert auth.read_token(str(token_file) if flag else None, env) == expected


def test_an_unreadable_token_file_is_an_error_not_no_token(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        auth.read_token(None, {"MFUMON_TOKEN_FILE": str(tmp_path / "missing")})
