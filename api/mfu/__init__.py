"""The MFU engine: FLOPs-per-token formulas, the dense peak table, device matching and the MFU arithmetic.

Pure Python (stdlib + PyYAML), so the aggregator, tests and tools share one definition:
- `_flops.py`: PaLM App. B FLOPs per token (training, inference) and the HFU recompute factor.
- `_peaks.py`: THE peak table (dense FLOP/s per device and dtype, each with its source), in match order.
- `_devices.py`: NVML names and canonical keys → table entries; MIG profiles → share of the GPU.
- `_overrides.py`: the operator's YAML/JSON file that adds or replaces entries.
- `_table.py`: `PeakTable` and `PeakLookup`.
- `_mfu.py`: `compute_mfu` and `evaluate` → `MfuResult`.
"""

from __future__ import annotations

from ._devices import MigProfile, parse_mig_profile, split_mig_suffix
from ._flops import KINDS, ModelShape, WorkloadKind, flops_per_token, hardware_flops_per_token
from ._mfu import MfuResult, compute_mfu, default_peak_table, evaluate
from ._overrides import load_peak_overrides, parse_peak_overrides
from ._peaks import DEFAULT_DEVICES
from ._spec import DTYPES, DeviceSpec, Dtype, PeakTableError
from ._table import PeakLookup, PeakTable

__all__ = [
    "DEFAULT_DEVICES",
    "DTYPES",
    "KINDS",
    "DeviceSpec",
    "Dtype",
    "MfuResult",
    "MigProfile",
    "ModelShape",
    "PeakLookup",
    "PeakTable",
    "PeakTableError",
    "WorkloadKind",
    "compute_mfu",
    "default_peak_table",
    "evaluate",
    "flops_per_token",
    "hardware_flops_per_token",
    "load_peak_overrides",
    "parse_mig_profile",
    "parse_peak_overrides",
    "split_mig_suffix",
]
