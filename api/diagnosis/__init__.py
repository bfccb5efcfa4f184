"""Why a job's MFU is what it is: small independent rules over what the aggregator knows about one job.

:mod:`mfumon.api.diagnosis.facts` gathers nothing itself: the service (:mod:`mfumon.api.services.diagnosis`) fills a
:class:`JobFacts` from the job's row (its waterfall), the state (its GPUs' counters and health) and its baseline,
and for a serving job the engine's view (:class:`~mfumon.api.diagnosis.facts.ServingFacts`). Each rule declares the
job kinds it applies to (:mod:`mfumon.api.diagnosis.kinds`: training rules in :mod:`~mfumon.api.diagnosis.rules`,
:mod:`~mfumon.api.diagnosis.peers` and :mod:`~mfumon.api.diagnosis.profile`, serving rules in
:mod:`~mfumon.api.diagnosis.serving` and :mod:`~mfumon.api.diagnosis.serving_rules`, a few for both), looks at the
facts and returns at most one :class:`Finding`, with the GPU-seconds it puts at stake; :func:`diagnose` runs those of
the job's kind and ranks the findings by those GPU-seconds. A job seen only through its GPUs' counters (it never
reported) gets the findings the hardware supports; an empty diagnosis says why (:func:`empty_reason`).
"""

from __future__ import annotations

from mfumon.api.diagnosis.facts import Finding, GpuFacts, JobFacts
from mfumon.api.diagnosis.kinds import RuleSpec, applies_to
from mfumon.api.diagnosis.reasons import ReasonCode, empty_reason
from mfumon.api.diagnosis.rules import RULES, diagnose

__all__ = [
    "RULES",
    "Finding",
    "GpuFacts",
    "JobFacts",
    "ReasonCode",
    "RuleSpec",
    "applies_to",
    "diagnose",
    "empty_reason",
]
