"""Axolotl: read by ``hf.py`` (no formats of its own).

Axolotl's ``AxolotlTrainer.log`` adds its keys (``tokens_per_second_per_gpu`` in 0.13.0,
``tokens/train_per_sec_per_gpu`` from 0.13.1, whose meaning changed in 0.15 and 0.18) to the HF Trainer's dict, printed
by the HF ``ProgressCallback``;
``hf.py`` comes before this module in ``BUILTIN_FORMATS`` and reads those dicts, keys included (sources in
``tests/exporter/job/fixtures/logs/axolotl.yml``).
"""

from __future__ import annotations

from mfumon.exporter.job.wrap.patterns._core import Format

FORMATS: tuple[Format, ...] = ()
