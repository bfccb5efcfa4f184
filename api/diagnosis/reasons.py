"""Why a diagnosis has no findings: no reports yet, too short to tell, ended before its first interval, or nothing
passes a threshold. An empty list used to say nothing, which read as "healthy" for a job the rules never saw. The
sentences are the job kind's: a serving job is judged by other rules, and reports through other means."""

from __future__ import annotations

from typing import Literal

from mfumon.api.diagnosis.facts import JobFacts
from mfumon.api.diagnosis.kinds import INFERENCE, TRAINING
from mfumon.api.diagnosis.rules import BADPUT_SHARE, BASELINE_FRACTION, STEP_SHARE
from mfumon.api.diagnosis.serving_rules import (
    IDLE_SHARE,
    KV_FULL,
    KV_ROOM,
    MBU_NEAR_LIMIT,
    PREFILL_SLOWDOWN,
    WAITING_QUEUE,
)

ReasonCode = Literal["no_reports", "ended_before_first_interval", "too_short", "nothing_found"]

#: reports (intervals) before the step-time rules can see where the time goes
MIN_REPORTS = 2

REPORT_FROM_THE_JOB = {
    TRAINING: "report from the job (mfumon wrap -- CMD, or JobReporter in the training script), and run mfumon "
    "exporter on its nodes so its GPUs' counters are seen",
    INFERENCE: "run mfumon exporter on its nodes and let it read the serving engine's metrics (--inference.list shows "
    "what it finds, --inference.url names an engine; SGLang needs --enable-metrics), or wrap the server (mfumon wrap "
    "-- CMD)",
}

#: What "no cause passes its threshold" means for each kind: the thresholds of the rules that apply to it.
NOTHING_FOUND = {
    TRAINING: (
        f"no cause passes its threshold: exposed communication under {STEP_SHARE['comm_exposed']:.0%} of step time, "
        f"data wait and bubbles under {STEP_SHARE['data_wait']:.0%}, checkpoints, start-up, stalls and lost work "
        f"under {BADPUT_SHARE:.0%} of the allocation, even GPUs, no throttling, MFU within {BASELINE_FRACTION:.0%} of "
        "its baseline"
    ),
    INFERENCE: (
        f"no cause passes its threshold: decode MBU under {MBU_NEAR_LIMIT:.0%} or latency met without a queue, no "
        f"queue of {WAITING_QUEUE:g} or more requests while the KV cache is under {KV_ROOM:.0%} full, no preemptions "
        f"with the KV cache {KV_FULL:.0%} full, TPOT under heavy prefill within {PREFILL_SLOWDOWN:g}x of light "
        f"prefill, idle under {IDLE_SHARE:.0%} of the allocation, SLO goodput (its upper bound) at or above the "
        f"objective, start-up under {BADPUT_SHARE:.0%} of the allocation, no repeated failures, no throttling"
    ),
}


def empty_reason(facts: JobFacts) -> tuple[ReasonCode, str]:
    """The code and a sentence for a diagnosis without findings."""
    kind = facts.kind if facts.kind in NOTHING_FOUND else TRAINING
    how = REPORT_FROM_THE_JOB[kind]
    reports = facts.reports_received
    if reports is None:
        return "nothing_found", "no cause passes its threshold"
    if reports == 0 and facts.status == "ended":
        return (
            "ended_before_first_interval",
            "the job ended before its first report (a report covers one interval, 10-60 s): nothing was measured; "
            "a job this short needs flush() or close() of its reporter, which mfumon wrap does at exit",
        )
    if reports == 0:
        if facts.gpus:
            return (
                "no_reports",
                f"no reports yet; its {len(facts.gpus)} GPU(s) seen by exporters show nothing to flag ("
                + ("not busy, no throttling" if kind == INFERENCE else "not busy, no throttling, even activity")
                + "): "
                + how,
            )
        pending = " (the job is pending: it holds no GPUs yet)" if facts.status == "pending" else ""
        return "no_reports", f"no reports yet and no exporter attributes GPUs to it{pending}: " + how
    if reports < MIN_REPORTS:
        return (
            "too_short",
            f"{reports} report(s) so far: the rules need at least {MIN_REPORTS} intervals to see where the time goes; "
            "ask again after the next report",
        )
    return "nothing_found", NOTHING_FOUND[kind]
