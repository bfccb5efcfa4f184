"""Why a diagnosis has no findings: no reports yet, too short to tell, ended before its first interval, or nothing
passes a threshold. An empty list used to say nothing, which read as "healthy" for a job the rules never saw."""

from __future__ import annotations

from typing import Literal

from mfumon.api.diagnosis.facts import JobFacts

ReasonCode = Literal["no_reports", "ended_before_first_interval", "too_short", "nothing_found"]

#: reports (intervals) before the step-time rules can see where the time goes
MIN_REPORTS = 2

_REPORT_FROM_THE_JOB = (
    "report from the job (mfumon wrap -- CMD, or JobReporter in the training script), and run mfumon exporter on its "
    "nodes so its GPUs' counters are seen"
)


def empty_reason(facts: JobFacts) -> tuple[ReasonCode, str]:
    """The code and a sentence for a diagnosis without findings."""
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
                f"no reports yet; its {len(facts.gpus)} GPU(s) seen by exporters show nothing to flag (not busy, "
                "no throttling, even activity): " + _REPORT_FROM_THE_JOB,
            )
        pending = " (the job is pending: it holds no GPUs yet)" if facts.status == "pending" else ""
        return "no_reports", f"no reports yet and no exporter attributes GPUs to it{pending}: " + _REPORT_FROM_THE_JOB
    if reports < MIN_REPORTS:
        return (
            "too_short",
            f"{reports} report(s) so far: the rules need at least {MIN_REPORTS} intervals to see where the time goes; "
            "ask again after the next report",
        )
    return (
        "nothing_found",
        "no cause passes its threshold: exposed communication under 10% of step time, data wait and bubbles under "
        "5%, checkpoints, start-up, stalls and lost work under 5% of the allocation, even GPUs, no throttling, MFU "
        "within 80% of its baseline",
    )
