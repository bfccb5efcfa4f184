"""A job's energy and cost since it started, as its JSON shows them: read from the durable counters this process
holds (every replica the same), so an ended job keeps them."""

from __future__ import annotations

from typing import Any

from mfumon.api.pricing import PriceList, known_cost
from mfumon.api.services.fleet_billing import (
    JOB_COST,
    JOB_ENERGY,
    JOB_ENERGY_ESTIMATED,
    JOB_GPU_SECONDS,
    JOB_REQUESTS,
    JOB_TOKENS,
    JOB_UNPRICED,
    job_labels,
)
from mfumon.api.state.counters import DurableCounters


def energy_and_cost(counters: DurableCounters, prices: PriceList, job_id: str, kind: str) -> dict[str, Any]:
    """``energy_joules``, ``joules_per_token``, ``cost`` ... for the job JSON; None where nothing is known. A cost is
    None when none of it is priced (never 0 for lack of a price)."""
    labels = job_labels(job_id, kind)
    value = lambda name: counters.value(name, labels)  # noqa: E731
    energy, estimated = value(JOB_ENERGY), value(JOB_ENERGY_ESTIMATED)
    tokens, requests = value(JOB_TOKENS), value(JOB_REQUESTS)
    gpu_seconds, unpriced, cost = value(JOB_GPU_SECONDS), value(JOB_UNPRICED), value(JOB_COST)
    known = known_cost(cost, gpu_seconds, unpriced) if gpu_seconds or cost else None  # None before it is billed
    return {
        "energy_joules": energy or None,
        "energy_estimated_joules": estimated if energy else None,
        "joules_per_token": energy / tokens if energy and tokens else None,
        "joules_per_request": energy / requests if energy and requests else None,
        "cost": known,
        "currency": prices.currency if known is not None else None,
        "unpriced_gpu_seconds": unpriced if gpu_seconds else None,
        "cost_per_million_tokens": known / tokens * 1e6 if known is not None and tokens else None,
    }
