"""Lightning's ``ThroughputMonitor``: its metrics dict, where the user's code prints it.

The callback (``lightning.pytorch.callbacks.ThroughputMonitor``, Lightning 2.2-2.6) hands its figures to the loggers,
not to stdout; they reach the output only when a custom logger or ``fabric.print`` prints the dict. Captured on
Lightning 2.6.6, 2 DDP ranks (sources in ``tests/exporter/job/fixtures/logs/lightning.yml``)::

    [rank0] step=29 {'train/time': 2.4365, 'train/batches': 30, ..., 'train/device/items_per_sec': 7673.439056228737,
        'train/items_per_sec': 15346.878112457474, 'train/flops_per_sec': 72580665919.88208, ...}

Only rank 0 measures. ``device/items_per_sec`` is rank 0's items over the last ``window_size`` batches (a rolling
window: current); ``items_per_sec`` (only when the world size is above 1) is that x the world size: the whole job's.
The job's figure is ``items_per_sec`` where printed (never also the device one), else ``device/items_per_sec`` x
GPUs. The stage prefix is ``train/`` (``train|`` with ``separator="|"``; none from Fabric); ``validate/`` rates are
evaluation's and not read.

"Items" are whatever the user's ``length_fn(batch)`` returns: tokens only if it counts tokens (padding included if
it counts ``numel``). wrap sends them as tokens/s and says so once.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_STAGE = r"'(?:train(?P<sep>[/|]))?"
_GLOBAL = re.compile(_STAGE + r"items_per_sec':\s*(?P<rate>" + NUMBER + ")")
_DEVICE = re.compile(_STAGE + r"device[/|]items_per_sec':\s*(?P<rate>" + NUMBER + ")")
_ANY = re.compile(r"'(?:train[/|])?(?:device[/|])?items_per_sec':")
_NOTE = (
    "Lightning's ThroughputMonitor counts items as its length_fn returns them: they are sent as tokens/s, which holds "
    "only if length_fn counts tokens (describe another figure with --pattern)"
)


def _items(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    found = _GLOBAL.search(line)
    if found is not None:
        return ctx.whole_job("lightning", to_number(found["rate"]), note=_NOTE)
    found = _DEVICE.search(line)
    if found is None:
        return None
    return ctx.per_gpu("lightning", to_number(found["rate"]), note=_NOTE)


_EXAMPLE = (
    "[rank0] step=29 {'train/time': 2.4365277830002015, 'train/batches': 30, 'train/samples': 120, "
    "'train/lengths': 15360, 'train/device/items_per_sec': 7673.439056228737, 'train/items_per_sec': "
    "15346.878112457474, 'epoch': 0}"
)
FORMATS = (
    Format(
        "lightning",
        "Lightning ThroughputMonitor",
        "items_per_sec'",
        _ANY,
        _items,
        (
            Declaration(
                trainer="Lightning ThroughputMonitor",
                versions="Lightning 2.2-2.6 (world size > 1)",
                example=_EXAMPLE,
                key="train/items_per_sec",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends="as it is (rank 0's window rate x the world size), if length_fn counts tokens",
                needs=("length_fn counting tokens",),
            ),
            Declaration(
                trainer="Lightning ThroughputMonitor",
                versions="Lightning 2.2-2.6 (one device: no global key)",
                example="[rank0] step=4 {'train/time': 0.42689318799966713, 'train/batches': 5, 'train/samples': 20, "
                "'train/lengths': 2560, 'train/device/batches_per_sec': 14.118607904783664, "
                "'train/device/samples_per_sec': 56.474431619134656, 'train/device/items_per_sec': 7228.727247249236, "
                "'train/device/flops_per_sec': 34187137834.414692, 'epoch': 0}",
                key="train/device/items_per_sec",
                figure="tokens/s",
                scope="device",
                timing="current",
                sends="x GPUs, only where the line has no global items_per_sec, if length_fn counts tokens",
                needs=("length_fn counting tokens",),
            ),
        ),
    ),
)
