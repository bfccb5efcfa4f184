"""nanotron (``src/nanotron/trainer.py``, ``LoggerWriter.add_scalars_from_list``), one line per logged iteration::

    iteration: 10 / 100 | consumed_tokens: 5.24M | elapsed_time_per_iteration_ms: 1.23K | tokens_per_sec: 426K |
     tokens_per_sec_per_gpu: 53.3K | global_batch_size: 128 | lm_loss: 10.4 | lr: 0.0003 | model_tflops_per_gpu: 123

Since 2024 values are printed with ``human_format`` (3 significant digits, suffixes K, M, B for 1e9, T); earlier as
``4.260000E+05``. ``tokens_per_sec`` is the whole job's; ``model_tflops_per_gpu`` stands in for FLOPs per token when no
model is given.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_LINE = re.compile(r"\biteration: (?P<step>\d+) / \d+ \|.*?\| tokens_per_sec: (?P<tps>" + NUMBER + ")")
_FIELD = re.compile(r"\| (?P<key>elapsed_time_per_iteration_ms|model_tflops_per_gpu): (?P<v>" + NUMBER + ")")


def _line(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    fields = {m["key"]: to_number(m["v"]) for m in _FIELD.finditer(line)}
    ms = fields.get("elapsed_time_per_iteration_ms")
    tflops = fields.get("model_tflops_per_gpu")
    return Observation(
        "nanotron",
        to_number(match["tps"]),
        tflops * 1e12 if tflops else None,
        step_seconds=ms / 1000.0 if ms else None,
        step=int(match["step"]),
    )


FORMATS = (
    Format(
        "nanotron",
        "nanotron",
        "tokens_per_sec: ",
        _LINE,
        _line,
        (
            Declaration(
                trainer="nanotron",
                versions="main (2025); early 2024",
                example=(
                    "iteration: 10 / 100 | ... tokens_per_sec: 426K | tokens_per_sec_per_gpu: 53.3K | ... "
                    "model_tflops_per_gpu: 123"
                ),
                key="tokens_per_sec",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends=(
                    "`tokens_per_sec` (whole job; `K`/`M`/`B` suffixes); `model_tflops_per_gpu` stands in for a model"
                ),
            ),
        ),
    ),
)
