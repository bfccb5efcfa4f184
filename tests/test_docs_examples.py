"""The documentation's code examples (README.md and every page under docs/) run as written, against a live aggregator.

- Every ``python`` block runs as a program (``pip install 'mfu-monitor[examples]'``, which the README names before
  them, is what the dev install brings too); it must exit 0 and its job must reach the aggregator with an MFU.
- ``sh``/``bash`` blocks of ``curl`` commands run in bash. The one substitution: the aggregator's address
  (``http://127.0.0.1:8000``, or ``$MFUMON_URL``) is the test's server.
- ``mfumon wrap`` blocks wrap the reader's own program (``train.py``): their options go through wrap's real
  argument parser, which must accept them.
- The README's two commands are ``tests/test_readme.py``'s; the deployment commands (docker, kubectl,
  ``mfumon exporter`` on a GPU node) are checked through the files they use (``tests/deploy``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from mfumon.exporter.job.wrap.cli import build_parser
from tests.conftest import LiveServer, start_server

ROOT = Path(__file__).resolve().parent.parent


def _nav(entries: list[object]) -> list[str]:
    """The pages of mkdocs.yml's nav, in the order a reader meets them."""
    pages: list[str] = []
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            pages += _nav(value) if isinstance(value, list) else [str(value)]
    return pages


def _pages() -> list[Path]:
    """README.md, the reference pages, the other pages in nav order, then any page not in the nav; not the runbooks
    and notes linked in from deploy/. Examples build on earlier ones: the HTTP API reference reports the example job
    (``llama-7b-run1``) that the guides' diagnosis, baseline and compare examples then read."""
    nav = _nav(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    ordered = [ROOT / "docs" / page for page in sorted(nav, key=lambda page: not page.startswith("reference/"))]
    rest = sorted(set((ROOT / "docs").rglob("*.md")) - set(ordered))
    docs = (ROOT / "docs").resolve()
    return [ROOT / "README.md", *(p for p in [*ordered, *rest] if p.exists() and p.resolve().is_relative_to(docs))]


PAGES = _pages()
DOCS = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
BLOCKS = [(m["lang"], m["body"]) for m in re.finditer(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```", DOCS, re.S | re.M)]
PYTHON = [body for lang, body in BLOCKS if lang == "python"]
SHELL = [body for lang, body in BLOCKS if lang in ("sh", "bash")]


def _commands(body: str) -> list[str]:
    """The commands of a shell block: backslash continuations joined; indented lines continue a quoted argument
    (the JSON bodies); comment lines dropped."""
    text = re.sub(r"\\\n\s*", " ", body)
    return [line for line in text.splitlines() if line and not line[0].isspace() and not line.startswith("#")]


CURL = [body for body in SHELL if all(c.startswith(("curl ", "export MFUMON_URL=")) for c in _commands(body))]
WRAP = [c for body in SHELL for c in _commands(body) if c.startswith("mfumon wrap ")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with start_server(tmp_path_factory.mktemp("readme")) as live:
        yield live


def test_the_docs_have_the_examples_this_file_runs() -> None:
    assert len(PAGES) > 20
    assert len(PYTHON) >= 3 and len(CURL) >= 2 and len(WRAP) >= 2


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_examples_run_as_written(index: int, server: LiveServer, tmp_path: Path) -> None:
    body = PYTHON[index]
    for package in sorted(set(re.findall(r"^(?:import|from) (torch|transformers|lightning)\b", body, re.M))):
        pytest.importorskip(package)
    job_id = f"readme-python-{index}"
    env = {**os.environ, "MFUMON_URL": server.url, "MFUMON_JOB_ID": job_id, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = httpx.get(f"{server.url}/v1/jobs/{job_id}").json()
    assert job["status"] == "ended" and job["reports_received"] >= 1, job
    assert job["latest"]["mfu"] is not None and job["latest"]["mfu"] > 0, job["latest"]
    # No timing code in any example, yet the step times are there.
    assert job["latest"]["data_wait_ratio"] is not None, job["latest"]


@pytest.mark.parametrize("index", range(len(CURL)))
def test_curl_examples_run_as_written(index: int, server: LiveServer) -> None:
    script = CURL[index].replace("http://127.0.0.1:8000", server.url)
    env = {**os.environ, "MFUMON_URL": server.url}
    env.pop("MFUMON_TOKEN", None)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for answer in re.findall(r"^\{.*\}$", proc.stdout, re.M):
        assert '"detail"' not in answer, answer  # a 4xx answers {"detail": [...]}


@pytest.mark.parametrize("command", WRAP)
def test_wrap_examples_parse(command: str) -> None:
    argv = shlex.split(command)[2:]
    options, child = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = build_parser()
    parser.exit = lambda status=0, message=None: pytest.fail(f"{command}: {message}")  # type: ignore[method-assign]
    parser.parse_args(options)
    assert child, command
