"""torchtitan: one metrics line per logging rank, tokens/s **per device** (``tps``, called ``wps`` before 2025).

``torchtitan/components/metrics.py`` (``MetricsProcessor.log``; colours stripped)::

    [rank0]:[titan] 2025-01-01 12:00:00,000 - root - INFO - step: 10  loss:  8.1234  grad_norm:  1.2345  memory:
     12.34GiB(15.67%)  tps: 12,345  tflops: 123.45  mfu: 12.34%

and the older ``train.py`` (2024)::

    step: 10  loss:  8.1234  memory: 12.34GiB(15.67%)  wps: 12,345  mfu: 12.34%

``tps`` is the rank's tokens ÷ (time x the non-data-parallel degree), i.e. per device: the job's rate is ``tps`` x
GPUs. When several ranks' lines are shown (``LOG_RANK=0,1,...``) each line is one device's figure; they are averaged,
never summed. ``validate step:`` lines (evaluation) are skipped. The start-up line ``Training starts at step 1, with
local batch size 8, global batch size 64, sequence length 8192, ...`` gives the sequence length.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_METRICS = re.compile(r"(?<!validate )\bstep:\s*(?P<step>\d+)\b.*?\b(?:tps|wps):\s*(?P<rate>" + NUMBER + ")")
_STARTS = re.compile(r"Training starts at step \d+, .*?sequence length (?P<seq>\d+)")


def _metrics(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    return ctx.per_gpu("torchtitan", to_number(match["rate"]), step=int(match["step"]))


def _starts(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if ctx.seq_len is None:
        ctx.seq_len = int(match["seq"])
    return None


FORMATS = (
    Format(
        "torchtitan",
        "torchtitan",
        "ps: ",
        _METRICS,
        _metrics,
        (
            Declaration(
                trainer="torchtitan",
                versions="main @ 00fbaaf (`tps`); 2024 @ 0011fb9 (`wps`)",
                example=(
                    "step: 10  loss:  8.1234  grad_norm:  1.2345  memory: 12.34GiB(15.67%)  tps: 12,345  tflops: "
                    "123.45  mfu: 12.34%"
                ),
                key="tps (wps before 2025)",
                figure="tokens/s",
                scope="device",
                timing="current",
                sends="`tps`/`wps` (per GPU) x GPUs; `validate step:` lines are skipped",
            ),
        ),
    ),
    Format(
        "torchtitan_start",
        "torchtitan",
        "Training starts at step",
        _STARTS,
        _starts,
        (
            Declaration(
                trainer="torchtitan",
                versions="main @ 00fbaaf",
                example=(
                    "Training starts at step 1, with local batch size 8, global batch size 64, sequence length 8192, "
                    "..."
                ),
                key="sequence length",
                figure="context",
                scope="none",
                timing="none",
                sends="none: the sequence length",
            ),
        ),
    ),
)
