"""torchtune (pytorch/torchtune): the metric logger's ``Step N | key:value ...`` line, ``tokens_per_second_per_gpu``.

The recipes (``recipes/full_finetune_distributed.py``, ``full_finetune_single_device.py``, ``lora_finetune_*.py``,
``train``) log ``{"loss": ..., "lr": ..., "tokens_per_second_per_gpu": ...}`` through ``log_dict``, which writes
``Step {step} | `` and ``f"{name}:{data} "`` per pair (``torchtune/training/metric_logging.py``; ``torchtune/utils/``
before v0.3): on stdout with ``StdoutLogger``, into ``<output_dir>/logs/log_<time>.txt`` with the default
``DiskLogger`` (stdout then only says ``Writing logs to ...``; the file can be fed to ``--explain``). At main @
8bb3a6f0d (2024-08-16, v0.2-v0.3; https://github.com/pytorch/torchtune/pull/1358)::

    Step 2 | loss:1.8718312978744507 lr:2e-05 tokens_per_second_per_gpu:405.044978758513

and from v0.4.0, with ``log_peak_memory_stats`` (format string, trailing space as printed)::

    Step 10 | loss:1.2345 lr:2e-05 tokens_per_second_per_gpu:1234.5678 peak_memory_active:12.3 ...

The figure is **per device** in every version and **current**: the tokens of the last optimizer step over its time
(``t0`` and the token count reset every step, even with ``log_every_n_steps > 1``). Up to v0.3 it is rank 0's own
tokens (``tokens.numel()``, padding counted) over the step; from v0.4.0 (2fa6a54a2) the tokens of all ranks
(``labels != ignore_index``, all-reduced) over ``time x world_size``, i.e. the mean per GPU. Either way the job's
tokens/s is the figure x GPUs (``--num-gpus``, 1 for the ``*_single_device`` recipes); only rank 0 logs. (In v0.6.0
and v0.6.1 with tensor or context parallelism the all-reduce also sums the duplicate TP/CP ranks, so the figure is
that degree too high; fixed after v0.6.1 by 8fd697188.) The first step includes CUDA warm-up (57.8 against ~410
tokens/s after it, in the fixture) and is skipped. The PPO recipe's ``tokens_per_second_per_gpu_trajectory`` and
``..._ppo`` are two phases' rates and are not read; neither is tqdm's bar (``1|52|Loss: ...| 1.83it/s``), whose
iterations are micro-batches (before 6cf1a7d1e) or optimizer steps of padded, variable-length batches.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_format

_STEP = re.compile(r"\bStep (?P<step>\d+) \| .*?\btokens_per_second_per_gpu:(?P<rate>" + NUMBER + r")(?=\s|$)")

FORMATS = (
    declared_format(
        "torchtune",
        "tokens_per_second_per_gpu:",
        _STEP,
        Declaration(
            trainer="torchtune",
            versions="main @ 6cf1a7d1e (2024-04) - v0.6.1 (recipes/*.py train, metric_logging.py log_dict)",
            example="Step 2 | loss:1.8718312978744507 lr:2e-05 tokens_per_second_per_gpu:405.044978758513",
            key="tokens_per_second_per_gpu",
            figure="tokens/s",
            scope="device",
            timing="current",
            sends="the last optimizer step's tokens/s per GPU x GPUs; the first step (warm-up) is skipped",
        ),
        skip_first=True,
    ),
)
