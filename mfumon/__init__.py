"""mfu-monitor: Model FLOPs Utilization for GPU clusters.

What a training or inference job uses is here, one short path for each::

    from mfumon import JobReporter, describe_model, MfumonTrainerCallback

The rest of the package is arranged by where it runs (each is a folder at the repository's top level):

- :mod:`mfumon.exporter`: everything outside the aggregator, with no server dependency: the job side
  (``mfumon.exporter.job``: reporter, framework callbacks, ``mfumon wrap``), the node agent
  (``mfumon.exporter.node``), the scheduler adapters, ``mfumon report`` and the demo;
- :mod:`mfumon.api`: the aggregator (``mfumon serve``), installed with ``pip install 'mfu-monitor[server]'``;
- :mod:`mfumon.migrations`: its database schema (Alembic), run only through ``mfumon.api.db.migrate``.

Names are resolved on first use, so ``import mfumon`` imports neither the reporter nor any framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mfumon.exporter.job.integrations.hf import MfumonTrainerCallback
    from mfumon.exporter.job.integrations.lightning import MfumonLightningCallback
    from mfumon.exporter.job.models import (
        ModelSpec,
        count_parameters,
        describe_model,
        from_hf_config,
        from_module,
        load_hf_config,
    )
    from mfumon.exporter.job.reporter import (
        DeliveryStats,
        JobReporter,
        default_job_id,
        default_rank,
        default_world_size,
    )

#: public name -> the module that defines it
_HOMES = {
    "DeliveryStats": "mfumon.exporter.job.reporter",
    "JobReporter": "mfumon.exporter.job.reporter",
    "MfumonLightningCallback": "mfumon.exporter.job.integrations.lightning",
    "MfumonTrainerCallback": "mfumon.exporter.job.integrations.hf",
    "ModelSpec": "mfumon.exporter.job.models",
    "count_parameters": "mfumon.exporter.job.models",
    "default_job_id": "mfumon.exporter.job.reporter",
    "default_rank": "mfumon.exporter.job.reporter",
    "default_world_size": "mfumon.exporter.job.reporter",
    "describe_model": "mfumon.exporter.job.models",
    "from_hf_config": "mfumon.exporter.job.models",
    "from_module": "mfumon.exporter.job.models",
    "load_hf_config": "mfumon.exporter.job.models",
}

__all__ = [
    "DeliveryStats",
    "JobReporter",
    "MfumonLightningCallback",
    "MfumonTrainerCallback",
    "ModelSpec",
    "__version__",
    "count_parameters",
    "default_job_id",
    "default_rank",
    "default_world_size",
    "describe_model",
    "from_hf_config",
    "from_module",
    "load_hf_config",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("mfu-monitor")
        except PackageNotFoundError:  # a checkout on sys.path, not installed
            return "0+unknown"
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mfumon' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
