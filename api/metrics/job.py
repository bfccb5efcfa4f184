"""A job's series on ``/metrics``: its families and how they are rendered, side by side.

Two renders per job, cached separately by the store: :func:`render_job`, what the job reports (MFU, throughput,
inference phases and MBU, lifecycle counters, the waste waterfall), rendered when its view changes; and
:func:`render_job_gpus`, the job as the hardware sees it (GPUs exporters attribute, hardware MFU, agreement,
stragglers), which moves with every node push and so is rendered on a scrape when its account changed.
"""

from __future__ import annotations

from collections.abc import Callable

from mfumon.api.accounting import CATEGORIES, Ledger
from mfumon.api.metrics._text import counter, declare, gauge, labels_text, sample_line
from mfumon.api.metrics.serving import SERVING_FAMILIES, add_serving, add_serving_waterfall
from mfumon.api.state.aggregate import JobAccount
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.views import JobView

# Per job (labels job_id, kind), in exposition order; both renders' families, joined family by family.
JOB_FAMILIES = declare(
    gauge("job_info", "Job metadata; value 1."),
    gauge("job_mfu_ratio", "Model FLOPs utilization of the job (0-1) over its last report interval."),
    gauge("job_hfu_ratio", "Hardware FLOPs utilization (counts activation recompute) when the job reports it."),
    gauge("job_model_flops_per_second", "Model FLOP/s achieved by the whole job."),
    gauge("job_peak_flops_per_second", "Dense peak FLOP/s of the job's GPUs at its dtype (the MFU denominator)."),
    gauge("job_tokens_per_second", "Whole-job throughput in tokens per second."),
    gauge("job_comm_ratio", "Exposed (not overlapped) communication time / step time."),
    gauge("job_data_wait_ratio", "Exposed data-loading wait time / step time."),
    gauge("job_step_seconds", "Mean step time over the last report interval."),
    gauge("job_baseline_mfu_ratio", "MFU stored as this workload signature's baseline (model, GPU, count, dtype)."),
    gauge("job_gpus_allocated", "GPUs exporters attribute to the job (a report's num_gpus alone allocates none)."),
    gauge("job_gpus_requested", "GPUs the job asked for."),
    gauge("job_start_timestamp_seconds", "Unix time of the job's first report."),
    gauge("job_last_report_timestamp_seconds", "Unix time of the job's latest report."),
    # Inference jobs whose reports split prefill and decode (api/mfu/_serving.py).
    gauge(
        "job_mbu_ratio",
        "Model bandwidth utilization: bytes read per second / (GPUs x peak memory bandwidth) while decoding.",
    ),
    gauge(
        "job_engine_mfu_ratio",
        "The serving engine's own MFU estimate, beside ours: its FLOP/s / (GPUs x the same dense peak).",
    ),
    gauge("job_phase_mfu_ratio", "A phase's model FLOP/s / the job's dense peak; the phases add up to the MFU."),
    gauge(
        "job_phase_active_mfu_ratio",
        "A phase's FLOPs / (seconds the engine spent in it x dense peak), where the engine reports that time.",
    ),
    gauge("job_phase_tokens_per_second", "Tokens per second by phase: prompt tokens computed, tokens generated."),
    gauge("job_memory_bytes_per_second", "Memory read per second by decode steps (the MBU numerator, estimated)."),
    gauge("job_peak_memory_bytes_per_second", "Peak memory bandwidth of the job's GPUs (the MBU denominator)."),
    gauge("job_decode_step_bytes", "Bytes one decode step reads, by part: weights, kv_cache."),
    gauge("job_batch_size", "Mean sequences per decode step of one model replica."),
    gauge("job_context_tokens", "Mean context length of a sequence being decoded."),
    gauge("job_requests_running", "Requests the serving engine is running."),
    gauge("job_requests_waiting", "Requests waiting in the serving engine's queue."),
    gauge("job_kv_cache_usage_ratio", "Fraction of the serving engine's KV cache in use."),
    *SERVING_FAMILIES.values(),
    # Cluster truth: the job as the hardware sees it, rendered per scrape (it moves with every node push).
    gauge("job_gpus_unverified", "GPUs the job reports (num_gpus) beyond those exporters attribute to it."),
    gauge("job_gpus_unreported", "GPUs exporters attribute to the job while it posts no throughput."),
    gauge(
        "job_hardware_mfu_ratio",
        "Hardware MFU estimate: tensor activity x SM clock / max SM clock, mean over the job's GPUs with one.",
    ),
    gauge("job_mfu_hardware_agreement_ratio", "Reported MFU / hardware-estimated MFU of a reporting job."),
    gauge(
        "job_gpu_tensor_active_spread_ratio",
        "(max - min) / max tensor activity over the job's GPUs: stragglers make it large (issue 11).",
    ),
    # Lifecycle and accounting (issue 11).
    counter("job_restarts_total", "Restarts of the job: announced, or inferred (activity after its end, step back)."),
    counter("job_failures_total", "Failures of the job: failure events and non-zero exits, once per attempt."),
    counter(
        "job_gpu_seconds_total",
        "The job's allocated GPU-seconds by waterfall category; the categories add up to its allocated time.",
    ),
    gauge("job_goodput_ratio", "Productive step time / allocated time over the job's life."),
    gauge("job_lifetime_mfu_ratio", "Useful model FLOPs / dense peak FLOPs over the job's whole allocated time."),
    gauge("job_compute_mfu_ratio", "Model FLOPs / dense peak FLOPs over the job's compute time only."),
    gauge(
        "job_step_time_deviation_ratio",
        "Mean absolute deviation of the last reports' step times from their median, / the median.",
    ),
    # The latest on-demand profile (issue 32): device time over the profiled ranks, by parallelism group.
    gauge("job_profile_comm_ratio", "Communication kernel time (overlapped and exposed) / device time, by group."),
    gauge(
        "job_profile_exposed_comm_ratio",
        "Communication time with no compute kernel running on the device / device time, by group.",
    ),
    gauge("job_profile_idle_ratio", "Device idle time (waiting for the host or for data) / device time."),
    gauge(
        "job_profile_tensor_core_ratio", "Time in tensor-core kernels / time in compute kernels (from kernel names)."
    ),
    gauge("job_profile_timestamp_seconds", "Unix time the latest profile was captured (its age: time() - this)."),
)

