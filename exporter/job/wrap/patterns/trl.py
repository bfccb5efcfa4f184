"""TRL: read by ``hf.py`` (no formats of its own).

TRL's trainers subclass the HF ``Trainer`` and print its dicts (rank 0, ``ProgressCallback``), which come before this
module in ``BUILTIN_FORMATS`` and win the line. TRL has no tokens/s key: from 0.16 it adds ``num_tokens`` (the whole
job's non-padding tokens since ``train()`` started), read in ``hf.py`` as a running count where HF's
``num_input_tokens_seen`` is off (sources in ``tests/exporter/job/fixtures/logs/trl.yml``).
"""

from __future__ import annotations

from mfumon.exporter.job.wrap.patterns._core import Format

FORMATS: tuple[Format, ...] = ()
