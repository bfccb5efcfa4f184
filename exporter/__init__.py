"""mfu-monitor's node side: the node exporter (``mfumon exporter``), the simulated cluster (``mfumon demo``) and
the job-side reporter (``mfumon wrap``).

Nothing in this package imports FastAPI, SQLAlchemy or ``api``: GPU nodes and training jobs install it without the
server's dependencies. Optional heavy imports (pynvml, torch) happen inside the functions that need them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exporter.reporter import JobReporter

__all__ = ["JobReporter"]


def __getattr__(name: str) -> Any:
    """``from exporter import JobReporter`` without importing the reporter for every ``mfumon`` command."""
    if name == "JobReporter":
        from exporter.reporter import JobReporter

        return JobReporter
    raise AttributeError(f"module 'exporter' has no attribute {name!r}")
