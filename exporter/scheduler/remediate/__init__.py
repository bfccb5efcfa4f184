"""``mfumon remediate``: act on the aggregator's drain list through the scheduler, behind safety rails.

- :mod:`~mfumon.exporter.scheduler.remediate.model`: the records between stages (health, scheduler node, policy,
  decision);
- :mod:`~mfumon.exporter.scheduler.remediate.decide`: the decision table, pure;
- :mod:`~mfumon.exporter.scheduler.remediate.slurm`, :mod:`~mfumon.exporter.scheduler.remediate.kubernetes`: the
  drivers (``sinfo``/``scontrol``; cordon and taint through lightkube);
- :mod:`~mfumon.exporter.scheduler.remediate.aggregator`, :mod:`~mfumon.exporter.scheduler.remediate.audit`: the
  drain list in, the audit out;
- :mod:`~mfumon.exporter.scheduler.remediate.loop`: a round (read, decide, act, verify, retry, record) and the
  kill switch; :mod:`~mfumon.exporter.scheduler.remediate.cli`: the command.

Like the rest of ``mfumon.exporter``, it never imports the server.
"""

from mfumon.exporter.scheduler.remediate.decide import decide, observe
from mfumon.exporter.scheduler.remediate.loop import KillSwitch, Remediator, Retry
from mfumon.exporter.scheduler.remediate.model import Decision, NodeHealth, Policy, SchedulerNode, Seen

__all__ = [
    "Decision",
    "KillSwitch",
    "NodeHealth",
    "Policy",
    "Remediator",
    "Retry",
    "SchedulerNode",
    "Seen",
    "decide",
    "observe",
]
