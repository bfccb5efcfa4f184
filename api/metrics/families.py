"""Every metric the aggregator exposes: name, type and help, in exposition order. One place to look."""

from __future__ import annotations

from dataclasses import dataclass, fields

from mfumon.exporter.samples import COUNTER_FIELDS, IbPortSample


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    type: str  # gauge | counter | histogram
    help: str

    def header(self) -> str:
        return f"# HELP {self.name} {self.help}\n# TYPE {self.name} {self.type}\n"


def _g(name: str, help_text: str) -> Family:
    return Family(f"mfumon_{name}", "gauge", help_text)


def _c(name: str, help_text: str) -> Family:
    return Family(f"mfumon_{name}", "counter", help_text)


def _h(name: str, help_text: str) -> Family:
    return Family(f"mfumon_{name}", "histogram", help_text)


# Per job (labels job_id, kind). Rendered per job and cached until the job changes.
JOB_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _g("job_info", "Job metadata; value 1."),
        _g("job_mfu_ratio", "Model FLOPs utilization of the job (0-1) over its last report interval."),
        _g(
            "job_hfu_ratio",
            "Hardware FLOPs utilization (counts activation recompute) when the job reports it.",
        ),
        _g("job_model_flops_per_second", "Model FLOP/s achieved by the whole job."),
        _g(
            "job_peak_flops_per_second",
            "Dense peak FLOP/s of the job's GPUs at its dtype (the MFU denominator).",
        ),
        _g("job_tokens_per_second", "Whole-job throughput in tokens per second."),
        _g("job_comm_ratio", "Exposed (not overlapped) communication time / step time."),
        _g("job_data_wait_ratio", "Exposed data-loading wait time / step time."),
        _g("job_step_seconds", "Mean step time over the last report interval."),
        _g(
            "job_baseline_mfu_ratio",
            "MFU stored as this workload signature's baseline (model, GPU, count, dtype).",
        ),
        _g("job_gpus_allocated", "GPUs exporters attribute to the job (a report's num_gpus alone allocates none)."),
        _g("job_gpus_requested", "GPUs the job asked for."),
        _g("job_start_timestamp_seconds", "Unix time of the job's first report."),
        _g("job_last_report_timestamp_seconds", "Unix time of the job's latest report."),
        # Inference jobs whose reports split prefill and decode (api/mfu/_serving.py).
        _g(
            "job_mbu_ratio",
            "Model bandwidth utilization: bytes read per second / (GPUs x peak memory bandwidth) while decoding.",
        ),
        _g("job_phase_mfu_ratio", "A phase's model FLOP/s / the job's dense peak; the phases add up to the MFU."),
        _g(
            "job_phase_active_mfu_ratio",
            "A phase's FLOPs / (seconds the engine spent in it x dense peak), where the engine reports that time.",
        ),
        _g("job_phase_tokens_per_second", "Tokens per second by phase: prompt tokens computed, tokens generated."),
        _g("job_memory_bytes_per_second", "Memory read per second by decode steps (the MBU numerator, estimated)."),
        _g("job_peak_memory_bytes_per_second", "Peak memory bandwidth of the job's GPUs (the MBU denominator)."),
        _g("job_decode_step_bytes", "Bytes one decode step reads, by part: weights, kv_cache."),
        _g("job_batch_size", "Mean sequences per decode step of one model replica."),
        _g("job_context_tokens", "Mean context length of a sequence being decoded."),
        _g("job_requests_running", "Requests the serving engine is running."),
        _g("job_requests_waiting", "Requests waiting in the serving engine's queue."),
        _g("job_kv_cache_usage_ratio", "Fraction of the serving engine's KV cache in use."),
        # Cluster truth: the job as the hardware sees it, rendered per scrape (it moves with every node push).
        _g("job_gpus_unverified", "GPUs the job reports (num_gpus) beyond those exporters attribute to it."),
        _g("job_gpus_unreported", "GPUs exporters attribute to the job while it posts no throughput."),
        _g(
            "job_hardware_mfu_ratio",
            "Hardware MFU estimate: tensor activity x SM clock / max SM clock, mean over the job's GPUs with one.",
        ),
        _g("job_mfu_hardware_agreement_ratio", "Reported MFU / hardware-estimated MFU of a reporting job."),
        _g(
            "job_gpu_tensor_active_spread_ratio",
            "(max - min) / max tensor activity over the job's GPUs: stragglers make it large (issue 11).",
        ),
        # Lifecycle and accounting (issue 11).
        _c("job_restarts_total", "Restarts of the job: announced, or inferred (activity after its end, step back)."),
        _c("job_failures_total", "Failures of the job: failure events and non-zero exits, once per attempt."),
        _c(
            "job_gpu_seconds_total",
            "The job's allocated GPU-seconds by waterfall category; the categories add up to its allocated time.",
        ),
        _g("job_goodput_ratio", "Productive step time / allocated time over the job's life."),
        _g("job_lifetime_mfu_ratio", "Useful model FLOPs / dense peak FLOPs over the job's whole allocated time."),
        _g("job_compute_mfu_ratio", "Model FLOPs / dense peak FLOPs over the job's compute time only."),
        _g(
            "job_step_time_deviation_ratio",
            "Mean absolute deviation of the last reports' step times from their median, / the median.",
        ),
    )
}

