"""What a report comes to, computed once: :func:`evaluate_report` reads the job row, the report and the exporters'
attribution, calls the MFU engine, and returns one frozen :class:`ReportEvaluation` that every later step (persist,
bill, baseline, answer) reads and none recomputes. It writes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mfumon.api.accounting import StepSplit
from mfumon.api.context import AppContext
from mfumon.api.db.tables import JobRow
from mfumon.api.errors import InputError
from mfumon.api.schemas.jobs import JobReportCreate
from mfumon.api.services import baselines
from mfumon.api.state.collectives import collective_time_ratios, exposed_between_profiles
from mfumon.api.state.outcome import InferenceOutcome, ReportOutcome
from mfumon.api.state.profiles import ProfileFigures
from mfumon.api.state.views import JobShare, NodeView
from mfumon.mfu import ModelShape, ServingWindow, evaluate

PROFILE_FRESH_SECONDS = 3600.0
"""A profile this recent gives the job's comm ratio (it sees every parallelism); an older one leaves it to the
reports' hooks or timers, since the job may have changed since."""

NUM_GPUS_UNKNOWN = "num_gpus unknown: report num_gpus, or run exporters that attribute GPUs to this job"
GPU_MODEL_UNKNOWN = "gpu_model unknown: report gpu_model or peak_flops_per_gpu, or run exporters on its nodes"


@dataclass(frozen=True, slots=True)
class ReportEvaluation:
    """Everything computed about one report. ``outcome`` is the engine's answer as the job row keeps it (MFU or the
    reason there is none, FLOPs, peaks, device, step split, signature, inference figures); the rest is what the
    bill, the history row and the answer need beside it."""

    job_id: str
    now: float
    outcome: ReportOutcome
    tokens_per_second: float  # the report's whole-job throughput
    gpu_model: str | None  # the job's, else the first attributed GPU's name
    dtype: str
    unknown_device: bool  # a GPU name the peak table does not know (and no peak given): counted in self-metrics
    shares: tuple[tuple[NodeView, JobShare], ...]  # the exporters' attribution of GPUs to the job, now
    hardware_mfu: float | None  # the hardware's estimate over those GPUs
    split: StepSplit  # the report's step breakdown, for the waterfall
    covered_seconds: float | None  # the interval the report covers
    profiled_steps: int | None

    @property
    def inference(self) -> dict[str, Any] | None:
        """An inference report's JSON document (phases, MBU inputs, formulas), as the API shows it."""
        return None if self.outcome.inference is None else dict(self.outcome.inference.document)

    @property
    def profiled(self) -> bool:
        """The report covers profiled steps, which the profiler slows: not a workload's baseline."""
        return bool(self.profiled_steps)


