"""Where the GPU-hours go: a job's allocated GPU-seconds split into categories that add up exactly.

The ledger (:mod:`mfumon.api.accounting.ledger`) is pure arithmetic over one job's reports and events; the service
(:mod:`mfumon.api.services.accounting`) stores it on the job's row and adds the same amounts to the durable pool, team
and cluster counters in the same transaction.
"""

from __future__ import annotations

from mfumon.api.accounting.ledger import (
    BADPUT,
    CATEGORIES,
    CLUSTER_CATEGORIES,
    EVENT_CATEGORY,
    STEP_CATEGORIES,
    Bill,
    Ledger,
    StepSplit,
)

__all__ = [
    "BADPUT",
    "CATEGORIES",
    "CLUSTER_CATEGORIES",
    "EVENT_CATEGORY",
    "STEP_CATEGORIES",
    "Bill",
    "Ledger",
    "StepSplit",
]