# Per GPU (labels node, gpu, uuid). Rendered per node and cached until the node pushes again.
GPU_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _g("gpu_info", "GPU identity and attribution; value 1."),
        _g("gpu_up", "1 when the GPU answers, 0 when the exporter reports it lost."),
        _g("gpu_utilization_ratio", "Fraction of time a kernel was running (NVML utilization)."),
        _g("gpu_sm_active_ratio", "Fraction of time SMs had at least one warp (profiling/GPM)."),
        _g("gpu_sm_occupancy_ratio", "Warps resident / maximum warps (profiling/GPM)."),
        _g("gpu_tensor_active_ratio", "Fraction of cycles the tensor pipes were active (profiling/GPM)."),
        _g("gpu_dram_active_ratio", "Fraction of cycles device memory was busy (profiling/GPM)."),
        _g("gpu_memory_used_bytes", "Device memory in use."),
        _g("gpu_memory_total_bytes", "Device memory size."),
        _g("gpu_power_watts", "Power draw."),
        _g("gpu_temperature_celsius", "GPU temperature."),
        _g("gpu_sm_clock_hz", "Current SM clock."),
        _g("gpu_max_sm_clock_hz", "Maximum SM clock."),
        _g("gpu_nvlink_tx_bytes_per_second", "NVLink transmit throughput."),
        _g("gpu_nvlink_rx_bytes_per_second", "NVLink receive throughput."),
        _g("gpu_pcie_tx_bytes_per_second", "PCIe transmit throughput."),
        _g("gpu_pcie_rx_bytes_per_second", "PCIe receive throughput."),
        _c("gpu_xid_errors_total", "XID errors seen by the exporter."),
        _c("gpu_ecc_uncorrected_total", "Uncorrectable ECC errors."),
        _c("gpu_ecc_corrected_total", "Corrected ECC errors."),
        _g("gpu_throttled", "1 while clocks are held down for this reason (thermal, power, hw_slowdown)."),
        _g("gpu_busy", "1 when compute work runs on the GPU (processes, else kernel activity), 0 when it is free."),
        _g("gpu_hardware_mfu_ratio", "Hardware MFU estimate: tensor-pipe activity x SM clock / max SM clock."),
        _g("node_info", "Node metadata; value 1."),
        _g("node_last_seen_timestamp_seconds", "Unix time the node's exporter last pushed."),
    )
}

# Durable counters (mfumon.api.crud.counters): stored in the database in the transaction that stores what they count, so
# they survive restarts and every replica exports the same values. Rendered on every scrape; few series.
DURABLE_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _c("job_ends_total", "Jobs ended, by kind and outcome (success, failure, unknown, expired)."),
        _c("job_events_total", "Job events received or inferred (restarts), by kind and type."),
        # The waste waterfall (api/accounting): GPU-seconds by category, and FLOPs to put MFU over any window.
        _c(
            "cluster_gpu_seconds_total",
            "GPU-seconds by category: jobs' waterfalls plus idle and unreported GPUs; increase() over any window.",
        ),
        _c("pool_gpu_seconds_total", "GPU-seconds of the pool by category (jobs' waterfalls, idle, unreported)."),
        _c("team_gpu_seconds_total", "GPU-seconds of the team's jobs by waterfall category."),
        _c("cluster_model_flops_total", "Useful model FLOPs of all jobs (work redone after a failure excluded)."),
        _c("pool_model_flops_total", "Useful model FLOPs of the pool's jobs."),
        _c("team_model_flops_total", "Useful model FLOPs of the team's jobs."),
        _c("cluster_peak_flops_total", "Dense peak FLOP/s x allocated seconds of all jobs: the MFU denominator."),
        _c("pool_peak_flops_total", "Dense peak FLOP/s x allocated seconds of the pool's jobs."),
        _c("team_peak_flops_total", "Dense peak FLOP/s x allocated seconds of the team's jobs."),
        _c("cluster_compute_peak_flops_total", "Dense peak FLOP/s x compute seconds of all jobs."),
        _c("pool_compute_peak_flops_total", "Dense peak FLOP/s x compute seconds of the pool's jobs."),
        _c("team_compute_peak_flops_total", "Dense peak FLOP/s x compute seconds of the team's jobs."),
    )
}

