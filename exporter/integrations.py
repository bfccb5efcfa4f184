"""Stable import path of the framework callbacks; the code lives in :mod:`exporter.job.integrations`.

Like that package, importing this module imports no framework: each callback's framework is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exporter.job.integrations.hf import MfumonTrainerCallback
    from exporter.job.integrations.lightning import MfumonLightningCallback

__all__ = ["MfumonLightningCallback", "MfumonTrainerCallback"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from exporter.job import integrations

        return getattr(integrations, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
