"""The MFU engine: FLOPs-per-token formulas, the dense peak table, device matching and the MFU arithmetic.

Pure Python (stdlib + PyYAML), so the aggregator, tests and tools share one definition:
- `_checks.py`: the input checks (a finite number at least a minimum, a GPU count), one copy of each rule.
- `_flops.py`: PaLM App. B FLOPs per token (training, inference) and the HFU recompute factor.
- `_peaks.py`: THE peak table (dense FLOP/s per device and dtype, each with its source), in match order.
- `_devices.py`: NVML names and canonical keys → table entries; MIG profiles → share of the GPU.
- `_overrides.py`: the operator's YAML/JSON file that adds or replaces entries.
- `_table.py`: `PeakTable` and `PeakLookup`.
- `_serving.py`: inference: MFU by phase (prefill, decode) and MBU, bytes read per decode step.
- `_mfu.py`: `compute_mfu` and `evaluate` → `MfuResult`.
- `_hardware.py`: the hardware estimate (tensor activity x SM clock ÷ max SM clock), a report checked against it.
"""

from __future__ import annotations

from ._devices import MigProfile, parse_mig_profile, split_mig_suffix
from ._flops import KINDS, ModelShape, WorkloadKind, flops_per_token, hardware_flops_per_token
from ._hardware import (
    AGREEMENT_OVER_CLAIM,
    AGREEMENT_UNDER_CLAIM,
    CYCLE_COUNTERS,
    MIXED,
    RATIO_CLOCK,
    AccountingCheck,
    EstimateSource,
    JobEstimateSource,
    agreement_ratio,
    check_accounting,
    estimate_source,
    hardware_mfu,
    job_estimate_source,
)
from ._mfu import MfuResult, compute_mfu, default_peak_table, evaluate
from ._overrides import load_peak_overrides, parse_peak_overrides
from ._peaks import DEFAULT_DEVICES
from ._serving import (
    BYTES_PER_ELEMENT,
    FORMULAS,
    PHASES,
    STORAGE_DTYPES,
    PhaseResult,
    ServingResult,
    ServingWindow,
    StorageDtype,
    compute_mbu,
    decode_step_bytes,
    evaluate_serving,
    kv_cache_bytes_per_token,
    weight_bytes,
)
from ._spec import DTYPES, DeviceSpec, Dtype, PeakTableError
from ._table import BandwidthLookup, PeakLookup, PeakTable

__all__ = [
    "AGREEMENT_OVER_CLAIM",
    "AGREEMENT_UNDER_CLAIM",
    "BYTES_PER_ELEMENT",
    "CYCLE_COUNTERS",
    "DEFAULT_DEVICES",
    "DTYPES",
    "FORMULAS",
    "KINDS",
    "MIXED",
    "PHASES",
    "RATIO_CLOCK",
    "STORAGE_DTYPES",
    "AccountingCheck",
    "BandwidthLookup",
    "DeviceSpec",
    "Dtype",
    "EstimateSource",
    "JobEstimateSource",
    "MfuResult",
    "MigProfile",
    "ModelShape",
    "PeakLookup",
    "PeakTable",
    "PeakTableError",
    "PhaseResult",
    "ServingResult",
    "ServingWindow",
    "StorageDtype",
    "WorkloadKind",
    "agreement_ratio",
    "check_accounting",
    "compute_mbu",
    "compute_mfu",
    "decode_step_bytes",
    "default_peak_table",
    "estimate_source",
    "evaluate",
    "evaluate_serving",
    "flops_per_token",
    "hardware_flops_per_token",
    "hardware_mfu",
    "job_estimate_source",
    "kv_cache_bytes_per_token",
    "load_peak_overrides",
    "parse_mig_profile",
    "parse_peak_overrides",
    "split_mig_suffix",
    "weight_bytes",
]
