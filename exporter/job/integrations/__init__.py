"""Callbacks for training frameworks; each framework is imported only when its callback is first used.

``from mfumon.exporter.job.integrations import MfumonTrainerCallback`` imports transformers at that moment;
``import mfumon.exporter.job.integrations`` alone imports neither transformers nor lightning.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MfumonLightningCallback", "MfumonTrainerCallback"]

_LAZY = {
    "MfumonTrainerCallback": "mfumon.exporter.job.integrations.hf",
    "MfumonLightningCallback": "mfumon.exporter.job.integrations.lightning",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
