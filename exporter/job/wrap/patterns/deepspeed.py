"""DeepSpeed's throughput timer (``deepspeed/utils/timer.py``, ``ThroughputTimer.stop``), every ``steps_per_print``.

Three shapes, by version (``git log -S SamplesPerSec`` on DeepSpeed's timer)::

    [INFO 2020-06-08 05:26:19] 0/2650, SamplesPerSec=13.19749106827976                                  (0.1-0.5)
    [timer.py:189:stop] 0/40, SamplesPerSec=83.48609168106144, MemAllocated=0.26GB, MaxMemAllocated=9.02GB   (0.6)
    [timer.py:198:stop] 0/20, RunningAvgSamplesPerSec=232.73, CurrSamplesPerSec=227.48, MemAllocated=0.36GB, ...
                                                                                                            (0.7)
    [timer.py:260:stop] epoch=0/micro_step=199/global_step=199,
     RunningAvgSamplesPerSec=58.730622229657506, CurrSamplesPerSec=61.35304005128382, MemAllocated=6.01GB, ...
                                                                                                     (0.8 and later)

Before 0.8 the line starts ``epoch/step`` (the timer's ``local_step_count``, the steps of this epoch), which is taken
as the step; from 0.8, ``global_step``.

The timer's batch size is the whole job's: ``train_batch_size()`` from 0.8 (micro batch x gradient accumulation x
data-parallel ranks), before that the micro batch times ``num_workers=dp_world_size`` (one micro step of all ranks),
so samples/s is the job's in every version and is never multiplied by the GPUs. ``CurrSamplesPerSec`` (the last step)
is used where printed, else the running average (``RunningAvgSamplesPerSec``, or the only figure before 0.7,
``SamplesPerSec``, which is the average since the timer's ``start_step``); tokens/s is samples/s x the sequence length.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_TIMER = re.compile(
    r"(?:global_step=(?P<step>\d+)|(?<![\w./])\d+/(?P<local>\d+)), "
    r"(?:RunningAvgSamplesPerSec=(?P<avg>" + NUMBER + r"), )?"
    r"(?:CurrSamplesPerSec|SamplesPerSec)=(?P<curr>" + NUMBER + ")"
)


def _timer(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    samples = to_number(match["curr"])
    if samples <= 0 and match["avg"]:
        samples = to_number(match["avg"])
    return ctx.samples("deepspeed", samples, step=int(match["step"] or match["local"]))


FORMATS = (
    Format(
        "deepspeed",
        "DeepSpeed throughput timer",
        "SamplesPerSec=",
        _TIMER,
        _timer,
        (
            Declaration(
                trainer="DeepSpeed throughput timer",
                versions="before 0.6, 0.6, 0.7, 0.8+ (main @ 038beb6)",
                example=(
                    "epoch=0/micro_step=199/global_step=199, RunningAvgSamplesPerSec=58.73, CurrSamplesPerSec=61.35, "
                    "MemAllocated=6.01GB, ..."
                ),
                key="CurrSamplesPerSec",
                figure="samples/s",
                scope="job",
                timing="current",
                sends=(
                    "`CurrSamplesPerSec` (the global batch), else `SamplesPerSec` (before 0.7: the running average) x "
                    "seq length; only while no other format gives a rate (it also prints under Megatron-DeepSpeed and "
                    "the HF Trainer)"
                ),
            ),
        ),
    ),
)
