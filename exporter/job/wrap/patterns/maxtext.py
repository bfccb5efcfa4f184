"""MaxText (``MaxText/metric_logger.py``; ``train.py`` in older releases), one line per step::

    completed step: 10, seconds: 1.234, TFLOP/s/device: 123.456, Tokens/s/device: 1234.567, total_weights: 65536,
     loss: 10.123

Both figures are per device (per TPU chip or GPU): tokens/s is ``Tokens/s/device`` x devices, and the TFLOP/s (model
FLOPs, MaxText's ``calculate_tflops_training_per_device``) stands in for FLOPs per token when no model is given. The
first step a process logs includes JAX's compilation (tens of seconds) and is skipped.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_STEP = re.compile(
    r"completed step: (?P<step>\d+), seconds: (?P<t>" + NUMBER + r"),.*?TFLOP/s/device: (?P<tflops>" + NUMBER + r"), "
    r"Tokens/s/device: (?P<tps>" + NUMBER + ")"
)


def _step(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if not ctx.memory.get("maxtext_compiled"):
        ctx.memory["maxtext_compiled"] = True
        return None
    step, seconds = int(match["step"]), to_number(match["t"])
    flops = to_number(match["tflops"]) * 1e12
    observed = ctx.per_gpu("maxtext", to_number(match["tps"]), step=step, step_seconds=seconds)
    return Observation(
        "maxtext", observed.tokens_per_second, flops, step_seconds=seconds, step=step, missing=observed.missing
    )


FORMATS = (
    Format(
        "maxtext",
        "MaxText",
        "completed step: ",
        _STEP,
        _step,
        (
            Declaration(
                trainer="MaxText",
                versions="main (2025)",
                example="completed step: 10, seconds: 1.234, TFLOP/s/device: 345.678, Tokens/s/device: 6638.574, ...",
                key="Tokens/s/device",
                figure="tokens/s",
                scope="device",
                timing="current",
                sends=(
                    "`Tokens/s/device` x devices (the first step, with JAX's compilation, is skipped); the TFLOP/s "
                    "stands in for a model"
                ),
            ),
        ),
    ),
)
