"""Levanter (stanford-crfm/levanter, marin-community/levanter, marin's ``lib/levanter``): the training progress bar.

Levanter's tokens/s (``throughput/tokens_per_second`` of ``log_performance_stats``) goes to the tracker (W&B,
TensorBoard), not to the console. The console has ``pbar_logger``'s tqdm bar (``src/levanter/callbacks.py``, from
2025-04 ``callbacks/_metrics.py``; ``desc="train"``, one iteration per optimizer step, ``loss=`` postfix). Up to
5fc4084c (2024-09-13) it is tqdm's own bar, redrawn with ``\\r`` (main @ fef00427, May 2024, from
https://github.com/marin-community/levanter/issues/584, with XLA's next line glued on)::

    train:   0%|          | 2/100000 [00:46<644:59:38, 23.22s/it, loss=11.2]I0515 20:03:26.569367 ...

and since then ``tqdm_loggable``, which off a terminal logs a line at most once a minute
(``"Progress on:%s %s/%s rate:%s remaining:%s elapsed:%s postfix:%s"``; marin's ``lib/levanter``, 2026-03)::

    Progress on:train 11.0it/18.0it rate:34.5s/it remaining:04:01 elapsed:17:46 postfix:loss=15.5

The rate is the **whole job's** optimizer steps per second (one iteration is the global batch; every host draws the
same bar, whose lines are averaged, never summed), shown inverted (``s/it``) below 1 it/s. It is tqdm's smoothed rate
(an exponential average with smoothing 0.3 over the updates), so the first step's compilation stays in it with
weight about ``0.3 x 0.7^(n-1)``: at step 11 of the line above it still holds ~4 of the 34.5 s (the first step took
484 s). Lines of the first 20 steps are therefore not read (by step 20 the share is below 0.04 % of the compile time).
The job's tokens/s is the rate x the tokens of one step (global ``train_batch_size`` x ``seq_len``), which no line
prints: ``--tokens-per-step`` is needed. ``tqdm_loggable`` prints the rate with one decimal (``1.9s/it`` is ±2.6 %).
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Handler, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_WARM_STEPS = 20  # tqdm's smoothed rate keeps 0.3 x 0.7^(n-1) of the first (compiling) step's time

_RATE = r"(?P<rate>" + NUMBER + r")(?P<unit>it/s|s/it)"
_LOGGABLE = re.compile(r"\bProgress on:train (?P<step>" + NUMBER + r")it/\S+ rate:" + _RATE)
_BAR = re.compile(r"\btrain:\s+\d+%\|[^|]*\|\s*(?P<step>\d+)/\d+ \[[^<\]]*<[^,\]]*,\s*" + _RATE)


def _reader(name: str) -> Handler:
    def handler(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
        step = int(to_number(match["step"]))
        if step < _WARM_STEPS:
            return None
        rate = to_number(match["rate"])
        if rate <= 0:
            return None
        steps_per_second = rate if match["unit"] == "it/s" else 1.0 / rate
        return ctx.iterations(name, steps_per_second, step=step)

    return handler


def _declaration(example: str, versions: str) -> Declaration:
    return Declaration(
        trainer="Levanter",
        versions=versions,
        example=example,
        key="rate (tqdm it/s or s/it)",
        figure="it/s",
        scope="job",
        timing="current",
        sends="tqdm's smoothed optimizer steps/s x --tokens-per-step; the first 20 steps (compilation) are skipped",
    )


FORMATS = (
    Format(
        "levanter",
        "Levanter",
        "Progress on:train ",
        _LOGGABLE,
        _reader("levanter"),
        (
            _declaration(
                "Progress on:train 11.0it/18.0it rate:34.5s/it remaining:04:01 elapsed:17:46 postfix:loss=15.5",
                "main @ 5fc4084c (2024-09) - 2026 (tqdm_loggable; callbacks/_metrics.py pbar_logger)",
            ),
        ),
    ),
    Format(
        "levanter_tqdm",
        "Levanter",
        "train:",
        _BAR,
        _reader("levanter_tqdm"),
        (
            _declaration(
                "train:   0%|          | 2/100000 [00:46<644:59:38, 23.22s/it, loss=11.2]",
                "v1.0 - main @ 5fc4084c (2023-06 - 2024-09; tqdm, callbacks.py pbar_logger), and later on a terminal",
            ),
        ),
    ),
)
