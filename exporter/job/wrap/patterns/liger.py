"""Liger-Kernel's ``EfficiencyCallback``: read by ``hf.py`` (no formats of its own).

The callback (example code users copy from ``examples/huggingface/callback.py``) adds ``step_tokens_per_second`` and
``avg_tokens_per_second`` to the HF Trainer's log dict, printed by the HF ``ProgressCallback``; ``hf.py`` comes before
this module in ``BUILTIN_FORMATS`` and reads those dicts, keys included (sources in
``tests/exporter/job/fixtures/logs/liger.yml``).
"""

from __future__ import annotations

from mfumon.exporter.job.wrap.patterns._core import Format

FORMATS: tuple[Format, ...] = ()
