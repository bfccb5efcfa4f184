"""Stable import path of the model descriptors; the code lives in :mod:`exporter.job.models`."""

from __future__ import annotations

from exporter.job.models import (
    ModelSpec,
    count_parameters,
    describe_model,
    from_hf_config,
    from_module,
    load_hf_config,
)

__all__ = ["ModelSpec", "count_parameters", "describe_model", "from_hf_config", "from_module", "load_hf_config"]
