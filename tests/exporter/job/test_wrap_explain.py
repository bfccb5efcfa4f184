"""``mfumon wrap --explain`` and declared formats: what a figure's declaration makes wrap send, or hold back.

The declared handler's rules on small formats of their own (a per-GPU figure, an unsettled one, an average since the
start, a running count, a block of lines), then ``--explain`` on a log: a verdict per line, nothing contacted.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from mfumon.exporter.job.wrap import cli
from mfumon.exporter.job.wrap.patterns import LogParser, ParseContext
from mfumon.exporter.job.wrap.patterns._core import NUMBER
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_block_format, declared_format


def _declaration(**fields: object) -> Declaration:
    base: dict[str, object] = {
        "trainer": "T",
        "versions": "1",
        "example": "x",
        "key": "tps",
        "figure": "tokens/s",
        "scope": "job",
        "timing": "current",
        "sends": "the figure",
    }
    return Declaration(**{**base, **fields})  # type: ignore[arg-type]


def _feed(
    fmt_regex: str, lines: list[str], context: ParseContext, **fields: object
) -> list[tuple[float | None, tuple]]:
    fmt = declared_format("t", "=", re.compile(fmt_regex), _declaration(**fields))
    parser = LogParser(context, builtin=False)
    parser.formats = [fmt]
    out = []
    for i, line in enumerate(lines):
        out += [(o.tokens_per_second, o.missing) for o in parser.feed(line, now=10.0 * (i + 1))]
    return out


RATE = r"tps=(?P<rate>" + NUMBER + r")"


def test_a_per_gpu_figure_is_multiplied_by_the_gpus_or_says_it_needs_them() -> None:
    assert _feed(RATE, ["tps=1,000"], ParseContext(num_gpus=8), scope="device") == [(8000.0, ())]
    assert _feed(RATE, ["tps=1,000"], ParseContext(), scope="device") == [(None, ("num_gpus",))]


def test_an_unsettled_figure_is_sent_only_once_rate_scope_settles_it() -> None:
    assert _feed(RATE, ["tps=1000"], ParseContext(num_gpus=4), scope="unsettled") == [(None, ("rate_scope",))]
    assert _feed(RATE, ["tps=1000"], ParseContext(num_gpus=4, rate_scope="device"), scope="unsettled") == [(4000.0, ())]
    assert _feed(RATE, ["tps=1000"], ParseContext(num_gpus=4, rate_scope="job"), scope="unsettled") == [(1000.0, ())]


def test_an_average_since_the_start_becomes_the_interval_rate_or_nothing() -> None:
    regex = RATE + r" elapsed=(?P<elapsed>" + NUMBER + ")"
    # 1000 tokens/s over the first 100 s, then 1500 over all 200 s: 2000 tokens/s in the second 100 s
    lines = ["tps=1000 elapsed=100", "tps=1500 elapsed=200"]
    assert _feed(regex, lines, ParseContext(), timing="cumulative") == [(2000.0, ())]
    # without the elapsed time it is never sent as a current rate
    assert _feed(RATE, ["tps=1000"], ParseContext(), timing="cumulative") == [(None, ("current_rate",))]


def test_a_running_count_gives_the_rate_between_two_lines() -> None:
    regex = r"tokens=(?P<rate>" + NUMBER + ")"
    # lines 10 s apart (the test's arrival times): 50,000 tokens more is 5,000 tokens/s
    assert _feed(regex, ["tokens=100,000", "tokens=150,000"], ParseContext(), figure="tokens", timing="count") == [
        (5000.0, ())
    ]


def test_a_block_is_read_from_its_header_and_indented_lines() -> None:
    fmt = declared_block_format(
        "b",
        "[step=",
        re.compile(r"^\[step=(?P<step>\d+)"),
        re.compile(r"(?s)\[step=(?P<step>\d+).*?device/tps=(?P<rate>" + NUMBER + ")"),
        _declaration(scope="device"),
    )
    parser = LogParser(ParseContext(num_gpus=2), builtin=False)
    parser.formats = [fmt]
    lines = ["[step=10/100]", "    loss=2.5", "    device/tps=12,000", "[step=20/100]", "    device/tps=13,000"]
    observed = [o for i, line in enumerate(lines) for o in parser.feed(line, now=float(i))] + parser.close()
    assert [(o.step, o.tokens_per_second) for o in observed] == [(10, 24000.0), (20, 26000.0)]


LOG = [
    "Training starts at step 1, with local batch size 8, global batch size 64, sequence length 8192, total steps 10",
    "step: 10  loss:  8.1234  grad_norm:  1.2345  memory: 12.34GiB(15.67%)  tps: 12,345  tflops: 123.45  mfu: 12.34%",
    "a line no format reads",
]


@pytest.fixture
def no_reporter(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("--explain must not create a reporter")

    monkeypatch.setattr(cli, "JobReporter", refuse)


def test_explain_gives_a_verdict_for_each_line_without_a_reporter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_reporter: None
) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join(LOG) + "\n")
    assert cli.main(["--num-gpus", "8", "--explain", str(log)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["1", "torchtitan_start:", "read", *out[0].split()[3:]]
    assert out[1].strip() == "-> nothing yet: context"
    assert "torchtitan: read 'step: 10" in out[2]
    assert out[3].strip().startswith("-> sends 98,760 tokens/s")
    assert out[4].split() == ["3", "-"]
    assert out[5] == "3 line(s); wrap would send 1 figure(s), 98,760 to 98,760 tokens/s of the whole job (training)"


def test_explain_says_what_is_missing_and_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_reporter: None
) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(LOG[1] + "\n"))
    assert cli.main(["--explain"]) == 0
    out = capsys.readouterr().out
    assert "-> nothing: needs the number of GPUs (its figures are per GPU): pass --num-gpus N" in out
    assert "wrap would send 0 figure(s)" in out


def test_explain_of_a_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], no_reporter: None) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--explain", "/nonexistent/train.log"])
    assert exit_info.value.code == 2
    assert "--explain '/nonexistent/train.log': No such file or directory" in capsys.readouterr().err
