"""LitGPT (``litgpt/pretrain.py``, ``litgpt/finetune/*.py``) and the older lit-gpt scripts.

::

    Epoch 1 | iter 100 step 25 | loss train: 2.345, val: n/a | iter time: 123.45 ms (step) remaining time: 1:23:45
    iter 100 step 25: loss 2.3456, iter time: 123.45ms (optimizer.step)                         (lit-gpt, 2023)

``iter time`` is one micro-batch iteration, and the printed ones are always the iterations that also run the
optimizer (``log_interval`` x gradient-accumulation iterations apart), so it is not the mean. The rate is instead the
iteration counter's progress between two lines over the time between them, times the whole job's tokens per iteration:
``--tokens-per-step``, else micro batch (the command's ``--train.micro_batch_size``) x sequence length x GPUs.
An interval in which LitGPT validated or saved a checkpoint (``Validating ...``, ``Saving checkpoint``) is skipped.
"""

from __future__ import annotations

import re

from exporter.job.wrap.patterns._core import Format, Observation, ParseContext, Result

_ITER = re.compile(r"\biter (?P<iter>\d+)(?: step (?P<step>\d+))?\]?(?::| \|) .*?\biter time: (?P<ms>[\d.]+) ?ms")
_PAUSE = re.compile(r"^(?:Validating \.\.\.|Saving checkpoint to |iter \d+: val loss )")


def _tokens_per_iteration(ctx: ParseContext) -> int | None:
    if ctx.tokens_per_step:
        return ctx.tokens_per_step
    if ctx.micro_batch_size and ctx.seq_len and ctx.num_gpus:
        return ctx.micro_batch_size * ctx.seq_len * ctx.num_gpus
    return None


def _iteration(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    iteration = int(match["iter"])
    step = int(match["step"]) if match["step"] else iteration
    previous = ctx.memory.get("litgpt_last")
    ctx.memory["litgpt_last"] = (iteration, ctx.now)
    tokens = _tokens_per_iteration(ctx)
    if tokens is None:
        return Observation("litgpt", step=step, missing=("tokens_per_step",))
    if previous is None or previous[1] >= ctx.now or iteration <= previous[0]:
        return None
    return ctx.whole_job("litgpt", (iteration - previous[0]) * tokens / (ctx.now - previous[1]), step=step)


def _pause(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    ctx.memory.pop("litgpt_last", None)  # the next interval starts at the next iteration line
    return None


FORMATS = (
    Format("litgpt", "LitGPT", "iter time:", _ITER, _iteration),
    Format("litgpt_pause", "LitGPT", "", _PAUSE, _pause),
)
