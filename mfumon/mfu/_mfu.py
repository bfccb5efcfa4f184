"""MFU arithmetic: model FLOP/s achieved ÷ dense peak FLOP/s of the devices the job holds.

Definition (Chowdhery et al. 2022, PaLM, arXiv 2204.02311, App. B): MFU is the observed throughput relative to
the theoretical maximum of the system at peak FLOP/s, counting only the FLOPs the model needs (forward +
backward), not rematerialisation. HFU counts the FLOPs executed, recompute included, over the same peak.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ._checks import check_at_least, check_num_gpus
from ._flops import ModelShape, WorkloadKind, flops_per_token, hardware_flops_per_token
from ._serving import ServingResult, ServingWindow, StorageDtype, evaluate_serving, storage_dtype_for
from ._spec import Dtype, check_dtype
from ._table import BandwidthLookup, PeakLookup, PeakTable


@dataclass(frozen=True)
class MfuResult:
    """Everything a report yields; `mfu`/`hfu` are 0-1 or None, and `reason` says why one is None.

    FLOP/s figures are for the whole job. `hardware_flops_per_token` and `hfu` are None when the job did not
    say whether it recomputes activations. `serving` holds the phases and MBU of an inference report that
    split its tokens into prefill and decode; `mfu` is then their sum and `flops_per_token` the mean per token.
    """

    mfu: float | None
    hfu: float | None
    reason: str | None
    flops_per_token: float
    hardware_flops_per_token: float | None
    model_flops_per_second: float
    peak_flops_per_second: float | None
    peak_flops_per_gpu: float | None
    device_key: str | None
    dtype: Dtype
    mig_fraction: float | None
    peak_unconfirmed: bool = False
    serving: ServingResult | None = None


def compute_mfu(tokens_per_second: float, flops_per_token: float, num_gpus: int, peak_flops_per_gpu: float) -> float:
    """tokens/s * FLOPs/token / (num_gpus * dense peak FLOP/s per GPU); raises ValueError on bad inputs."""
    check_at_least("tokens_per_second", tokens_per_second, 0.0)
    check_at_least("flops_per_token", flops_per_token, 0.0, strictly=True)
    check_num_gpus(num_gpus)
    check_at_least("peak_flops_per_gpu", peak_flops_per_gpu, 0.0, strictly=True)
    return _utilization(tokens_per_second, flops_per_token, num_gpus, peak_flops_per_gpu)


def _utilization(tokens_per_second: float, flops_per_token: float, num_gpus: int, peak_flops_per_gpu: float) -> float:
    """The MFU (or HFU) ratio of inputs already checked (by `compute_mfu` or `evaluate`)."""
    model_flops_per_second = tokens_per_second * flops_per_token
    job_peak_flops_per_second = num_gpus * peak_flops_per_gpu
    return model_flops_per_second / job_peak_flops_per_second


@functools.cache
def default_peak_table() -> PeakTable:
    """The built-in peak table, built once per process."""
    return PeakTable()


def evaluate(
    *,
    kind: WorkloadKind,
    shape: ModelShape,
    tokens_per_second: float,
    num_gpus: int,
    device_name: str | None = None,
    dtype: Dtype = "bf16",
    mig_profile: str | None = None,
    peak_flops_per_gpu: float | None = None,
    recompute_activations: bool | None = None,
    table: PeakTable | None = None,
    serving: ServingWindow | None = None,
    weight_dtype: StorageDtype | None = None,
    kv_cache_dtype: StorageDtype | None = None,
    peak_memory_bandwidth_per_gpu: float | None = None,
) -> MfuResult:
    """MFU (and HFU) of one job report.

    Args:
        kind: "training" or "inference"; selects the FLOPs formula.
        shape: the model; needs params or flops_per_token.
        tokens_per_second: whole-job throughput.
        num_gpus: devices the job runs on (MIG slices count one each).
        device_name: NVML name or canonical key; a "... MIG 1g.10gb" name carries its profile.
        dtype: the precision whose dense peak is the denominator.
        mig_profile: MIG profile of the job's devices; overrides one parsed from `device_name`.
        peak_flops_per_gpu: operator/job override of one device's dense peak, used as given (no MIG scaling).
        recompute_activations: full activation recompute on (HFU > MFU), off (HFU = MFU), or unknown (no HFU).
        table: peak table to use; the built-in one by default.
        serving: an inference report's prefill/decode split (and batch, context): MFU by phase and MBU.
        weight_dtype, kv_cache_dtype: storage of the weights and KV cache, for MBU; default from `dtype`.
        peak_memory_bandwidth_per_gpu: override of one device's memory bandwidth (bytes/s), for MBU.

    Returns:
        An `MfuResult`. Inputs that break the report contract (no params, num_gpus < 1, unknown dtype) raise
        ValueError; a missing peak or an MFU above 1 gives `mfu=None` and a `reason`.
    """
    _check_report(kind, tokens_per_second, num_gpus, dtype, peak_flops_per_gpu, serving, peak_memory_bandwidth_per_gpu)
    model_flops_per_token = flops_per_token(shape, kind)
    executed_flops_per_token = (
        None if recompute_activations is None else hardware_flops_per_token(shape, kind, recompute_activations)
    )
    model_flops_per_second = tokens_per_second * model_flops_per_token
    peak = _find_peak(table or default_peak_table(), device_name, dtype, mig_profile, peak_flops_per_gpu)
    unresolved = MfuResult(
        mfu=None,
        hfu=None,
        reason=peak.reason,
        flops_per_token=model_flops_per_token,
        hardware_flops_per_token=executed_flops_per_token,
        model_flops_per_second=model_flops_per_second,
        peak_flops_per_second=None,
        peak_flops_per_gpu=None,
        device_key=peak.device_key,
        dtype=dtype,
        mig_fraction=peak.mig_fraction,
        peak_unconfirmed=peak.unconfirmed,
    )
    if serving is not None:
        table = table or default_peak_table()
        bandwidth = _find_bandwidth(table, device_name, mig_profile, peak_memory_bandwidth_per_gpu)
        served = evaluate_serving(
            shape=shape,
            window=serving,
            num_gpus=num_gpus,
            peak_flops_per_gpu=peak.peak_flops_per_gpu,
            peak_bandwidth_per_gpu=bandwidth.bytes_per_second,
            bandwidth_reason=bandwidth.reason,
            bandwidth_source=bandwidth.source,
            weight_dtype=weight_dtype or storage_dtype_for(dtype),
            kv_cache_dtype=kv_cache_dtype or storage_dtype_for(dtype),
        )
        mean_flops_per_token = (
            served.model_flops_per_second / tokens_per_second
            if tokens_per_second > 0
            else served.phases["decode"].flops_per_token
        )
        unresolved = replace(
            unresolved,
            flops_per_token=mean_flops_per_token,
            model_flops_per_second=served.model_flops_per_second,
            hardware_flops_per_token=None if executed_flops_per_token is None else mean_flops_per_token,
            serving=served,
        )
        model_flops_per_token = mean_flops_per_token
        executed_flops_per_token = unresolved.hardware_flops_per_token
    if peak.peak_flops_per_gpu is None:
        return unresolved
    job_peak_flops_per_second = num_gpus * peak.peak_flops_per_gpu
    mfu = _utilization(tokens_per_second, model_flops_per_token, num_gpus, peak.peak_flops_per_gpu)
    hfu = None
    if executed_flops_per_token is not None:
        hfu = _utilization(tokens_per_second, executed_flops_per_token, num_gpus, peak.peak_flops_per_gpu)
    resolved = replace(
        unresolved,
        mfu=mfu,
        hfu=hfu,
        peak_flops_per_second=job_peak_flops_per_second,
        peak_flops_per_gpu=peak.peak_flops_per_gpu,
    )
    return _reject_implausible(resolved)


def _reject_implausible(result: MfuResult) -> MfuResult:
    """A ratio above 1 means a wrong throughput, FLOPs count or peak: say so instead of reporting it."""
    if result.mfu is not None and result.mfu > 1:
        reason = f"implausible MFU {result.mfu:.3g} > 1: the throughput, FLOPs per token or device peak is wrong"
        return replace(result, mfu=None, hfu=None, reason=reason)
    if result.hfu is not None and result.hfu > 1:
        reason = f"implausible HFU {result.hfu:.3g} > 1: is activation recompute really on?"
        return replace(result, hfu=None, reason=reason)
    return result


def _find_peak(
    table: PeakTable,
    device_name: str | None,
    dtype: Dtype,
    mig_profile: str | None,
    peak_flops_per_gpu: float | None,
) -> PeakLookup:
    """The table's peak, or the explicit override (still naming the device when the table knows it)."""
    if peak_flops_per_gpu is None:
        return table.lookup(device_name, dtype, mig_profile)
    spec = table.resolve(device_name) if device_name else None  # a blank name resolves to None
    device_key = None if spec is None else spec.key
    return PeakLookup(device_key, dtype, float(peak_flops_per_gpu), 1.0, None)  # used as given: no MIG scaling