Chunk = dict[str, str]  # family name -> its sample lines for one job


def render_job(job: JobView, baseline_mfu: float | None) -> Chunk:
    """What the job reports, its lifecycle counters and its waterfall; ``baseline_mfu`` of its signature, if any."""
    lines: dict[str, list[str]] = {}
    labels = labels_text([("job_id", job.job_id), ("kind", job.kind)])

    def add(name: str, value: float | None, label_text: str = labels) -> None:
        if value is not None:
            lines.setdefault(name, []).append(sample_line(name, label_text, value))

    latest = job.latest or ReportOutcome()
    info = [
        ("job_id", job.job_id),
        ("kind", job.kind),
        ("status", job.status),
        ("name", job.name or ""),
        ("team", job.team or ""),
        ("pool", job.pool or ""),
        ("model", job.model_key or ""),
        ("gpu_model", latest.device or job.gpu_model or ""),
        ("dtype", job.dtype),
    ]
    add("mfumon_job_info", 1, labels_text(info))
    if job.status == "running":
        add("mfumon_job_mfu_ratio", latest.mfu)
        add("mfumon_job_hfu_ratio", latest.hfu)
        add("mfumon_job_tokens_per_second", latest.tokens_per_second)
        if latest.mfu is not None:
            add("mfumon_job_model_flops_per_second", latest.model_flops_per_second)
            add("mfumon_job_peak_flops_per_second", latest.peak_flops_per_second)
        add("mfumon_job_comm_ratio", latest.comm_ratio)
        add("mfumon_job_data_wait_ratio", latest.data_wait_ratio)
        add("mfumon_job_step_seconds", latest.step_seconds)
        add("mfumon_job_baseline_mfu_ratio", baseline_mfu)
        add("mfumon_job_start_timestamp_seconds", job.started_at)
        add("mfumon_job_last_report_timestamp_seconds", job.last_report_at)
        _add_inference(add, job, latest)
        add_serving(add, job, latest)
        _add_profile(add, job)
    add("mfumon_job_restarts_total", job.restarts)
    add("mfumon_job_failures_total", job.failures)
    _add_waterfall(add, job)
    return {name: "".join(chunk) for name, chunk in lines.items()}


def _add_profile(add: Callable[..., None], job: JobView) -> None:
    """The latest profile's figures, every group (a group the profile saw no traffic of is a measured 0)."""
    profile = job.profile
    if profile is None:
        return
    ident = [("job_id", job.job_id), ("kind", job.kind)]
    for figures in profile.groups:
        group_labels = labels_text([*ident, ("group", figures.group)])
        add("mfumon_job_profile_comm_ratio", figures.comm_ratio, group_labels)
        add("mfumon_job_profile_exposed_comm_ratio", figures.exposed_comm_ratio, group_labels)
    add("mfumon_job_profile_idle_ratio", profile.idle_ratio)
    add("mfumon_job_profile_tensor_core_ratio", profile.tensor_core_ratio)
    add("mfumon_job_profile_timestamp_seconds", profile.captured_at)


