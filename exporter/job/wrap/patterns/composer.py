r"""MosaicML Composer: the ``ConsoleLogger`` block the ``SpeedMonitor`` callback's figures appear in.

``composer/loggers/console_logger.py`` prints one metric per line under a progress header (floats as ``{:.4f}``)::

    [batch=10/100]:
    \t Train throughput/batches_per_sec: 1.2345
    \t Train throughput/samples_per_sec: 19.7500
    \t Train throughput/device/samples_per_sec: 2.4688
    \t Train throughput/tokens_per_sec: 40448.0000
    \t Train throughput/device/tokens_per_sec: 5056.0000

``throughput/tokens_per_sec`` is the whole job's (the SpeedMonitor divides by the world size for ``device/``); without
it, ``throughput/samples_per_sec`` x the sequence length. ``Eval`` lines are not read.
"""

from __future__ import annotations

import re

from exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number

_HEADER = re.compile(r"^\[(?:epoch=\d+\])?\[?(?:batch|ba|sample|token|tok|iteration|ep)=(?P<step>\d+)(?:/\d+)?\]:\s*$")
_METRIC = re.compile(r"^\t Train (?P<key>[\w/]+): (?P<v>" + NUMBER + r")\s*$")
_WANTED = ("throughput/tokens_per_sec", "throughput/samples_per_sec")


class _ConsoleBlock:
    def __init__(self, step: int) -> None:
        self.step = step
        self.values: dict[str, float] = {}

    def __call__(self, line: str | None, ctx: ParseContext) -> tuple[bool, list[Observation]]:
        if line is not None and line.startswith("\t "):
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


FORMATS = (Format("composer", "Composer", "]:", _HEADER, _header),)