#: sample counter field -> GPU metric name
COUNTER_METRICS: dict[str, str] = {
    "utilization": "mfumon_gpu_utilization_ratio",
    "sm_active": "mfumon_gpu_sm_active_ratio",
    "sm_occupancy": "mfumon_gpu_sm_occupancy_ratio",
    "tensor_active": "mfumon_gpu_tensor_active_ratio",
    "dram_active": "mfumon_gpu_dram_active_ratio",
    "memory_used_bytes": "mfumon_gpu_memory_used_bytes",
    "memory_total_bytes": "mfumon_gpu_memory_total_bytes",
    "power_watts": "mfumon_gpu_power_watts",
    "temperature_celsius": "mfumon_gpu_temperature_celsius",
    "sm_clock_hz": "mfumon_gpu_sm_clock_hz",
    "max_sm_clock_hz": "mfumon_gpu_max_sm_clock_hz",
    "nvlink_tx_bytes_per_second": "mfumon_gpu_nvlink_tx_bytes_per_second",
    "nvlink_rx_bytes_per_second": "mfumon_gpu_nvlink_rx_bytes_per_second",
    "pcie_tx_bytes_per_second": "mfumon_gpu_pcie_tx_bytes_per_second",
    "pcie_rx_bytes_per_second": "mfumon_gpu_pcie_rx_bytes_per_second",
    "xid_errors_total": "mfumon_gpu_xid_errors_total",
    "ecc_uncorrected_total": "mfumon_gpu_ecc_uncorrected_total",
    "ecc_corrected_total": "mfumon_gpu_ecc_corrected_total",
}

# --- Fleet health (issue 15) ---------------------------------------------------------------------------------------
# Per GPU, per InfiniBand/RoCE port and per node: rendered with the node's chunk, after GPU_FAMILIES.
HEALTH_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _c("gpu_nvlink_crc_flit_errors_total", "NVLink flow-control (flit) CRC errors, all links."),
        _c("gpu_nvlink_crc_data_errors_total", "NVLink data CRC errors, all links."),
        _c("gpu_nvlink_replay_errors_total", "NVLink replays (retransmissions), all links."),
        _c("gpu_nvlink_recovery_errors_total", "NVLink recoveries (link retrained), all links."),
        _c("gpu_pcie_replays_total", "PCIe replays (link-level retransmissions)."),
        _c("gpu_remapped_rows_correctable_total", "HBM rows remapped for correctable errors."),
        _c("gpu_remapped_rows_uncorrectable_total", "HBM rows remapped for uncorrectable errors."),
        _g("gpu_row_remap_pending", "1 while a row remap waits for a GPU reset to take effect."),
        _g("gpu_row_remap_failure", "1 once a row remap has failed (no spare rows left)."),
        _c("gpu_energy_joules_total", "Energy the GPU drew since its driver loaded."),
        _g("gpu_last_xid", "The last XID the GPU reported since the exporter started (0: none)."),
        _g("gpu_health", "1 while the GPU passes the health check, 0 while it fails it; absent where unsupported."),
        _g("ib_port_info", "InfiniBand/RoCE port identity; value 1."),
        _g("ib_port_active", "1 while the port's state is ACTIVE."),
        _g("ib_port_rate_bytes_per_second", "Port signalling rate (active width x speed)."),
        _c("ib_port_link_downed_total", "Times the link failed to recover from an error and went down."),
        _c("ib_port_symbol_errors_total", "Minor link errors detected on physical lanes."),
        _c("ib_port_receive_errors_total", "Packets received with an error."),
        _c("ib_port_link_error_recovery_total", "Link retrains that recovered without going down."),
        _c("ib_port_transmit_discards_total", "Outbound packets discarded (port down or congested)."),
        _c("ib_port_transmit_bytes_total", "Data bytes transmitted (the kernel's 4-byte words x 4)."),
        _c("ib_port_receive_bytes_total", "Data bytes received (the kernel's 4-byte words x 4)."),
        _g("node_health", "1 while the node passes the health check, 0 while it fails it."),
        _g("node_healthy", "1 while every GPU and node check of the node passes."),
        _g("node_drain", "1 for each reason the node should leave the scheduler (the drain list); absent otherwise."),
    )
}

