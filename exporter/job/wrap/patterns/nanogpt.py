"""nanoGPT (karpathy/nanoGPT ``train.py``): tokens per iteration printed once, then one time per iteration.

::

    tokens per iteration will be: 491,520
    iter 100: loss 2.3000, time 123.45ms, mfu 35.20%

The time is one iteration on the master process; warm-up iterations print ``mfu -100.00%`` and are skipped.
``--tokens-per-step`` stands in for the first line when it was not seen.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_TOKENS = re.compile(r"tokens per iteration will be:\s*(?P<tokens>[\d,]+)")
_ITER = re.compile(r"\biter (?P<step>\d+): loss [^,]+, time (?P<ms>[\d.]+)ms(?:, mfu (?P<mfu>-?[\d.]+)%)?")


def _tokens(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    ctx.memory["nanogpt_tokens_per_iter"] = int(to_number(match["tokens"]))
    return None


def _iteration(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if match["mfu"] is not None and float(match["mfu"]) == -100.0:
        return None  # nanoGPT's marker for its first (compile/warm-up) iterations
    step_seconds = float(match["ms"]) / 1000.0
    tokens = ctx.tokens_per_step or ctx.memory.get("nanogpt_tokens_per_iter")
    if step_seconds <= 0:
        return None
    if not tokens:
        return Observation("nanogpt", step_seconds=step_seconds, missing=("tokens_per_step",))
    return ctx.whole_job("nanogpt", tokens / step_seconds, step_seconds=step_seconds, step=int(match["step"]))


FORMATS = (
    Format(
        "nanogpt_tokens",
        "nanoGPT",
        "tokens per iteration",
        _TOKENS,
        _tokens,
        (
            Declaration(
                trainer="nanoGPT",
                versions="master",
                example="tokens per iteration will be: 491,520",
                key="tokens per iteration",
                figure="context",
                scope="none",
                timing="none",
                sends="none: the tokens of one iteration, for the lines below",
            ),
        ),
    ),
    Format(
        "nanogpt",
        "nanoGPT",
        "iter ",
        _ITER,
        _iteration,
        (
            Declaration(
                trainer="nanoGPT",
                versions="master",
                example="iter 100: loss 2.3000, time 123.45ms, mfu 35.20%",
                key="time",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends=(
                    "tokens per iteration (or `--tokens-per-step`) ÷ iteration time; warm-up iterations (`mfu "
                    "-100.00%`) are skipped"
                ),
                needs=("tokens_per_step",),
            ),
        ),
    ),
)