def _find_bandwidth(
    table: PeakTable, device_name: str | None, mig_profile: str | None, override: float | None
) -> BandwidthLookup:
    """The table's memory bandwidth for the device, or the job's own figure."""
    if override is None:
        return table.bandwidth(device_name, mig_profile)
    return BandwidthLookup(None, float(override), None, "peak_memory_bandwidth_per_gpu sent by the job")


def _check_report(
    kind: WorkloadKind,
    tokens_per_second: float,
    num_gpus: int,
    dtype: str,
    peak_flops_per_gpu: float | None,
    serving: ServingWindow | None,
    peak_memory_bandwidth_per_gpu: float | None,
) -> None:
    """Every input of a report that is not a model shape or a serving window (those check themselves), once.

    Checked before any lookup, so a report breaks the contract whatever its device: an unknown device with
    `num_gpus=0` or `dtype="int4"` is an error, not an MFU of None.
    """
    check_dtype(dtype)
    check_at_least("tokens_per_second", tokens_per_second, 0.0)
    check_num_gpus(num_gpus)
    if peak_flops_per_gpu is not None:
        check_at_least("peak_flops_per_gpu", peak_flops_per_gpu, 0.0, strictly=True)
    if peak_memory_bandwidth_per_gpu is not None:
        check_at_least("peak_memory_bandwidth_per_gpu", peak_memory_bandwidth_per_gpu, 0.0, strictly=True)
    if serving is not None and kind != "inference":
        raise ValueError("prefill_tokens and decode_tokens describe inference jobs; this job's kind is training")
