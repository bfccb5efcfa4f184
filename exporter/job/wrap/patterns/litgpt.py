"""LitGPT (``litgpt/pretrain.py``, ``litgpt/finetune/*.py``) and the older lit-gpt scripts.

::

    Epoch 1 | iter 100 step 25 | loss train: 2.345, val: n/a | iter time: 123.45 ms (step) remaining time: 1:23:45
    iter 100 step 25: loss 2.3456, iter time: 123.45ms (optimizer.step)                         (lit-gpt, 2023)

``iter time`` is one micro-batch iteration, and the printed ones are always the iterations that also run the
optimizer (``log_interval`` x gradient-accumulation iterations apart), so it is not the mean. The rate is instead the
iteration counter's progress between two lines over the time between them, times the whole job's tokens per iteration:
``--tokens-per-step``, else micro batch (the command's ``--train.micro_batch_size``) x sequence length x GPUs.
An interval in which LitGPT validated or saved a checkpoint (``Validating ...``, ``Saving checkpoint``) is skipped.

At the end of a run (LitGPT 0.5.3 and later) a summary table: ``litgpt pretrain`` (``pretrain.py`` ``main``) and the
finetuning scripts (``utils.py`` ``create_finetuning_performance_report``)::

    | - Total tokens  : 999,424                                  (pretrain)
    | - Training Time : 48.30 s
    | - Tok/sec       : 60.93 tok/s

    | - Total Tokens (w/ Padding) :   2674                       (finetune)
    | - Training Time             :  43.95 s
    | - Tok/sec                   :  60.85 tok/s

Both totals are the whole job's (pretrain: iterations x micro batch x sequence length x world size; finetune: the
tokens of every rank, summed by an all-reduce) and the training time is the run's wall time (for pretraining it
includes the final checkpoint's save), so total ÷ time is the whole job's tokens/s, never multiplied by the GPUs.
``Tok/sec`` should be that ratio, and in the finetuning report it is: there the printed figure is used (LitGPT divided
by the unrounded time). The pretrain script divides by the ``time.perf_counter()``
reading taken at the start instead of by the elapsed time (``total_tokens / train_time``; 999,424 tokens in 48.30 s
printed as 60.93 tok/s), so when ``Tok/sec`` is more than 1% off total ÷ time, total ÷ time is used and the
observation's ``note`` says so (``mfumon wrap`` prints it once on stderr).
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_ITER = re.compile(r"\biter (?P<iter>\d+)(?: step (?P<step>\d+))?\]?(?::| \|) .*?\biter time: (?P<ms>[\d.]+) ?ms")
_PAUSE = re.compile(r"^(?:Validating \.\.\.|Saving checkpoint to |iter \d+: val loss )")
_SUMMARY_KEYS = r"Total tokens|Total Tokens \(w/ Padding\)|Training Time|Tok/sec"
_SUMMARY = re.compile(r"\| - (?P<key>" + _SUMMARY_KEYS + r") *: *(?P<v>" + NUMBER + r") ?(?:s|tok/s)?\s*$")
_TOTALS = ("Total tokens", "Total Tokens (w/ Padding)")
_AGREE = 0.01  # Tok/sec within 1% of total ÷ time: the two agree (both are printed rounded)


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


def _summary(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    key, value = match["key"], to_number(match["v"])
    if key in _TOTALS:
        ctx.memory["litgpt_summary"] = {"tokens": value}  # a table starts
        return None
    summary = ctx.memory.setdefault("litgpt_summary", {})
    if key == "Training Time":
        summary["seconds"] = value
        return None
    del ctx.memory["litgpt_summary"]
    tokens, seconds = summary.get("tokens"), summary.get("seconds")
    if not tokens or not seconds or seconds <= 0:
        return ctx.whole_job("litgpt", value)
    computed = tokens / seconds
    if abs(value - computed) <= _AGREE * computed:
        return ctx.whole_job("litgpt", value)
    note = (
        f"LitGPT's summary prints Tok/sec {value:,.2f}, but its Total tokens {tokens:,.0f} ÷ Training Time "
        f"{seconds:,.2f} s is {computed:,.2f} tokens/s; reporting the latter (LitGPT's pretrain script divides by "
        "a clock reading, not by the time elapsed)"
    )
    return ctx.whole_job("litgpt", computed, note=note)


FORMATS = (
    Format(
        "litgpt",
        "LitGPT",
        "iter time:",
        _ITER,
        _iteration,
        (
            Declaration(
                trainer="LitGPT",
                versions="main @ 0363060; lit-gpt 2023",
                example="Epoch 1 | iter 100 step 25 | loss train: 2.345, val: n/a | iter time: 123.45 ms (step) ...",
                key="iter",
                figure="it/s",
                scope="job",
                timing="current",
                sends=(
                    "iterations between lines ÷ the time between them x tokens per iteration: `--tokens-per-step`, "
                    "else the command's `--train.micro_batch_size` x seq length x GPUs (intervals with validation or "
                    "a checkpoint are skipped)"
                ),
            ),
        ),
    ),
    Format(
        "litgpt_pause",
        "LitGPT",
        "",
        _PAUSE,
        _pause,
        (
            Declaration(
                trainer="LitGPT",
                versions="main @ 0363060",
                example="Validating ...",
                key="Validating / Saving checkpoint",
                figure="context",
                scope="none",
                timing="none",
                sends="none: the interval around it is not timed",
            ),
        ),
    ),
    Format(
        "litgpt_summary",
        "LitGPT",
        "| - ",
        _SUMMARY,
        _summary,
        (
            Declaration(
                trainer="LitGPT, end of training",
                versions="0.5.3 to main @ 26857050",
                example="| - Total tokens  : 999,424\n| - Training Time : 48.30 s\n| - Tok/sec       : 60.93 tok/s",
                key="Total tokens, Training Time",
                figure="tokens/s",
                scope="job",
                timing="run",
                sends=(
                    "total tokens (whole job) ÷ training time; the printed `Tok/sec` where it is within 1% of that, "
                    "else total ÷ time, and wrap says so on stderr (LitGPT's pretrain `Tok/sec` divides by a clock "
                    "reading, not by the time elapsed)"
                ),
            ),
        ),
    ),
)