def evaluate_report(ctx: AppContext, job: JobRow, report: JobReportCreate, now: float) -> ReportEvaluation:
    """The report's MFU and all that goes with it, for a job row whose fields the report has already updated."""
    tokens_per_second = report.rate()
    shares = ctx.state.job_shares(job.job_id, now)  # exporters' attribution fills in what the report leaves out
    attributed = sum(share.gpus for _, share in shares)
    num_gpus = job.num_gpus or attributed or None
    gpu_name = job.gpu_model or (shares[0][1].gpu_name if shares else None)
    mig_profile = None if job.gpu_model else (shares[0][1].mig_profile if shares else None)
    if not job.model:
        raise InputError("model", "model is required: send model.params or model.flops_per_token")
    shape = ModelShape(**{k: v for k, v in job.model.items() if k != "name"})
    result = evaluate(
        kind=job.kind,  # type: ignore[arg-type]
        shape=shape,
        tokens_per_second=tokens_per_second,
        num_gpus=num_gpus or 1,
        device_name=gpu_name,
        dtype=job.dtype,  # type: ignore[arg-type]
        mig_profile=mig_profile,
        peak_flops_per_gpu=job.peak_flops_per_gpu,
        recompute_activations=job.recompute_activations,
        table=ctx.peak_table,
        serving=_serving_window(job, report),
        weight_dtype=job.weight_dtype,  # type: ignore[arg-type]
        kv_cache_dtype=job.kv_cache_dtype,  # type: ignore[arg-type]
        peak_memory_bandwidth_per_gpu=job.peak_memory_bandwidth_per_gpu,
    )
    mfu, hfu, reason, peak = result.mfu, result.hfu, result.reason, result.peak_flops_per_second
    inference = None if result.serving is None else result.serving.as_json(shape)
    if inference is not None:
        inference["engine_estimator"] = report.engine_estimator  # whose FLOPs convention engine_mfu follows
    unknown_device = False
    if num_gpus is None:
        mfu = hfu = peak = None
        reason = NUM_GPUS_UNKNOWN
        inference = _without_utilization(inference, reason)
    elif gpu_name is None and job.peak_flops_per_gpu is None:
        reason = GPU_MODEL_UNKNOWN
    elif result.device_key is None and job.peak_flops_per_gpu is None:
        unknown_device = True
    comm_ratio = _ratio(report.comm_seconds, report.step_seconds)
    comm_source: str | None = (report.comm_source or "hooks") if comm_ratio is not None else None
    figures = ProfileFigures.from_json(job.profile)
    if figures is not None and now - figures.captured_at <= PROFILE_FRESH_SECONDS:
        comm_ratio, comm_source = figures.exposed_comm_ratio, "profile"  # sees every group, hooks only DP
    elif (
        figures is not None
        and (
            exposed := exposed_between_profiles(
                collective_time_ratios((node for node, _ in shares), job.job_id),
                figures.comm_ratio,
                figures.exposed_comm_ratio,
            )
        )
        is not None
    ):  # between profiles: Inspector's time in collectives now, at the last profile's overlap
        comm_ratio, comm_source = exposed, "inspector"
    outcome = ReportOutcome(
        tokens_per_second=tokens_per_second,
        mfu=mfu,
        hfu=hfu,
        reason=reason,
        flops_per_token=result.flops_per_token,
        model_flops_per_second=result.model_flops_per_second,
        peak_flops_per_second=peak,
        peak_flops_per_gpu=result.peak_flops_per_gpu,
        device=result.device_key,
        num_gpus=num_gpus,
        step_seconds=report.step_seconds,
        comm_ratio=comm_ratio,
        comm_source=comm_source,
        data_wait_ratio=_ratio(report.data_wait_seconds, report.step_seconds),
        step=report.step,
        signature=baselines.signature_of(job, result.device_key, num_gpus),
        # Inference reports with a phase split (mfumon/mfu/_serving.py) and the engine's scheduler state.
        inference=None if inference is None else InferenceOutcome.from_json(inference),
        requests_running=report.requests_running,
        requests_waiting=report.requests_waiting,
        kv_cache_usage=report.kv_cache_usage,
    )
    return ReportEvaluation(
        job_id=job.job_id,
        now=now,
        outcome=outcome,
        tokens_per_second=tokens_per_second,
        gpu_model=gpu_name,
        dtype=job.dtype,
        unknown_device=unknown_device,
        shares=tuple(shares),
        hardware_mfu=_hardware_mfu(shares),
        split=StepSplit(
            step_seconds=report.step_seconds,
            data_wait_seconds=report.data_wait_seconds,
            comm_seconds=report.comm_seconds,
            bubble_seconds=report.bubble_seconds,
        ),
        covered_seconds=report.interval_seconds,
        profiled_steps=report.profiled_steps,
    )


def _ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return min(part / whole, 1.0)


def _serving_window(job: JobRow, report: JobReportCreate) -> ServingWindow | None:
    """The report's prefill/decode split as the MFU engine takes it; None for reports without one."""
    if not report.has_phases():
        return None
    if job.kind != "inference":
        raise InputError(
            "prefill_tokens", "prefill_tokens and decode_tokens are for inference jobs: send kind 'inference'"
        )
    assert report.interval_seconds is not None
    running = report.requests_running or None  # the batch when the engine gave no mean batch size
    return ServingWindow(
        interval_seconds=report.interval_seconds,
        prefill_tokens=report.prefill_tokens or 0,
        decode_tokens=report.decode_tokens or 0,
        batch_size=report.batch_size if report.batch_size is not None else running,
        context_tokens=report.context_tokens,
        prompt_tokens=report.mean_prompt_tokens,
        prefill_seconds=report.prefill_busy_seconds,
        decode_seconds=report.decode_busy_seconds,
        engine_flops_per_gpu=report.engine_flops_per_gpu,
        engine_bytes_per_gpu=report.engine_bytes_per_gpu,
    )


def _without_utilization(inference: dict[str, Any] | None, reason: str) -> dict[str, Any] | None:
    """Keep the throughput of an inference report whose GPU count is unknown, but none of its ratios."""
    if inference is None:
        return None
    phases = {name: {**values, "mfu": None, "active_mfu": None} for name, values in inference["phases"].items()}
    engine = {"engine_flops_per_second": None, "engine_mfu": None, "engine_memory_bytes_per_second": None}
    return {**inference, **engine, "phases": phases, "mfu": None, "mbu": None, "mbu_reason": reason, "engine_mbu": None}


def _hardware_mfu(shares: list[tuple[NodeView, JobShare]]) -> float | None:
    """The job's hardware estimate now: the mean over its GPUs that report tensor activity, as the job's account
    (:class:`mfumon.api.state.aggregate.JobAccount`) sums it."""
    estimated = sum(share.estimated for _, share in shares)
    return sum(share.estimate_sum for _, share in shares) / estimated if estimated else None
