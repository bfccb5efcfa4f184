"""DeepSpeed's throughput timer (``deepspeed/utils/timer.py``, ``ThroughputTimer.stop``), every ``steps_per_print``::

    [2024-03-07 15:27:02,646] [INFO] [timer.py:260:stop] epoch=0/micro_step=199/global_step=199,
     RunningAvgSamplesPerSec=58.730622229657506, CurrSamplesPerSec=61.35304005128382, MemAllocated=6.01GB, ...

The timer's batch size is ``train_batch_size()`` (micro batch x gradient accumulation x data-parallel ranks; before
0.8 the micro batch times ``num_workers=dp_world_size``): samples/s is the whole job's. ``CurrSamplesPerSec`` (the
last step) is used, else the running average; tokens/s is samples/s x the sequence length.
"""

from __future__ import annotations

import re

from exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number

_TIMER = re.compile(
    r"global_step=(?P<step>\d+), (?:RunningAvgSamplesPerSec=(?P<avg>" + NUMBER + r"), )?"
    r"(?:CurrSamplesPerSec|SamplesPerSec)=(?P<curr>" + NUMBER + ")"
)


def _timer(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    samples = to_number(match["curr"])
    if samples <= 0 and match["avg"]:
        samples = to_number(match["avg"])
    return ctx.samples("deepspeed", samples, step=int(match["step"]))


FORMATS = (Format("deepspeed", "DeepSpeed throughput timer", "SamplesPerSec=", _TIMER, _timer),)
