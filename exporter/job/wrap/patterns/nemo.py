"""NeMo: the 2.x ``ProgressPrinter`` line and the 1.x (PyTorch Lightning) progress bar.

NeMo 2 (``nemo/lightning/pytorch/callbacks/progress_printer.py``; values averaged over the log interval, floats
printed as ``{:.4}``)::

    Training epoch 0, iteration 17/99 | lr: 2.699e-06 | global_batch_size: 128 | global_step: 17 |
     reduced_train_loss: 11.03 | train_step_timing in s: 12.64 | consumed_samples: 2304

optionally with ``tokens_per_sec_per_gpu: 1.073e+04`` and ``TFLOPS_per_GPU: 865.7`` (the FLOPs measurement callback).
Tokens/s is ``tokens_per_sec_per_gpu`` x GPUs, else global batch x sequence length ÷ step time.

NeMo 1 (a tqdm bar; 3 significant digits where that is shorter)::

    Epoch 0: :  47%|████▋     | 7/15 [06:19<07:13, reduced_train_loss=11.50, global_step=5.000,
     consumed_samples=12288.0, train_step_timing in s=49.50]

The global batch is ``consumed_samples ÷ (global_step + 1)`` when both are printed exactly (not as ``2e+3``), else
``--tokens-per-step`` gives the tokens of one step.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_NEMO2 = re.compile(
    r"Training epoch \d+, iteration (?P<step>\d+)/\d+ \|.*?\| train_step_timing in s: (?P<t>" + NUMBER + ")"
)
_FIELD2 = re.compile(r"\| (?P<key>global_batch_size|tokens_per_sec_per_gpu|TFLOPS_per_GPU): (?P<v>" + NUMBER + ")")


def _nemo2(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    fields = {m["key"]: to_number(m["v"]) for m in _FIELD2.finditer(line)}
    step_seconds, step = to_number(match["t"]), int(match["step"])
    flops = fields["TFLOPS_per_GPU"] * 1e12 if "TFLOPS_per_GPU" in fields else None
    per_gpu = fields.get("tokens_per_sec_per_gpu")
    if per_gpu is not None and ctx.num_gpus:
        return Observation("nemo", per_gpu * ctx.num_gpus, flops, step_seconds=step_seconds, step=step)
    gbs = fields.get("global_batch_size")
    tokens = gbs * ctx.seq_len if gbs and ctx.seq_len else ctx.tokens_per_step
    if tokens and step_seconds > 0:
        return Observation("nemo", tokens / step_seconds, flops, step_seconds=step_seconds, step=step)
    if flops is not None:  # FLOP/s alone: tokens/s follows from the model's FLOPs per token
        return Observation("nemo", None, flops, step_seconds=step_seconds, step=step)
    missing = ("num_gpus",) if per_gpu is not None else ("seq_len",)
    return Observation("nemo", step_seconds=step_seconds, step=step, missing=missing)


_NEMO1 = re.compile(
    r"global_step=(?P<step>[\d.e+]+), consumed_samples=(?P<samples>[\d.e+]+), "
    r"train_step_timing in s=(?P<t>" + NUMBER + ")"
)


def _nemo1(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    step_seconds = to_number(match["t"])
    step = to_number(match["step"])
    tokens = ctx.tokens_per_step
    exact = "e" not in match["step"] and "e" not in match["samples"]
    if tokens is None and exact and ctx.seq_len:
        tokens = round(to_number(match["samples"]) / (step + 1)) * ctx.seq_len
    if not tokens or step_seconds <= 0:
        missing = ("seq_len",) if exact else ("tokens_per_step",)
        return Observation("nemo", step_seconds=step_seconds, step=int(step), missing=missing)
    return ctx.whole_job("nemo", tokens / step_seconds, step_seconds=step_seconds, step=int(step))


FORMATS = (
    Format(
        "nemo",
        "NeMo",
        "train_step_timing in s: ",
        _NEMO2,
        _nemo2,
        (
            Declaration(
                trainer="NeMo 2",
                versions="2.x @ 01f7dbc (2024-11, 2025-06, 2025-11 logs)",
                example=(
                    "Training epoch 0, iteration 17/99 | ... global_batch_size: 128 | ... train_step_timing in s: "
                    "12.64 | ..."
                ),
                key="tokens_per_sec_per_gpu, else train_step_timing in s",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends=(
                    "`tokens_per_sec_per_gpu` x GPUs, else global batch x seq length ÷ step time; the TFLOP/s stands "
                    "in for a model"
                ),
            ),
        ),
    ),
    Format(
        "nemo1",
        "NeMo",
        "train_step_timing in s=",
        _NEMO1,
        _nemo1,
        (
            Declaration(
                trainer="NeMo 1",
                versions="1.x (NeMo-Megatron launcher)",
                example=(
                    "Epoch 0: : 47%|...| 7/15 [06:19<07:13, ..., global_step=5.000, consumed_samples=12288.0, "
                    "train_step_timing in s=49.50]"
                ),
                key="train_step_timing in s",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends=(
                    "`consumed_samples ÷ (global_step + 1)` (the global batch) x seq length ÷ step time, or "
                    "`--tokens-per-step` ÷ step time when the bar rounds (`2e+3`)"
                ),
            ),
        ),
    ),
)