def _add_inference(add: Callable[..., None], job: JobView, latest: ReportOutcome) -> None:
    """An inference job's MBU, phases and engine state (absent for training jobs and unsplit reports)."""
    add("mfumon_job_requests_running", latest.requests_running)
    add("mfumon_job_requests_waiting", latest.requests_waiting)
    add("mfumon_job_kv_cache_usage_ratio", latest.kv_cache_usage)
    inference = latest.inference
    if inference is None:
        return
    ident = [("job_id", job.job_id), ("kind", job.kind)]
    add("mfumon_job_mbu_ratio", inference.mbu)
    add("mfumon_job_engine_mfu_ratio", inference.engine_mfu)
    for phase, values in sorted(inference.phases.items()):
        phase_labels = labels_text([*ident, ("phase", phase)])
        add("mfumon_job_phase_tokens_per_second", values.tokens_per_second, phase_labels)
        add("mfumon_job_phase_mfu_ratio", values.mfu, phase_labels)
        add("mfumon_job_phase_active_mfu_ratio", values.active_mfu, phase_labels)
    add("mfumon_job_memory_bytes_per_second", inference.memory_bytes_per_second)
    add("mfumon_job_peak_memory_bytes_per_second", inference.peak_memory_bytes_per_second)
    for part, value in (
        ("kv_cache", inference.decode_step_kv_cache_bytes),
        ("weights", inference.decode_step_weight_bytes),
    ):
        add("mfumon_job_decode_step_bytes", value, labels_text([*ident, ("part", part)]))
    add("mfumon_job_batch_size", inference.batch_size)
    add("mfumon_job_context_tokens", inference.context_tokens)


def render_job_gpus(job_id: str, job: JobView | None, account: JobAccount) -> Chunk:
    """A job's GPUs as the hardware sees them, and the cross-check; ``job=None`` for an id only exporters know."""
    lines: dict[str, list[str]] = {}
    labels = labels_text([("job_id", job_id), ("kind", job.kind if job is not None else "")])

    def add(name: str, value: float | None, label_text: str = labels) -> None:
        if value is not None:
            lines.setdefault(name, []).append(sample_line(name, label_text, value))

    if job is None:
        info = [("job_id", job_id), ("kind", ""), ("status", account.status), ("pool", account.pool or "")]
        add("mfumon_job_info", 1, labels_text(info))
    allocated = account.gpus_held
    add("mfumon_job_gpus_allocated", allocated)
    if job is not None:
        add("mfumon_job_gpus_requested", job.gpus_requested or job.num_gpus or allocated)
    if account.status == "running":
        add("mfumon_job_gpus_unverified", account.gpus_unverified)
    if account.gpus_unreported:  # present only while it holds some: Prometheus counts how long it is present
        add("mfumon_job_gpus_unreported", account.gpus_unreported)
    add("mfumon_job_hardware_mfu_ratio", account.hardware_mfu)
    add("mfumon_job_mfu_hardware_agreement_ratio", account.agreement)
    if account.status == "running":
        add("mfumon_job_gpu_tensor_active_spread_ratio", account.tensor_active_spread)
    return {name: "".join(chunk) for name, chunk in lines.items()}


def _add_waterfall(add: Callable[..., None], job: JobView) -> None:
    """The job's waterfall counters (every category, zeros included) and lifetime ratios, once it has a ledger."""
    if not job.accounting:
        return
    ledger = Ledger.from_json(job.accounting)
    ident = [("job_id", job.job_id), ("kind", job.kind)]
    for category in CATEGORIES:
        labels = labels_text([*ident, ("category", category)])
        add("mfumon_job_gpu_seconds_total", ledger.gpu_seconds.get(category, 0.0), labels)
    add("mfumon_job_goodput_ratio", ledger.goodput)
    add("mfumon_job_lifetime_mfu_ratio", ledger.lifetime_mfu)
    add("mfumon_job_compute_mfu_ratio", ledger.compute_mfu)
    add_serving_waterfall(add, job, ledger)
    if job.status == "running":
        add("mfumon_job_step_time_deviation_ratio", ledger.step_time_deviation)