#: sample counter field -> health metric name: the family named after the field (rendered like COUNTER_METRICS)
HEALTH_COUNTER_METRICS: dict[str, str] = {
    field: f"mfumon_gpu_{field}" for field in COUNTER_FIELDS if f"mfumon_gpu_{field}" in HEALTH_FAMILIES
}

#: sample counter field -> the metric of its per-GPU line, GPU and health families alike (one lookup per counter)
GPU_LINE_METRICS: dict[str, str] = {**COUNTER_METRICS, **HEALTH_COUNTER_METRICS}

#: InfiniBand port field -> metric name: the family named after the field
IB_PORT_METRICS: dict[str, str] = {
    f.name: f"mfumon_ib_port_{f.name}" for f in fields(IbPortSample) if f"mfumon_ib_port_{f.name}" in HEALTH_FAMILIES
}

# Per pool and cluster: rendered on every scrape after SUMMARY_FAMILIES. The pool counters count from this process's
# start (use rate()/increase(), which handle restarts; replicas agree on rates, not on totals).
HEALTH_SUMMARY_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _c("pool_idle_energy_joules_total", "Energy drawn by the pool's idle GPUs (up, no job, no compute work)."),
        _c("pool_idle_gpu_seconds_total", "GPU-seconds the pool's GPUs spent in state idle."),
        _c("pool_gpu_faults_total", "GPUs of the pool that started failing a check that needs a drain."),
        _g("cluster_nodes_by_health", "Nodes by health status: healthy, degraded (a check fails), drain."),
    )
}

#: NVML clock-event reasons grouped into the ``reason`` label of ``mfumon_gpu_throttled``
THROTTLE_GROUPS: dict[str, frozenset[str]] = {
    "thermal": frozenset({"sw_thermal", "hw_thermal"}),
    "power": frozenset({"sw_power_cap", "hw_power_brake"}),
    "hw_slowdown": frozenset({"hw_slowdown"}),
}

