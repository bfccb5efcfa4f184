"""LLaMA-Factory: its start-up line with the world size, and the web-UI echo of its ``throughput``.

LLaMA-Factory trains through (subclasses of) the HF ``Trainer``, so its per-step dicts, end-of-run dict and
``***** train metrics *****`` block are read in ``hf.py`` (including its ``effective_tokens_per_sec``, per device).
What is read here (LLaMA-Factory 0.9.4, captured; sources in ``tests/exporter/job/fixtures/logs/llama_factory.yml``)::

    [INFO|2026-12-06 18:44:22] llamafactory.hparams.parser:465 >> Process rank: 0, world size: 2, device: cpu:0, ...
    [INFO|2026-12-06 18:44:25] llamafactory.train.callbacks:143 >> {'loss': 6.0118, 'learning_rate': 5.0000e-06,
        'epoch': 1.00, 'throughput': 14481.24}

``world size: W`` (every process prints it, from 0.9.2) is the GPU count that ``effective_tokens_per_sec`` is divided
by: it sets the job's GPUs where ``--num-gpus`` did not. Before 0.9.2 the line reads ``Process rank: R, device: ...,
n_gpu: 1`` (the local rank and GPUs per process): not a world size, not read.

``throughput`` (echoed only in LLaMA Board mode) is ``num_input_tokens_seen`` / the time since training started: the
same figure as HF's per-step ``train_tokens_per_second`` in the dict printed next, an average since the start. The
line is recognised so that nothing else reads it, and sends nothing: the HF dict's counter gives the interval's rate.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_WORLD = re.compile(r"llamafactory\.hparams\.parser:\d+ >> Process rank: \d+, world size: (?P<world>\d+),")
_ECHO = re.compile(r"llamafactory\.train\.callbacks:\d+ >> \{'loss': .*'throughput': (?P<rate>" + NUMBER + r")\}")


def _world(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if ctx.num_gpus is None:  # --num-gpus wins
        ctx.num_gpus = int(match["world"])
    return None


def _echo(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    return None  # the HF dict that follows carries the same counter: read there, once


FORMATS = (
    Format(
        "llama_factory_world",
        "LLaMA-Factory",
        "world size: ",
        _WORLD,
        _world,
        (
            Declaration(
                trainer="LLaMA-Factory",
                versions="LLaMA-Factory 0.9.2-0.9.4",
                example="[INFO|2026-12-06 18:44:22] llamafactory.hparams.parser:465 >> Process rank: 0, world size: 2, "
                "device: cpu:0, distributed training: True, compute dtype: None",
                key="world size",
                figure="context",
                scope="none",
                timing="none",
                sends="nothing: the GPU count per-device figures are multiplied by, where --num-gpus is not given",
            ),
        ),
    ),
    Format(
        "llama_factory_throughput",
        "LLaMA-Factory",
        "'throughput': ",
        _ECHO,
        _echo,
        (
            Declaration(
                trainer="LLaMA-Factory",
                versions="LLaMA-Factory 0.8-0.9.4 (LLaMA Board mode)",
                example="[INFO|2026-12-06 18:44:25] llamafactory.train.callbacks:143 >> {'loss': 6.0118, "
                "'learning_rate': 5.0000e-06, 'epoch': 1.00, 'throughput': 14481.24}",
                key="throughput",
                figure="tokens/s",
                scope="job",
                timing="cumulative",
                sends="nothing: HF's train_tokens_per_second under another name; the HF dict next to it sends the "
                "interval's rate from num_input_tokens_seen",
            ),
        ),
    ),
)
