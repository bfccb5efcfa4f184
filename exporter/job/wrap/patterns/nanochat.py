"""nanochat (karpathy/nanochat, ``scripts/base_train.py``; ``scripts/chat_sft.py``): one line per step, rank 0 only.

``print0(f"step {step:05d}/{num_iterations:05d} ({pct_done:.2f}%) | loss: ... | lrm: ... | dt: {dt * 1000:.2f}ms |
tok/sec: {tok_per_sec:,} | mfu: ... | total time: ...m")``; at the initial commit 3a5e0bc (2025-10-13; the lines of
https://github.com/karpathy/nanochat/pull/147)::

    step 00005/21400 (0.02%) | loss: 8.530593 | lrm: 1.00 | dt: 991.09ms | tok/sec: 529,000 | mfu: 74.00 | total
     time: 0.00m

and since 2f09686 (2026-02-10), with ``epoch``, ``eta`` (43c29dd, 9d4c9b7) and ``bf16_mfu``::

    step 09999/10000 (99.99%) | loss: 5.757840 | lrm: 0.05 | dt: 83.47ms | tok/sec: 6,134 | bf16_mfu: 0.00 | epoch: 1
     pq: 0 rg: 14 | total time: 13.84m | eta: 0.0m

``tok/sec`` is the **whole job's**, **current** figure: ``int(total_batch_size / dt)``, the tokens of one optimizer
step on all ranks over this step's wall time (between device syncs). Up to a9de4b1 (2025-10-26, PR #175) it was
``int(world_tokens_per_fwdbwd / dt)``, one micro-step's tokens: with gradient accumulation it is that many times too
low. Lines of both eras look alike (``mfu:``, no ``eta``/``epoch``/``grad norm``) until 2025-11-05, so for such a line
the step's tokens come from the start-up line ``Total batch size 524,288 => gradient accumulation steps: 1``
(``print0`` in every era): with one accumulation step ``tok/sec`` is sent, else ``total batch size / dt``. Without
that line ``--tokens-per-step`` (the total batch size) gives ``tokens / dt``; without either nothing is sent. Lines
with ``bf16_mfu``, ``eta``, ``epoch`` or ``grad norm`` are all after the fix and ``tok/sec`` is sent as printed. The
first step line a process prints includes ``torch.compile`` (``dt: 23156.74ms`` at step 0) and is skipped. ``Step
00000 | Validation bpb: ...`` (capital S) is another line. ``mfu``/``bf16_mfu`` is the whole job's MFU and is not read.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_STEP = re.compile(
    r"\bstep (?P<step>\d+)(?:/\d+)? \([\d.]+%\) \| .*?\| dt: (?P<dt>"
    + NUMBER
    + r")ms \| tok/sec: (?P<rate>"
    + NUMBER
    + r") \| (?P<mfu>bf16_mfu|mfu): "
)
_STARTUP = re.compile(r"Total batch size (?P<total>[\d,]+) => gradient accumulation steps: (?P<accum>\d+)")
_FIXED = re.compile(r"\| (?:eta|epoch|grad norm): ")  # fields only lines after the fix (a9de4b1) carry


def _step(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if not ctx.memory.get("nanochat:seen"):
        ctx.memory["nanochat:seen"] = True  # torch.compile
        return None
    step, seconds = int(match["step"]), to_number(match["dt"]) / 1000
    if seconds <= 0:
        return None
    if match["mfu"] == "bf16_mfu" or _FIXED.search(line):
        return ctx.whole_job("nanochat", to_number(match["rate"]), step=step, step_seconds=seconds)
    batch = ctx.memory.get("nanochat:batch")
    if batch is not None:
        total, accum = batch
        rate = to_number(match["rate"]) if accum == 1 else total / seconds
        return ctx.whole_job("nanochat", rate, step=step, step_seconds=seconds)
    return ctx.iterations("nanochat", 1 / seconds, step=step, step_seconds=seconds)


def _startup(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    ctx.memory["nanochat:batch"] = (to_number(match["total"]), int(match["accum"]))
    return None


_VERSIONS = "3a5e0bc (2025-10-13) - 92d63d4 (2026-07; scripts/base_train.py, chat_sft.py)"

FORMATS = (
    Format(
        "nanochat",
        "nanochat",
        "tok/sec: ",
        _STEP,
        _step,
        (
            Declaration(
                trainer="nanochat",
                versions="a9de4b1 (2025-10-26) - 92d63d4 (2026-07), lines with bf16_mfu, eta, epoch or grad norm",
                example="step 09999/10000 (99.99%) | loss: 5.757840 | lrm: 0.05 | dt: 83.47ms | tok/sec: 6,134 | "
                "bf16_mfu: 0.00 | epoch: 1 pq: 0 rg: 14 | total time: 13.84m | eta: 0.0m",
                key="tok/sec",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends="tok/sec as printed (the step's tokens on all GPUs / its time); the first step is skipped",
            ),
            Declaration(
                trainer="nanochat",
                versions="3a5e0bc - c6b7ab7 (2025-10-13 - 2025-11-05), lines with mfu and no eta/epoch/grad norm",
                example="step 00005/21400 (0.02%) | loss: 8.530593 | lrm: 1.00 | dt: 991.09ms | tok/sec: 529,000 | "
                "mfu: 74.00 | total time: 0.00m",
                key="dt",
                figure="it/s",
                scope="job",
                timing="current",
                sends="the total batch size (start-up line, or --tokens-per-step) / dt: tok/sec counted one "
                "micro-step before a9de4b1",
            ),
        ),
    ),
    Format(
        "nanochat_batch",
        "nanochat",
        "Total batch size ",
        _STARTUP,
        _startup,
        (
            Declaration(
                trainer="nanochat",
                versions=_VERSIONS,
                example="Total batch size 524,288 => gradient accumulation steps: 1",
                key="Total batch size",
                figure="context",
                scope="none",
                timing="none",
                sends="the tokens of one optimizer step, for the lines before a9de4b1",
            ),
        ),
    ),
)
