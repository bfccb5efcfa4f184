r"""MosaicML Composer: the ``ConsoleLogger`` block the ``SpeedMonitor`` callback's figures appear in.

``composer/loggers/console_logger.py`` prints one metric per line under a progress header (floats as ``{:.4f}``)::

    [batch=10/100]:
    \t Train throughput/batches_per_sec: 1.2345
    \t Train throughput/samples_per_sec: 19.7500
    \t Train throughput/device/samples_per_sec: 2.4688
    \t Train throughput/tokens_per_sec: 40448.0000
    \t Train throughput/device/tokens_per_sec: 5056.0000

With ``max_duration`` in epochs the header is ``[epoch=1][batch=5/5]:`` (the batch of the epoch). Logs copied from a
terminal, a blog or a log collector often have the tab turned into spaces (Composer 0.21.3, 16 GPUs)::

    [epoch=1][batch=5/5]:
             Train time/batch: 4
             Train throughput/tokens_per_sec: 20082.8418
             Train throughput/device/tokens_per_sec: 1255.1776

so a metric line is any line indented by tabs or spaces whose text starts with ``Train`` or ``Eval`` (any other
tab-and-space line, such as a table Composer prints in the block, still belongs to it).

``throughput/tokens_per_sec`` is the whole job's (the SpeedMonitor divides by the world size for ``device/``), so it
is used as it is, never multiplied by the GPUs; without it, ``throughput/samples_per_sec`` (also the whole job's) x the
sequence length. ``Eval`` lines are not read.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_HEADER = re.compile(r"^\[(?:epoch=\d+\])?\[?(?:batch|ba|sample|token|tok|iteration|ep)=(?P<step>\d+)(?:/\d+)?\]:\s*$")
_METRIC = re.compile(r"^[ \t]+Train (?P<key>[\w/]+): (?P<v>" + NUMBER + r")\s*$")
_IN_BLOCK = re.compile(r"^(?:\t |[ \t]+(?:Train|Eval) )")
_WANTED = ("throughput/tokens_per_sec", "throughput/samples_per_sec")


class _ConsoleBlock:
    def __init__(self, step: int) -> None:
        self.step = step
        self.values: dict[str, float] = {}

    def __call__(self, line: str | None, ctx: ParseContext) -> tuple[bool, list[Observation]]:
        if line is not None and _IN_BLOCK.match(line):
            metric = _METRIC.match(line)
            if metric is not None and metric["key"] in _WANTED:
                self.values[metric["key"]] = to_number(metric["v"])
            return True, []
        if "throughput/tokens_per_sec" in self.values:
            return False, [ctx.whole_job("composer", self.values["throughput/tokens_per_sec"], step=self.step)]
        if "throughput/samples_per_sec" in self.values:
            return False, [ctx.samples("composer", self.values["throughput/samples_per_sec"], step=self.step)]
        return False, []


def _header(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    ctx.open_block(_ConsoleBlock(int(match["step"])))
    return None


FORMATS = (
    Format(
        "composer",
        "Composer",
        "]:",
        _HEADER,
        _header,
        (
            Declaration(
                trainer="Composer",
                versions="main @ 02c872e; 0.21.3",
                example="[batch=10/100]:\n\t Train throughput/tokens_per_sec: 40448.0000",
                key="throughput/tokens_per_sec",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends="`throughput/tokens_per_sec` (whole job), else `throughput/samples_per_sec` x seq length",
            ),
        ),
    ),
)
