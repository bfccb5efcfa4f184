r"""Unsloth: its training banner, for the data-parallel GPU count.

Unsloth trains through a patched HF ``Trainer`` loop (TRL's trainers on top), so its per-step and end-of-run dicts are
HF/TRL lines, read in ``hf.py``; it prints no throughput of its own. Its training banner (printed by every rank, and
again after an automatic batch-size retry) gives the job's data-parallel world size::

    ==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1
       \\   /|    Num examples = 362 | Num Epochs = 15 | Total steps = 2,715
    O^O/ \_/ \    Batch size per device = 1 | Gradient accumulation steps = 1
    \        /    Data Parallel GPUs = 2 | Total batch size (1 x 1 x 2) = 2

``Data Parallel GPUs = N`` is ``args.world_size`` (2025-03 on); before, the banner's first line ended in
``| Num GPUs = N`` with the same meaning (Feb-2024 release). ``Num GPUs used = N`` (devices holding one process's
weights) and the load banner's ``Num GPUs = N. Max memory: ...`` (visible CUDA devices) are **not** the world size
and are not read. The count sets the job's GPUs where ``--num-gpus`` did not (the banner may be anywhere in a line:
the retry's banner follows a progress bar).
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import Format, ParseContext, Result
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_BANNER = re.compile(
    r"Data Parallel GPUs = (?P<dp>\d+) \| Total batch size"
    r"|==\(\(====\)\)==  Unsloth - 2x faster free finetuning \| Num GPUs = (?P<old>\d+)\s*$"
)


def _banner(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if ctx.num_gpus is None:  # --num-gpus wins
        ctx.num_gpus = int(match["dp"] or match["old"])
    return None


FORMATS = (
    Format(
        "unsloth",
        "Unsloth",
        "GPUs = ",
        _BANNER,
        _banner,
        (
            Declaration(
                trainer="Unsloth",
                versions="Unsloth 2025.3-2025.9 (training banner)",
                example=r"\        /    Data Parallel GPUs = 2 | Total batch size (1 x 1 x 2) = 2",
                key="Data Parallel GPUs",
                figure="context",
                scope="none",
                timing="none",
                sends="nothing: the GPU count per-device figures of the HF dicts are multiplied by, where --num-gpus "
                "is not given",
            ),
            Declaration(
                trainer="Unsloth",
                versions="Unsloth 2024.2-2025.3 (training banner)",
                example="==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 8",
                key="Num GPUs",
                figure="context",
                scope="none",
                timing="none",
                sends="nothing: the GPU count (args.world_size), where --num-gpus is not given; the load banner's "
                "Num GPUs (visible devices) is not read",
            ),
        ),
    ),
)
