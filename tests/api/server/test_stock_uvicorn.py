"""The app alone on a stock uvicorn (issue 54): ``uvicorn mfumon.api.main:create_app --factory`` with its own h11
or httptools protocol, none of ``mfumon serve``'s connection guard or in-place door, answers a fixed set of requests
with the same status, headers and body as ``mfumon serve`` does (``date`` and ``server`` aside).

Both run as subprocesses on SQLite in the test's directory with the same settings, and get the same requests in the
same order, each on a connection of its own. ``.ci/run`` runs this module again with httptools installed, where the
httptools case runs rather than skips (``.ci/uvicorn-matrix``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.server._served import TOKENS, read_answer
from tests.conftest import TEST_DEFAULTS, _clean_env, start_server, stop_process, wait_for_listening
from tests.utils.factories import node_sample, report

pytestmark = pytest.mark.slow  # it starts server processes

SETTINGS = {"MFUMON_MAX_BODY_BYTES": "4096"}  # small, so that a push over it is small too
_UVICORN_LISTENING = re.compile(r"Uvicorn running on (http://\S+:(\d+))")

_EXPORTER = "authorization: Bearer exporter-secret\r\n"
_JSON = "content-type: application/json\r\n"
_PUSH = "/v1/nodes/n1/samples"
_REPORT = "/v1/jobs/team-a-job/reports"


def _raw(method: str, path: str, body: bytes = b"", extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nhost: x\r\n{extra}"
    if method != "HEAD":
        head += f"content-length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


def _cases() -> list[tuple[str, str, bytes]]:
    """name, method, request; built once per test so that both servers get the same bytes."""
    good = json.dumps(node_sample(2)).encode()
    too_large = json.dumps(node_sample(2) | {"padding": "x" * 4096}).encode()  # over MFUMON_MAX_BODY_BYTES
    job_report = json.dumps(report(num_gpus=2)).encode()
    return [
        ("HEAD of a read route", "HEAD", _raw("HEAD", "/v1/nodes")),
        ("HEAD of the health check", "HEAD", _raw("HEAD", "/healthz")),
        ("a good push", "POST", _raw("POST", _PUSH, good, _JSON + _EXPORTER)),
        ("a bad push", "POST", _raw("POST", _PUSH, b'{"timestamp": ', _JSON + _EXPORTER)),
        ("no token", "POST", _raw("POST", _PUSH, good, _JSON)),
        ("the wrong scope", "POST", _raw("POST", _PUSH, good, _JSON + "authorization: Bearer team-a-jobs\r\n")),
        ("a body over the limit", "POST", _raw("POST", _PUSH, too_large, _JSON + _EXPORTER)),
        ("a job report", "POST", _raw("POST", _REPORT, job_report, _JSON + "authorization: Bearer team-a-jobs\r\n")),
        ("a push to another node", "POST", _raw("POST", "/v1/nodes/n2/samples", good, _JSON + _EXPORTER)),
    ]


EXPECTED_STATUSES = {
    "HEAD of a read route": 405,  # FastAPI routes a GET only
    "HEAD of the health check": 405,
    "a good push": 200,
    "a bad push": 422,
    "no token": 401,
    "the wrong scope": 403,
    "a body over the limit": 413,
    "a job report": 200,
    "a push to another node": 200,
}


def _normalised(answer: bytes) -> bytes:
    """The answer with the values of its ``date`` and ``server`` headers blanked."""
    return re.sub(rb"\r\n(date|server): [^\r]*", rb"\r\n\1: -", answer, flags=re.IGNORECASE)


def _database(workdir: Path, migrated_sqlite: Path, name: str) -> str:
    path = workdir / f"{name}.db"
    shutil.copyfile(migrated_sqlite, path)
    return f"sqlite:///{path}"


@contextlib.contextmanager
def _stock_uvicorn(workdir: Path, http: str, env: dict[str, str]) -> Iterator[int]:
    """``uvicorn --factory`` on the app, with its own ``http`` protocol, on a port it picks; yields the port."""
    log_path = workdir / f"uvicorn-{http}-{uuid.uuid4().hex[:8]}.log"
    cmd = [sys.executable, "-m", "uvicorn", "mfumon.api.main:create_app", "--factory", f"--http={http}"]
    cmd += ["--host=127.0.0.1", "--port=0", "--no-access-log", "--log-level=info", "--lifespan=on"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=_clean_env(env), stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    try:
        port = int(wait_for_listening(proc, log_path, _UVICORN_LISTENING).group(2))
        yield port
    finally:
        stop_process(proc)


def _answers(port: int, cases: list[tuple[str, str, bytes]]) -> dict[str, tuple[bytes, bool]]:
    answers = {}
    for name, method, raw in cases:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(raw)
            answer, closed = read_answer(sock, method)
        answers[name] = (_normalised(answer), closed)
    return answers


def _has_httptools() -> bool:
    return importlib.util.find_spec("httptools") is not None


@pytest.mark.parametrize(
    "http",
    [
        "h11",
        pytest.param(
            "httptools",
            marks=pytest.mark.skipif(
                not _has_httptools(), reason="httptools is not installed (.ci/uvicorn-matrix installs it)"
            ),
        ),
    ],
)
def test_stock_uvicorn_answers_as_mfumon_serve_does(tmp_path: Path, migrated_sqlite: Path, http: str) -> None:
    """The same requests to ``mfumon serve`` and to the app on a stock uvicorn: the same answers, byte for byte
    but for the values of ``date`` and ``server``, and the same connections closed after them."""
    (tmp_path / "tokens").write_text(TOKENS)
    common = {"MFUMON_INGEST_TOKENS_FILE": str(tmp_path / "tokens"), **SETTINGS}
    cases = _cases()
    with start_server(tmp_path, {**common, "MFUMON_DATABASE_URL": _database(tmp_path, migrated_sqlite, "serve")}) as s:
        served = _answers(s.port, cases)
    stock_env = {**TEST_DEFAULTS, **common, "MFUMON_DATABASE_URL": _database(tmp_path, migrated_sqlite, "stock")}
    with _stock_uvicorn(tmp_path, http, stock_env) as port:
        stock = _answers(port, cases)
    for name, _, _ in cases:
        assert stock[name] == served[name], name
    statuses = {name: int(answer.split(b" ", 2)[1]) for name, (answer, _) in served.items()}
    assert statuses == EXPECTED_STATUSES
