"""``/metrics`` series of the remediation loop (``mfumon remediate``): its family and how it is rendered, together.

Every decision the loop records (``POST /v1/remediations``) adds one to a durable counter in the same transaction
(:mod:`mfumon.api.services.remediations`), so every replica exports the same values and they survive restarts.
Rendered on every scrape (shard 0 only): a few series, one per action, reason and outcome seen, and per node the
nodes the loop decided on (few: the unhealthy ones).
"""

from __future__ import annotations

from mfumon.api.metrics._text import counter, declare, sample_line
from mfumon.api.state.counters import DurableCounters

REMEDIATION_FAMILIES = declare(
    counter(
        "remediation_actions_total",
        "Decisions of mfumon remediate by action (drain, resume, cordon, uncordon), reason (the failing checks, "
        "healthy, or the rail that withheld it) and outcome (done, failed, dry_run, withheld). A dry run or a "
        "withheld action counts every round it holds.",
    ),
    counter(
        "remediation_gpu_seconds_total",
        "GPU-seconds of mfumon remediate's drains by category: drained (the node's GPUs x its time out of "
        "scheduling, counted when the loop resumes it) and lost_before_drain (its GPUs running jobs x the time from "
        "the fault to the drain, counted at the drain).",
    ),
    counter(
        "node_remediation_decisions_total",
        "The same decisions per node: what mfumon remediate did, would do (dry_run) or was stopped from doing "
        "(withheld, reason the rail) for this node; MfumonNodeDrain says from it whether the loop acts.",
    ),
)


def render_remediation(counters: DurableCounters) -> str:
    """The remediation counters as this process last read them."""
    out = []
    for name, family in REMEDIATION_FAMILIES.items():
        out.append(family.header() + "".join(sample_line(name, labels, v) for labels, v in counters.series(name)))
    return "".join(out)