# Cluster, pool, team and self-metrics: few series, rendered on every scrape.
SUMMARY_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _g(
            "cluster_mfu_ratio",
            "Sum of jobs' model FLOP/s / dense peak of every known GPU (idle GPUs count).",
        ),
        _g("cluster_allocated_mfu_ratio", "Sum of jobs' model FLOP/s / dense peak of the GPUs jobs hold."),
        _g(
            "cluster_model_flops_per_second",
            "Useful FLOP/s: reporting jobs' model FLOP/s on their GPUs plus hardware estimates of unreported GPUs.",
        ),
        _g("cluster_peak_flops_per_second", "Dense peak FLOP/s of the busy GPUs with a number plus idle GPUs (bf16)."),
        _g("cluster_gpus", "GPUs exporters report, by state (reporting, unreported, idle, down): they add up to all."),
        _g("cluster_gpus_unknown_model", "GPUs exporters report whose model has no peak in the table."),
        _g("cluster_gpus_unverified", "GPUs that job reports claim and no exporter confirms (counted in no state)."),
        _g("cluster_jobs_gpu_mismatch", "Reporting jobs whose num_gpus differs from the GPUs exporters attribute."),
        _g("cluster_reported_coverage_ratio", "GPUs in reporting jobs / busy GPUs: the share of MFU not estimated."),
        _g("cluster_nodes", "Nodes whose exporters pushed within the node TTL."),
        _g("cluster_jobs", "Jobs by status (running, pending)."),
        _g("pool_mfu_ratio", "Pool MFU: its jobs' model FLOP/s / peak of its jobs' GPUs and its idle GPUs."),
        _g("pool_resource_satisfaction_ratio", "GPUs allocated / GPUs requested by the pool's jobs."),
        _g("pool_gpus", "GPUs of the pool's nodes, by state (reporting, unreported, idle, down)."),
        _g("pool_reported_coverage_ratio", "GPUs in reporting jobs / busy GPUs, in the pool's nodes."),
        _g("pool_gpus_allocated", "GPUs exporters attribute to the pool's jobs."),
        _g("pool_gpus_requested", "GPUs requested by the pool's running and pending jobs."),
        _g("pool_jobs_pending", "Jobs registered in the pool that hold no GPUs yet."),
        _g("team_mfu_ratio", "Team MFU over the GPUs its running jobs hold."),
        _g("team_gpus_allocated", "GPUs held by the team's running jobs."),
        _c("ingest_requests_total", "Ingest requests by endpoint and outcome."),
        _c("ingest_gpu_samples_total", "GPU samples received in node pushes."),
        _c(
            "unknown_device_reports_total",
            "Job reports whose GPU model has no peak in the table (MFU unknown).",
        ),
        _c(
            "token_writes_total", "Writes by the name of the token that made them (never the token), endpoint, outcome."
        ),
        _c(
            "ingest_refused_total",
            "Writes refused at a cardinality limit (nodes, gpus, gpus_per_node, active_jobs); for "
            "unknown_gpu_models, reports whose GPU model was counted as 'other'.",
        ),
        _c("read_requests_rejected_total", "Reads answered 503 because every read slot stayed busy (api, metrics)."),
        _g("http_connections", "Open HTTP connections (mfumon serve)."),
        _c(
            "http_connections_closed_total",
            "Connections the server closed on a client: header/body/write timeout, evicted or refused at the cap.",
        ),
        _g("scrape_duration_seconds", "Time the previous /metrics render took."),
        _c(
            "metrics_renders_total",
            "Series rendered ahead of scrapes, by kind (node, job, job_gpus), or by a scrape that found them stale. "
            "Node renders fewer than node pushes: renders shed under load (a node pushed again before its turn is "
            "rendered once).",
        ),
        _g("metrics_renders_pending", "Nodes pushed and not rendered yet (a scrape renders them itself)."),
        _c(
            "metrics_scrapes_total",
            "Scrapes of /metrics by outcome: rendered, or reused (the same shard rendered within "
            "MFUMON_METRICS_MAX_AGE_SECONDS).",
        ),
        _g(
            "state_refresh_duration_seconds",
            "Time the last read of rows other replicas changed took.",
        ),
        _c("state_refresh_errors_total", "Failed reads of other replicas' changes (and lost notification links)."),
        _g("sample_queue_nodes", "Nodes whose newest pushed sample is not stored in the database yet."),
        _g(
            "sample_queue_age_seconds",
            "Age of the oldest pushed sample not stored yet: what a crash could lose (0 when all are stored).",
        ),
        _g("sample_flush_duration_seconds", "Time the last group commit of node samples took."),
        _c("sample_flush_errors_total", "Group commits of node samples that failed (their samples are retried)."),
        _g("build_info", "Build information; value 1."),
    )
}

# Queue, quota and fragmentation (mfumon.api.state.capacity), mostly from scheduler adapters; rendered on every scrape.
CAPACITY_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        _g("job_queue_wait_seconds", "Seconds a queued job has waited since it became eligible (scheduler jobs)."),
        _h(
            "started_job_queue_wait_seconds",
            "Queue waits (eligible to start) of scheduler jobs that started, per pool and team.",
        ),
        _g("pool_gpus_queued", "GPUs requested by the pool's queued jobs (held and blocked jobs excluded)."),
        _g("pool_max_queue_wait_seconds", "Longest wait among the pool's queued jobs."),
        _g("pool_free_gpus", "GPUs of the pool's nodes that answer and that no running job holds."),
        _g("pool_nodes_by_free_gpus", "Nodes of the pool by how many free GPUs they have."),
        _g(
            "pool_largest_free_block_gpus",
            "Most free GPUs on one node of the pool: the largest one-node request it can place.",
        ),
        _g(
            "pool_fragmented_gpus",
            "GPUs requested by queued jobs that fit nowhere whole although the pool has that many free GPUs.",
        ),
        _g("team_gpus_queued", "GPUs requested by the team's queued jobs."),
        _g("team_max_queue_wait_seconds", "Longest wait among the team's queued jobs."),
        _g(
            "team_resource_satisfaction_ratio", "GPUs allocated / GPUs requested by the team's running and queued jobs."
        ),
        _g("team_gpu_quota", "GPUs the team may hold (scheduler quota), in a pool or, without pool, in all pools."),
        _g("team_gpu_quota_used_ratio", "GPUs held by the team's running jobs / its quota."),
        _g("scheduler_last_sync_timestamp_seconds", "Unix time the scheduler adapter last synced its queue."),
        _g("scheduler_jobs", "Jobs the scheduler adapter lists, by status (running, queued, held)."),
    )
}
