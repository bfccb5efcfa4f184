"""OLMo-core (allenai/OLMo-core): a metrics record, a ``[step=N/M,epoch=E]`` header then indented ``key=value`` lines.

``ConsoleLoggerCallback.log_metrics`` (``src/olmo_core/train/callbacks/console_logger.py``, line 68) prints
``f"{prefix}\\n" + "\\n".join(f"    {name}={format_float(value)}" ...)`` with the names sorted; the values come from
``SpeedMonitorCallback.post_step`` (``callbacks/speed_monitor.py``). At code @ dc84ab401 (2025-12-22, first tagged in
v2.5.0; the block pasted in https://github.com/allenai/OLMo-core/pull/511 without its header)::

    throughput/device/BPS=3.939
    throughput/device/BPS (actual avg)=2.990
    throughput/device/MFU=44.57
    throughput/device/TPS=258,163
    throughput/device/TPS (actual avg)=195,922
    throughput/device/flopsPS=441.0T
    throughput/total flops=89.56P
    throughput/total tokens=52,428,800

and between v2.1.0 and v2.2.0 (https://github.com/allenai/OLMo-core/pull/297, behind a log collector's timestamps)::

    2025-07-03T19:33:13.452067346Z     throughput/device/TPS=18,168
    2025-07-03T19:33:13.452068408Z     throughput/device/TPS (actual avg)=18,122

The header (``_get_progress_marker``) is ``[step=200/2000,epoch=0]``, ``[step=200/???,epoch=0]`` without a known
``max_steps``, and from v1.9.0 ``[step=200/2000,epoch=0,eta=4h58m12s]`` when an ETA is known, after the Rich prefix
``[date] INFO     [olmo_core.train.callbacks.console_logger:68, host, rank=0]`` or a tab-separated one.

``throughput/device/TPS`` is **per device** and **current**: this rank's tokens of the last step (``input_ids.numel()``,
divided by the tensor/context/pipeline-parallel degree since v1.8.0) over the wall time between the last two steps.
Only rank 0 prints it (``LOG_FILTER_TYPE`` ``rank0_only``), not reduced over ranks, so the job's tokens/s is the figure
x GPUs (``--num-gpus``; the record does not print the world size). The same rate is printed a second time as
``throughput/device/TPS (actual avg)``, the average since the first timed step: it is never read (the patterns require
``TPS=``), nor are ``BPS`` (steps/s), ``flopsPS`` (FLOP/s, ``T``-suffixed) or the running counts ``throughput/total
tokens`` and ``throughput/total flops``/``petaflops``. The first step after a start is not timed (no TPS printed), so
nothing needs skipping.

A record with its header is read as a block (the step is the header's); a ``TPS=`` line outside a block (a record whose
header was cut, or lines behind a collector's prefix, which end the indented block) is read on its own, so that each
record's figure is read exactly once.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_block_format, declared_format

_HEADER = re.compile(r"\[step=(?P<step>\d+)/(?:\d+|\?\?\?),epoch=\d+(?:,eta=[^\]]*)?\]\s*$")
_TPS = r"^\s+throughput/device/TPS=(?P<rate>" + NUMBER + r")\s*$"
_RECORD = re.compile(r"\[step=(?P<step>\d+)/.*?" + _TPS, re.S | re.M)
_LINE = re.compile(r"(?:^|\s)throughput/device/TPS=(?P<rate>" + NUMBER + r")\s*$")

_VERSIONS = "v1.0.0 - v2.5.0 (train/callbacks/speed_monitor.py, console_logger.py)"
_SENDS = "rank 0's tokens/s of the last step x GPUs; the (actual avg) average since the start is not read"

FORMATS = (
    declared_block_format(
        "olmo_core",
        "[step=",
        _HEADER,
        _RECORD,
        Declaration(
            trainer="OLMo-core",
            versions=_VERSIONS,
            example="[step=200/2000,epoch=0,eta=4h58m12s]\n    throughput/device/TPS=258,163",
            key="throughput/device/TPS",
            figure="tokens/s",
            scope="device",
            timing="current",
            sends=_SENDS,
        ),
    ),
    declared_format(
        "olmo_core_line",
        "throughput/device/TPS=",
        _LINE,
        Declaration(
            trainer="OLMo-core",
            versions=_VERSIONS,
            example="2025-07-03T19:33:13.452067346Z     throughput/device/TPS=18,168",
            key="throughput/device/TPS",
            figure="tokens/s",
            scope="device",
            timing="current",
            sends=_SENDS + " (a TPS line outside a [step=] record, e.g. behind a log collector's prefix)",
        ),
    ),
)
