"""prime-rl (PrimeIntellect-ai/prime-rl; ``src/zeroband`` until the rename of 2025-07-11): the trainer's step line.

The ``zeroband`` trainer (``src/zeroband/train.py``, from 2025-06 ``src/zeroband/training/train.py``) logs
``f"step: {step}, loss: {loss:.4f}"`` then ``f", tokens_per_second: {tps:.2f}, mfu: {mfu:.2f}"`` (e.g. at 48a5be9a8,
2025-03-01, https://github.com/PrimeIntellect-ai/prime-rl/pull/20)::

    03:22:14 [INFO] [TRAIN] [Rank 0] step: 289, loss: 0.4310, tokens_per_second: 76477.73, mfu: 337.59

and from 803555e3d (2025-04-04) also ``tokens_per_second_per_gpu: {tps / world_size:.2f}`` before ``mfu``. The
``prime_rl`` trainers (``src/prime_rl/trainer/train.py``, from 2025-09 ``trainer/sft/train.py`` and ``rl/train.py``)
log with loguru's ``logger.success`` (at 2536f7594, https://github.com/PrimeIntellect-ai/prime-rl/pull/999)::

    02:40:53 SUCCESS Step 1 | Time: 0.60s | Loss: 12.3125 | Grad. Norm: 28.4812 | LR: 1.00e-06 | Throughput: 3324
     tokens/s | MFU: 1.0% | Peak Mem.: 5.2/23.7 GiB (22.1%) | Max Vio: 0.9891

and from f6563ff0e (2026-06-01) without the colons (``| Throughput 12345 tokens/s | MFU 12.3% |``), coloured, behind
torchrun's ``[default0]:`` where ``--local-ranks-filter``/``--tee`` are passed.

Both figures are the **whole job's** and **current**: the tokens of the global batch (``seq_length x batch_size``
in zeroband and the SFT trainer, ``world_size`` (later ``dp_size``) x the rank's tokens in the RL trainer; all
positions) over the last ≤ 9 step intervals (``PerfCounter(window_size=10)``); the RL trainer from b1e9c7bdd
(2026-04-29) divides the step's tokens by its forward/backward/optimizer time only, not the time spent waiting for
rollouts. Every rank (zeroband: each node's local rank 0) prints the same job figure: the lines are averaged, never
summed, and never multiplied by GPUs. zeroband's ``tokens_per_second_per_gpu`` is the same rate divided by the world
size, printed a second time: it is not read (the zeroband pattern reads ``tokens_per_second:`` only, and torchtune's
``tokens_per_second_per_gpu:`` pattern needs torchtune's ``Step N |`` line). ``Throughput 0`` at step 0 (the window
is not yet full) is not read. ``mfu`` (over one GPU's peak, i.e. W times too high, before bff2fa5a2) is not read.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_format

_ZEROBAND = re.compile(
    r"\bstep: (?P<step>\d+), loss: \S+, tokens_per_second: (?P<rate>" + NUMBER + r"),"
    r"(?: tokens_per_second_per_gpu: " + NUMBER + r",)? mfu: "
)
_STEP = re.compile(r"\bStep (?P<step>\d+) \| .*?\| Throughput:? (?!0 )(?P<rate>" + NUMBER + r") tokens/s \| MFU:? ")

_SENDS = "the job's tokens/s over the last steps (a window of 10) as printed; never x GPUs"

FORMATS = (
    declared_format(
        "prime_rl",
        " tokens/s | MFU",
        _STEP,
        Declaration(
            trainer="prime-rl",
            versions="9e4744978 (2025-07-11) - 559b44772 (2026-08; trainer/sft/train.py, trainer/rl/train.py)",
            example="02:40:53 SUCCESS Step 1 | Time: 0.60s | Loss: 12.3125 | Grad. Norm: 28.4812 | LR: 1.00e-06 | "
            "Throughput: 3324 tokens/s | MFU: 1.0% | Peak Mem.: 5.2/23.7 GiB (22.1%) | Max Vio: 0.9891",
            key="Throughput",
            figure="tokens/s",
            scope="job",
            timing="current",
            sends=_SENDS + "; Throughput 0 (step 0) is not read",
        ),
    ),
    declared_format(
        "prime_rl_zeroband",
        ", tokens_per_second: ",
        _ZEROBAND,
        Declaration(
            trainer="prime-rl",
            versions="zeroband 2025-02 - 35ef455bc (2025-06-27; src/zeroband/train.py, training/train.py)",
            example="03:22:14 [INFO] [TRAIN] [Rank 0] step: 289, loss: 0.4310, tokens_per_second: 76477.73, "
            "mfu: 337.59",
            key="tokens_per_second",
            figure="tokens/s",
            scope="job",
            timing="current",
            sends=_SENDS + "; tokens_per_second_per_gpu, the same rate / GPUs, is not read",
        ),
    ),
)
