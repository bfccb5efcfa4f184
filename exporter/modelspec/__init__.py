"""A model's size and shape as job reports carry it, and how to read them from a Hugging Face ``config.json``.

Shared by the job side (``mfumon wrap``, reporters) and the node agent (serving engines it scrapes): pure stdlib,
no torch. ``mfumon.exporter.job.models`` adds descriptions of live PyTorch modules on top.
"""

from __future__ import annotations

from mfumon.exporter.modelspec._hf import from_hf_config, load_hf_config, serving_dtype_from_hf_config
from mfumon.exporter.modelspec._spec import ModelSpec

__all__ = ["ModelSpec", "from_hf_config", "load_hf_config", "serving_dtype_from_hf_config"]
