"""Energy and cost on ``/metrics`` (issue 60): their families and how they are rendered, together.

Durable counters (:mod:`mfumon.api.crud.counters`, written as :mod:`mfumon.api.services.fleet_billing` and the
waterfall bill them), so they survive restarts and read the same on every replica: per job while the job is visible
(an ended job's series disappear), per team, pool and the cluster always. Costs are in the price list's currency,
named by ``mfumon_prices_info{currency}``. A job's GPU-seconds are ``mfumon_job_gpu_seconds_total{category}`` (its
waterfall, :mod:`mfumon.api.metrics.job`); the chargeback's per-job hourly copy of them is not exported. A GPU-second
nothing prices adds to ``..._unpriced_gpu_seconds_total``, never 0 to a cost. Read their growth over a window with
the engine-neutral form (``grafana/_window.py``), never ``increase()``: they never reset.
"""

from __future__ import annotations

from collections.abc import Iterable

from mfumon.api.accounting import CATEGORIES, CLUSTER_CATEGORIES
from mfumon.api.metrics._text import counter, declare, gauge, labels_text, sample_line
from mfumon.api.pricing import PriceList
from mfumon.api.state.counters import DurableCounters
from mfumon.api.state.energy import ENERGY_CATEGORIES

COST_FAMILIES = declare(
    counter("job_energy_joules_total", "Energy the job's GPUs drew (a shared GPU by the job's share)."),
    counter(
        "job_energy_estimated_joules_total",
        "The part of the job's energy estimated from power samples (no energy counter, or it reset).",
    ),
    counter("job_cost_total", "The job's GPU-hours and energy at the prices in effect when each was billed."),
    counter("job_unpriced_gpu_seconds_total", "The job's GPU-seconds that no price covers (left out of its cost)."),
    counter("job_tokens_total", "Tokens the job processed (training) or generated (serving: output tokens)."),
    counter("job_requests_total", "Requests a serving job completed."),
    gauge("job_joules_per_token", "The job's energy / its tokens since it started (serving: per output token)."),
    counter("cluster_cost_total", "Cost of the fleet by category: waterfall, idle, unreported, and energy."),
    counter("pool_cost_total", "Cost of the pool by category."),
    counter("team_cost_total", "Cost of the team's jobs by waterfall category and energy."),
    counter("cluster_unpriced_gpu_seconds_total", "GPU-seconds of the fleet no price covers, by category."),
    counter("pool_unpriced_gpu_seconds_total", "GPU-seconds of the pool no price covers, by category."),
    counter("team_unpriced_gpu_seconds_total", "GPU-seconds of the team's jobs no price covers, by category."),
    counter("cluster_energy_joules_total", "Energy of the fleet's GPUs by category: job, unreported, idle."),
    counter("pool_energy_joules_total", "Energy of the pool's GPUs by category."),
    counter("team_energy_joules_total", "Energy of the team's jobs' GPUs."),
    counter("cluster_tokens_total", "Tokens of every job (training: processed; serving: output)."),
    counter("pool_tokens_total", "Tokens of the pool's jobs."),
    counter("team_tokens_total", "Tokens of the team's jobs."),
    gauge("prices_info", "1, naming the price list's currency; absent when no price list is in effect."),
)

_ENERGY_COSTS = ("energy", "idle_energy", "unreported_energy")
_CATEGORIES = {
    "mfumon_cluster_cost_total": (*CLUSTER_CATEGORIES, *_ENERGY_COSTS),
    "mfumon_pool_cost_total": (*CLUSTER_CATEGORIES, *_ENERGY_COSTS),
    "mfumon_team_cost_total": (*CATEGORIES, "energy"),
    "mfumon_cluster_unpriced_gpu_seconds_total": CLUSTER_CATEGORIES,
    "mfumon_pool_unpriced_gpu_seconds_total": CLUSTER_CATEGORIES,
    "mfumon_team_unpriced_gpu_seconds_total": CATEGORIES,
    "mfumon_cluster_energy_joules_total": ENERGY_CATEGORIES,
    "mfumon_pool_energy_joules_total": ENERGY_CATEGORIES,
}
_PER_JOB = tuple(name for name in COST_FAMILIES if name.startswith("mfumon_job_") and name.endswith("_total"))


def render_cost(counters: DurableCounters, prices: PriceList, *, jobs: Iterable[str] = ()) -> str:
    """The energy and cost series; per-job ones for the visible ``jobs`` only. A scope's categories all show (zeros
    too) once one of them is non-zero, so each category's first increase is seen."""
    prefixes = {labels_text([("job_id", job_id)])[:-1] for job_id in jobs}  # labels end ,kind="..."}
    per_job: dict[str, list[tuple[str, float]]] = {}
    out = []
    for name, family in COST_FAMILIES.items():
        if name == "mfumon_job_joules_per_token":
            energy = dict(per_job.get("mfumon_job_energy_joules_total", ()))
            tokens = per_job.get("mfumon_job_tokens_total", ())
            series = [(labels, energy[labels] / count) for labels, count in tokens if energy.get(labels) and count > 0]
        elif name == "mfumon_prices_info":
            series = [(labels_text([("currency", prices.currency)]), 1.0)] if prices else []
        else:
            series = counters.series(name)
            if name in _PER_JOB:
                series = [(labels, v) for labels, v in series if labels.rsplit(",kind=", 1)[0] in prefixes]
                per_job[name] = series
            elif (categories := _CATEGORIES.get(name)) is not None:
                series = _every_category(series, categories)
        out.append(family.header() + "".join(sample_line(name, labels, v) for labels, v in series))
    return "".join(out)


def _every_category(series: list[tuple[str, float]], categories: Iterable[str]) -> list[tuple[str, float]]:
    values = dict(series)
    scopes = sorted({labels.rsplit("category=", 1)[0] for labels in values})  # '{pool="a",' or '{'
    return [
        (f'{scope}category="{category}"}}', values.get(f'{scope}category="{category}"}}', 0.0))
        for scope in scopes
        for category in categories
    ]
