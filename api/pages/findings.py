"""How a job page names a diagnosis finding: a label people read instead of the rule's key, and the runbook of the
alert that covers the same cause (``deploy/runbooks/<alert>.md``, linked where the alerts' ``runbook_url`` points)."""

from __future__ import annotations

from dataclasses import dataclass

from mfumon.api.pages import fmt

#: where the alerts' runbook_url points (deploy/prometheus/rules/*.yml): the runbooks in the repository
RUNBOOK_BASE = "https://github.com/mfu-monitor/mfu-monitor/blob/main/deploy/runbooks/"

#: rule key -> (label, alert whose runbook covers it)
CAUSES: dict[str, tuple[str, str]] = {
    "exposed_communication": ("Exposed communication", "MfumonCommRatioHigh"),
    "ranks_waiting_in_communication": ("Ranks waiting in communication", "MfumonCommRatioHigh"),
    "data_loading": ("Waiting for input data", "MfumonJobGoodputLow"),
    "pipeline_bubbles": ("Pipeline bubbles", "MfumonJobGoodputLow"),
    "checkpoint_overhead": ("Checkpoint overhead", "MfumonJobCheckpointOverheadHigh"),
    "slow_startup": ("Slow start-up", "MfumonJobGoodputLow"),
    "stalled": ("Stalled: GPUs held without progress", "MfumonJobGoodputLow"),
    "lost_progress": ("Progress lost to a failure", "MfumonJobGoodputLow"),
    "repeated_failures": ("Repeated failures", "MfumonJobGoodputLow"),
    "busy_without_reporting": ("GPUs busy, job not reporting", "MfumonGPUsBusyNotReporting"),
    "tensor_cores_idle": ("Tensor cores idle while the GPUs are busy", "MfumonGPUsBusyButMFULow"),
    "kernels_without_tensor_cores": ("Kernels that do not use tensor cores", "MfumonGPUsBusyButMFULow"),
    "throttling": ("GPU clocks throttled", "MfumonGPUThermalThrottling"),
    "stragglers": ("Stragglers", "MfumonJobStraggler"),
    "clock_power_straggler": ("Straggler from clocks or power", "MfumonJobStraggler"),
    "below_baseline": ("MFU below its baseline", "MfumonMFUBelowBaseline"),
    "software_regression": ("A software change lowered MFU", "MfumonSoftwareRegression"),
    "slow_collective_node": ("A node's collectives run slow", "MfumonNodeDrain"),
    "slow_rank": ("A rank its peers wait for", "MfumonJobStraggler"),  # its runbook's "slow rank" verdict
    "slow_link": ("A link below what the fabric carries", "MfumonNodeDrain"),
    "mfu_accounting_suspect": ("Reported MFU contradicted by the hardware", "MfumonMFUAccountingSuspect"),
    "engine_mfu_disagrees": ("Engine's MFU disagrees with ours", "MfumonMFUAccountingSuspect"),
    "kv_cache_saturated": ("KV cache saturated", "MfumonInferenceKVCacheSaturated"),
    "batch_underfilled": ("Batches underfilled", "MfumonInferenceBadlyBatched"),
    "idle_replicas": ("Idle replicas", "MfumonInferenceBadlyBatched"),
    "decode_memory_bound": ("Decode bound by memory bandwidth", "MfumonInferenceMFULow"),
    "prefill_interference": ("Prefill interfering with decode", "MfumonInferencePrefillMFULow"),
    "slo_misses": ("Requests missing their latency targets", "MfumonServingSLOGoodputLow"),
}


@dataclass(frozen=True, slots=True)
class Cause:
    key: str
    label: str
    runbook: str | None  # the alert whose runbook covers it
    url: str | None


def cause(key: str) -> Cause:
    """The label and runbook of a finding's cause; a cause this table does not know is its words, no runbook."""
    if key in CAUSES:
        label, alert = CAUSES[key]
    elif key.startswith("exposed_") and key.endswith("_communication"):  # per process group, from a profile
        group = key.removeprefix("exposed_").removesuffix("_communication")
        label, alert = f"Exposed {fmt.label(group)} communication", "MfumonCommRatioHigh"
    else:
        return Cause(key, fmt.label(key).capitalize(), None, None)
    return Cause(key, label, alert, f"{RUNBOOK_BASE}{alert}.md")
