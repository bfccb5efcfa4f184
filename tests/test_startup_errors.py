"""Start-up failures a user can cause, run as the user runs them: ``python -m mfumon ...`` in a subprocess.

Each case must exit non-zero with exactly one line on stderr, ``mfumon <command>: ...``, naming the setting and what
to do, and no traceback (issue 58, item 1). The /ui 404 page is checked in process at the end.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import reserved_port


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    line: str  # a regular expression the one stderr line must match in full; {tmp} and {port} are filled in
    env: dict[str, str] = field(default_factory=dict)
    needs_path_without_slurm: bool = False
    skip_if_installed: str | None = None


PAGE = "http://127.0.0.1:{port}/ui"
URL_LINE = (
    r"mfumon {cmd}: --url 'http://127\.0\.0\.1:{port}/ui' is an aggregator page; --url is the aggregator's base "
    r"address: use --url http://127\.0\.0\.1:{port}"
)
SLURM_FIX = r"run it where Slurm's commands work \(slurm\.conf or SLURM_CONF set\), or point --slurm\."
DB_EXAMPLES = r"use sqlite:///path/to/mfumon\.db or postgresql://USER:PASSWORD@HOST:5432/DB"

CASES = [
    Case(
        "serve-url-unparsable",
        ("serve", "--port", "0"),
        r"mfumon serve: MFUMON_DATABASE_URL='mfumon\.db' is not a database URL: " + DB_EXAMPLES,
        env={"MFUMON_DATABASE_URL": "mfumon.db"},
    ),
    Case(
        "serve-folder-missing",
        ("serve", "--port", "0"),
        r"mfumon serve: MFUMON_DATABASE_URL='sqlite:///{tmp}/missing/mfumon\.db': folder {tmp}/missing does not "
        r"exist: create it, or point MFUMON_DATABASE_URL at one that does",
        env={"MFUMON_DATABASE_URL": "sqlite:///{tmp}/missing/mfumon.db"},
    ),
    Case(
        "serve-postgres-refused",
        ("serve", "--port", "0"),
        r"mfumon serve: MFUMON_DATABASE_URL='postgresql\+psycopg://mfumon:\*\*\*@127\.0\.0\.1:{port}/mfumon': "
        r"cannot connect: .*Connection refused: start PostgreSQL there, or fix MFUMON_DATABASE_URL",
        env={"MFUMON_DATABASE_URL": "postgresql://mfumon:s3cret@127.0.0.1:{port}/mfumon"},
    ),
    Case(
        "serve-other-database",
        ("serve", "--port", "0"),
        r"mfumon serve: MFUMON_DATABASE_URL='mysql://root@db/mfumon': mfumon stores its data in SQLite or "
        r"PostgreSQL: " + DB_EXAMPLES,
        env={"MFUMON_DATABASE_URL": "mysql://root@db/mfumon"},
    ),
    Case(
        "serve-port-not-a-number",
        ("serve",),
        r"mfumon serve: MFUMON_PORT='eighty': Input should be a valid integer.*",
        env={"MFUMON_PORT": "eighty"},
    ),
    Case(
        "serve-peaks-file-missing",
        ("serve", "--port", "0"),
        r"mfumon serve: MFUMON_PEAKS_FILE='{tmp}/peaks\.yaml': .*No such file or directory.*: fix the file or unset "
        r"MFUMON_PEAKS_FILE",
        env={"MFUMON_PEAKS_FILE": "{tmp}/peaks.yaml"},
    ),
    Case(
        "serve-port-busy",
        ("serve", "--port", "{busy}"),
        r"mfumon serve: cannot listen on 127\.0\.0\.1:{busy}: Address already in use: stop what listens there, or "
        r"choose another port with --port \(MFUMON_PORT\)",
    ),
    Case(
        "demo-port-busy",
        ("demo", "--port", "{busy}", "--data-dir", "{tmp}/demo"),
        r"mfumon demo: the aggregator could not start on 127\.0\.0\.1:{busy}: cannot listen on 127\.0\.0\.1:{busy}: "
        r"Address already in use: is another mfumon running there\? Pick a free port with --port",
    ),
    Case(
        "scheduler-slurm-missing-once",
        ("scheduler", "--source", "slurm", "--once"),
        r"mfumon scheduler: --source slurm: cannot read the scheduler: squeue failed: .*'squeue': " + SLURM_FIX + ".*",
        needs_path_without_slurm=True,
    ),
    Case(
        "scheduler-slurm-missing",
        ("scheduler", "--source", "slurm"),
        r"mfumon scheduler: --source slurm: cannot read the scheduler: squeue failed: .*'squeue': " + SLURM_FIX + ".*",
        needs_path_without_slurm=True,
    ),
    Case(
        "remediate-slurm-missing-once",
        ("remediate", "--source", "slurm", "--once"),
        r"mfumon remediate: --source slurm: cannot read the scheduler: .*'sinfo'.*: " + SLURM_FIX + "sinfo at them",
        needs_path_without_slurm=True,
    ),
    Case("wrap-url-page", ("wrap", "--url", PAGE, "--", sys.executable, "-c", "pass"), URL_LINE),
    Case(
        "wrap-url-page-from-env",
        ("wrap", "--", sys.executable, "-c", "pass"),
        URL_LINE,
        env={"MFUMON_URL": PAGE},
    ),
    Case("exporter-url-page", ("exporter", "--once", "--source", "sim", "--url", PAGE), URL_LINE),
    Case("scheduler-url-page", ("scheduler", "--source", "slurm", "--once", "--url", PAGE), URL_LINE),
    Case("remediate-url-page", ("remediate", "--source", "slurm", "--once", "--url", PAGE), URL_LINE),
    Case("report-url-page", ("report", "--url", PAGE), URL_LINE),
    Case("profile-url-page", ("profile", "--url", PAGE, "job-1"), URL_LINE),
    Case(
        "wrap-url-not-http",
        ("wrap", "--url", "127.0.0.1:8000", "--", sys.executable, "-c", "pass"),
        r"mfumon wrap: --url '127\.0\.0\.1:8000' is not an http\(s\) URL: give the aggregator's base address, "
        r"e\.g\. http://HOST:8000",
    ),
    Case(
        "wrap-gpu-model-unknown",
        ("wrap", "--gpu-model", "H1000", "--", sys.executable, "-c", "pass"),
        r"mfumon wrap: --gpu-model 'H1000' is not a GPU model mfumon knows: give its device name \(e\.g\. 'NVIDIA "
        r"H100 80GB HBM3'\) or short name \(h100-sxm\), or its peak with --peak-flops-per-gpu",
    ),
    Case(
        "exporter-dcgm-refused",
        ("exporter", "--once", "--source", "dcgm", "--dcgm.url", "http://127.0.0.1:{port}/metrics"),
        r"mfumon exporter: dcgm-exporter at http://127\.0\.0\.1:{port}/metrics: .*: start dcgm-exporter there, or "
        r"point --dcgm\.url \(MFUMON_DCGM_URL\) at it",
    ),
    Case(
        "exporter-nvml-extra-missing",
        ("exporter", "--once", "--source", "nvml"),
        r"mfumon exporter: pynvml is not installed \(pip install 'mfu-monitor\[nvml\]'\)",
        skip_if_installed="pynvml",
    ),
]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something listens on (not only binds: ``mfumon serve`` binds with SO_REUSEADDR too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        _host, port = sock.getsockname()  # held and listening for the whole test: no other process can take it
        yield int(port)


def _fill(text: str, values: dict[str, str], escape: Callable[[str], str] = lambda s: s) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", escape(value))
    return text


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_startup_failure_is_one_line_naming_the_setting(case: Case, tmp_path: Path, busy_port: int) -> None:
    if case.skip_if_installed and importlib.util.find_spec(case.skip_if_installed) is not None:
        pytest.skip(f"{case.skip_if_installed} is installed here")
    with reserved_port() as port:  # nothing listens on it: connections are refused
        values = {"tmp": str(tmp_path), "port": str(port), "busy": str(busy_port)}
        env = {k: v for k, v in os.environ.items() if not k.startswith("MFUMON_")}
        env.update({key: _fill(value, values) for key, value in case.env.items()})
        if case.needs_path_without_slurm:
            empty = tmp_path / "bin"
            empty.mkdir()
            env["PATH"] = str(empty)  # no squeue, sinfo or scontrol: Slurm is not there
        argv = [_fill(arg, values) for arg in case.argv]
        done = subprocess.run(
            [sys.executable, "-m", "mfumon", *argv],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    expected = _fill(case.line, {"cmd": argv[0], **values}, re.escape)
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert re.fullmatch(expected, lines[0]), f"{lines[0]!r}\ndoes not match\n{expected!r}"
    assert "s3cret" not in done.stderr  # a database password is never printed


def test_ui_paths_that_do_not_exist_are_a_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mistyped /ui address (``/ui/job/X`` for ``/ui/jobs/X``) answers a 404 page, not JSON; the API stays JSON."""
    from fastapi.testclient import TestClient

    from mfumon.api.main import create_app

    monkeypatch.setenv("MFUMON_DATABASE_URL", f"sqlite:///{tmp_path / 'mfumon.db'}")
    with TestClient(create_app()) as client:
        for path in ("/ui/job/X", "/ui/no-such-page", "/ui/jobs/X/more"):
            page = client.get(path)
            assert page.status_code == 404
            assert page.headers["content-type"].startswith("text/html")
            assert "<h1>Not found</h1>" in page.text and 'href="/ui/jobs"' in page.text
        page = client.get("/ui/<script>")
        assert "<script>" not in page.text and "&lt;script&gt;" in page.text
        api = client.get("/v1/no-such-endpoint")
        assert api.status_code == 404 and api.json() == {"detail": "Not Found"}
