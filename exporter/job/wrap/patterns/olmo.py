"""OLMo (allenai/OLMo, ``olmo/train.py``): one record per logging step, a header then indented ``key=value`` lines.

``Trainer.log_metrics_to_console`` (``log.info`` at ``olmo/train.py:729`` in v0.2.5, ``:816`` on main @ c9ceb5c2,
April 2024, ``:908`` between v0.4.0 and v0.5.0) prints ``f"{prefix}\\n" + "\\n".join(f"    {name}={format_float(value)}"
...)``, e.g. (v0.2.5, Rich handler on a TTY)::

    [2024-04-18 14:24:46] INFO     [olmo.train:729, rank=0] [step=2/739328]
        train/CrossEntropyLoss=10.88
        throughput/total_tokens=8,388,608
        throughput/device/tokens_per_second=7,456
        throughput/device/batches_per_second=0.0284

and, from main @ b45002e8 (July 2024, first tagged in v0.5.0), with the epoch in the header and the tab-separated
non-TTY prefix::

    2024-08-06 10:00:05.520 intern-studio-160750:0  olmo.train:908  INFO    [step=2/739328,epoch=0]

``throughput/device/tokens_per_second`` is **per device**: rank 0's own tokens (``device_train_batch_size x
max_sequence_length`` per optimizer step) over the time of the last ≤ 100 batches (``SpeedMonitor``'s window,
``speed_monitor.window_size``, reset after checkpoints and evaluations): a current, smoothed rate, not an average
since the start. The trainer asserts equal per-rank batches, so the job's tokens/s is the figure x GPUs
(``--num-gpus``); the world size is not printed in the record. Only rank 0 prints the record (other ranks print a bare
header at most, which carries no figure). ``throughput/total_tokens`` and ``throughput/total_training_Gflops`` are
running whole-job counts, not rates, and are not read. The first batch after a start is not timed, so step 1 has no
rate and nothing needs skipping.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_block_format

_HEADER = re.compile(r"\bolmo\.train:\d+\b.*?\[step=(?P<step>\d+)/\d+(?:,epoch=\d+)?\]\s*$")
_RECORD = re.compile(
    r"\[step=(?P<step>\d+)/.*?^\s+throughput/device/tokens_per_second=(?P<rate>" + NUMBER + r")\s*$",
    re.S | re.M,
)

FORMATS = (
    declared_block_format(
        "olmo",
        "olmo.train:",
        _HEADER,
        _RECORD,
        Declaration(
            trainer="OLMo",
            versions="v0.2.5 - v0.6.0 (olmo/train.py log_metrics_to_console)",
            example="[2024-04-18 14:24:46] INFO     [olmo.train:729, rank=0] [step=2/739328]\n"
            "    throughput/device/tokens_per_second=7,456",
            key="throughput/device/tokens_per_second",
            figure="tokens/s",
            scope="device",
            timing="current",
            sends="rank 0's tokens/s over the last 100 batches x GPUs",
        ),
    ),
)
