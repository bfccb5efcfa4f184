"""Every declared trainer format on its real lines: what wrap would send, within 1 %, or nothing, as declared.

Each trainer's fixtures are declared in ``fixtures/logs/<trainer>.yml`` next to the log files: the file, the trainer
version that printed it, where it comes from (``captured``, ``copied`` from a public issue or README, or rebuilt from
the ``format string`` where no real line was found), the job's context (GPUs, sequence length, ``--rate-scope``) and
the whole-job tokens/s of each report, worked out by hand from the line's own numbers (``why``); an empty ``expect``
means wrap must send nothing (an unsettled or cumulative figure, a line without a rate).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from mfumon.exporter.job.wrap.explain import would_send
from mfumon.exporter.job.wrap.patterns import BUILTIN_FORMATS, ParseContext

LOGS = Path(__file__).parent / "fixtures" / "logs"
_CONTEXT = {"num_gpus", "seq_len", "tokens_per_step", "rate_scope", "micro_batch_size"}
_PROVENANCE = {"captured", "copied", "format string"}


def _declared() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(LOGS.glob("*.yml")):
        for fixture in yaml.safe_load(path.read_text(encoding="utf-8"))["fixtures"]:
            out.append((f"{path.stem}/{fixture['file']}", fixture))
    return out


DECLARED = _declared()


def _lines(name: str) -> list[str]:
    return [line for line in re.split(r"[\r\n]", (LOGS / name).read_text(encoding="utf-8")) if line]


@pytest.mark.parametrize(("where", "fixture"), DECLARED, ids=[where for where, _ in DECLARED])
def test_declared_fixture_sends_what_it_declares(where: str, fixture: dict[str, Any]) -> None:
    assert {"file", "version", "provenance", "source", "expect", "why"} <= fixture.keys(), where
    assert fixture["provenance"] in _PROVENANCE, where
    context = fixture.get("context") or {}
    assert set(context) <= _CONTEXT, where
    sent = would_send(
        _lines(fixture["file"]), ParseContext(**context), seconds_per_line=fixture.get("seconds_per_line", 1.0)
    )
    expected = [float(x) for x in fixture["expect"]]
    assert len(sent) == len(expected), (where, sent, expected)
    for got, want in zip(sent, expected, strict=True):
        assert got == pytest.approx(want, rel=0.01), (where, sent, expected)


def test_every_declared_fixture_file_exists_and_every_trainer_has_a_format() -> None:
    titles = {d.trainer for fmt in BUILTIN_FORMATS for d in fmt.declarations}
    for path in sorted(LOGS.glob("*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert data["trainer"] in titles, path.name
        for fixture in data["fixtures"]:
            assert (LOGS / fixture["file"]).is_file(), (path.name, fixture["file"])


def test_every_builtin_format_is_declared() -> None:
    undeclared = [fmt.name for fmt in BUILTIN_FORMATS if not fmt.declarations]
    assert not undeclared
