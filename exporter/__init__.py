"""mfu-monitor's client side, in sub-packages that say where each part runs:

- :mod:`exporter.node`: the node agent (``mfumon exporter``), one per GPU node;
- :mod:`exporter.job`: the job side, inside a training or inference job (``JobReporter``, callbacks, ``mfumon wrap``);
- :mod:`exporter.scheduler`: the scheduler adapters (``mfumon scheduler``), one per cluster;
- :mod:`exporter.ops`: tools for the people who run the cluster (``mfumon report``), on any machine that reaches
  the aggregator's API;
- :mod:`exporter.demo`: the simulated cluster (``mfumon demo``).

:mod:`exporter.samples` (the node-sample wire contract), :mod:`exporter.workloads` (which job a Kubernetes pod
belongs to) and :mod:`exporter.errors` are shared. Imports run one way:
``demo`` -> ``node``/``job`` -> shared modules. Nothing in this package imports FastAPI, SQLAlchemy or ``api``: GPU
nodes and training jobs install it without the server's dependencies. Optional heavy imports (pynvml, torch) happen
inside the functions that need them. Stable public paths: ``exporter`` (``JobReporter``), ``exporter.reporter``,
``exporter.models`` and ``exporter.integrations``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exporter.job.reporter import JobReporter

__all__ = ["JobReporter"]


def __getattr__(name: str) -> Any:
    """``from exporter import JobReporter`` without importing the reporter for every ``mfumon`` command."""
    if name == "JobReporter":
        from exporter.job.reporter import JobReporter

        return JobReporter
    raise AttributeError(f"module 'exporter' has no attribute {name!r}")
