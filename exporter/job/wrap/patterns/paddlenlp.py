"""PaddleNLP Trainer (``paddlenlp/trainer/trainer.py``): one ``key: value, ...`` line per ``logging_steps``.

``Trainer._maybe_log_save_evaluate`` fills the line from ``speed_metrics("interval", ...)``
(``paddlenlp/trainer/trainer_utils.py``) and ``ProgressCallback.on_log`` prints it on each node's local rank 0.
Since PR #7853 (2024-02; here the pretraining tutorial's run of 2025-05-18, ``llm/docs/pretrain_tutorial.md``
@ 961b3d0d, one GPU)::

    [2025-05-18 10:13:15,607] [    INFO] - loss: 12.05887604, learning_rate: 3e-06, global_step: 2, ...,
     interval_runtime: 0.2556, interval_samples_per_second: 3.913, interval_tokens_per_second_per_device: 4006.9441,
     interval_hardware_tflops_per_device: 12.49, interval_steps_per_second: 3.913, progress_or_epoch: 0.0

``interval_tokens_per_second_per_device`` is ``samples_per_second x seq_length / paddle.distributed.get_world_size()``
over the logging interval: the **whole job's** current tokens/s divided by the world size (all ranks, tensor and
pipeline ones included), so the job's rate is the figure x ``--num-gpus`` (the job's total GPUs), taken from one line,
never summed over the nodes that print it. It is printed by pretraining trainers only (``is_pretraining``).

Lines without it (the 2022 and 2023 Trainer, and fine-tuning runs since), e.g. 2023-08
(https://github.com/PaddlePaddle/Paddle/pull/56363)::

    [    INFO] - loss: 1.94342518, learning_rate: 4.1e-06, global_step: 40, interval_runtime: 18.792,
     interval_samples_per_second: 8.514269788523704, interval_steps_per_second: 1.064283723565463, epoch: 0.0028

are read by ``interval_steps_per_second`` (the interval's optimizer steps over its wall time, in every version) x
``--tokens-per-step`` (the job's tokens of one optimizer step). ``interval_samples_per_second`` is **not** used: in
the 2022 Trainer it was one device's batch of *one* step over the whole interval's time (``num_samples=
train_batch_size x gradient_accumulation_steps``; 8 / 0.8829 = 9.061 beside 10 steps / 0.8829 = 11.327 steps/s in the
2022-08 fixture), low by ``logging_steps`` x the data-parallel size, and the line does not say which Trainer printed it.

At the end of ``llm/run_pretrain.py`` (plain ``print`` on every rank)::

    Effective Tokens per second: 4741.68
    ips: 4741.68 tokens/s

the same figure twice: ``max_steps x global batch x max_seq_length / train_runtime``, the whole job's average over
the run. It is read once (the first ``Effective Tokens per second`` line) and sent as what it is, a run average
(declared ``timing="run"``); ``ips`` is not read. The ``***** train metrics *****`` block before it
(``train_samples_per_second``, the same average per sample) is not read either: it would count that figure twice,
and in fine-tuning runs samples are not ``max_seq_length`` long. ``eval_*``/``test_*`` figures are never read.
"""

from __future__ import annotations

import dataclasses
import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_format

_TITLE = "PaddleNLP"

_TOKENS = re.compile(
    r"\bglobal_step: (?P<step>\d+),.*?\binterval_tokens_per_second_per_device: (?P<rate>" + NUMBER + ")"
)
_STEPS = re.compile(r"\bglobal_step: (?P<step>\d+),.*?\binterval_steps_per_second: (?P<rate>" + NUMBER + ")")
_EFFECTIVE = re.compile(r"^Effective Tokens per second: (?P<rate>" + NUMBER + r")\s*$")

_TOKENS_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="PaddleNLP 2024-02 (PR #7853) to 2025 (pretraining trainers)",
    example="[2025-05-18 10:13:15,607] [    INFO] - loss: 12.05887604, learning_rate: 3e-06, global_step: 2, "
    "current_memory_allocated: 7.549170255661011, current_memory_reserved: 12.4834623336792, "
    "max_memory_allocated: 12.307440280914307, max_memory_reserved: 12.4834623336792, interval_runtime: 0.2556, "
    "interval_samples_per_second: 3.913, interval_tokens_per_second_per_device: 4006.9441, "
    "interval_hardware_tflops_per_device: 12.49, interval_steps_per_second: 3.913, progress_or_epoch: 0.0",
    key="interval_tokens_per_second_per_device",
    figure="tokens/s",
    scope="device",
    timing="current",
    sends="the interval's figure x --num-gpus: PaddleNLP divides the job's tokens/s by the world size.",
)
_STEPS_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="PaddleNLP 2022 to 2025 (lines without interval_tokens_per_second_per_device)",
    example="[    INFO] - loss: 1.94342518, learning_rate: 4.1e-06, global_step: 40, interval_runtime: 18.792, "
    "interval_samples_per_second: 8.514269788523704, interval_steps_per_second: 1.064283723565463, epoch: 0.0028",
    key="interval_steps_per_second",
    figure="it/s",
    scope="job",
    timing="current",
    sends="the interval's optimizer steps/s x --tokens-per-step; interval_samples_per_second is not used (a 2022 "
    "Trainer printed one device's single step over the interval).",
)
_EFFECTIVE_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="PaddleNLP llm/run_pretrain.py 2024 to 2025",
    example="Effective Tokens per second: 4741.68",
    key="Effective Tokens per second",
    figure="tokens/s",
    scope="job",
    timing="run",
    sends="once, at the end: the whole job's average over the run; the ips line repeating it is not read.",
)


def _once(fmt: Format) -> Format:
    """The format reading only the first line it matches (a figure every rank prints once)."""
    seen = f"{fmt.name}:seen"

    def handler(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
        if ctx.memory.get(seen):
            return None
        ctx.memory[seen] = True
        return fmt.handler(match, line, ctx)

    return dataclasses.replace(fmt, handler=handler)


FORMATS = (
    declared_format("paddlenlp", "interval_tokens_per_second_per_device", _TOKENS, _TOKENS_DECLARATION),
    declared_format("paddlenlp_steps", "interval_steps_per_second", _STEPS, _STEPS_DECLARATION),
    _once(declared_format("paddlenlp_run", "Effective Tokens per second", _EFFECTIVE, _EFFECTIVE_DECLARATION)),
)
