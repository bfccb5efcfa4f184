"""Why a job's MFU is what it is: small independent rules over what the aggregator knows about one job.

:mod:`mfumon.api.diagnosis.facts` gathers nothing itself: the service (:mod:`mfumon.api.services.diagnosis`) fills a
:class:`JobFacts` from the job's row (its waterfall), the state (its GPUs' counters and health) and its baseline.
Each rule in :mod:`mfumon.api.diagnosis.rules` looks at the facts and returns at most one :class:`Finding`, with the
GPU-seconds it puts at stake; :func:`diagnose` runs them all and ranks the findings by those GPU-seconds. A job seen
only through its GPUs' counters (it never reported) gets the findings the hardware supports; an empty diagnosis says
why (:func:`empty_reason`).
"""

from __future__ import annotations

from mfumon.api.diagnosis.facts import Finding, GpuFacts, JobFacts
from mfumon.api.diagnosis.reasons import ReasonCode, empty_reason
from mfumon.api.diagnosis.rules import RULES, diagnose

__all__ = ["RULES", "Finding", "GpuFacts", "JobFacts", "ReasonCode", "diagnose", "empty_reason"]
