"""The chargeback of a window (``GET /v1/chargeback``, ``mfumon report --chargeback``), read from the durable
counters' hourly rows: GPU-seconds, cost, unpriced GPU-seconds, energy and tokens per team, job, pool and the fleet.

The rows add up to the fleet by construction: teams, then jobs without a team (the fleet's job categories less the
teams'), idle GPUs and unreported busy GPUs. Each amount was priced when it was billed (``mfumon.api.services.prices``),
so a window that spans a price change carries each part at its price.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from mfumon.api.accounting import CATEGORIES, CLUSTER_CATEGORIES
from mfumon.api.context import AppContext
from mfumon.api.crud.counters import HOUR, hour_of, read_hours
from mfumon.api.db.tables import JobRow
from mfumon.api.errors import InputError
from mfumon.api.pricing import known_cost
from mfumon.api.schemas.chargeback import ChargebackJob, ChargebackPublic, ChargebackRow, CostEntry
from mfumon.api.services.accounting import SCOPES, gpu_seconds_family
from mfumon.api.services.fleet_billing import (
    ENERGY_COST_CATEGORY,
    JOB_COST,
    JOB_ENERGY,
    JOB_ENERGY_ESTIMATED,
    JOB_GPU_SECONDS,
    JOB_REQUESTS,
    JOB_TOKENS,
    JOB_UNPRICED,
    cost_family,
    energy_family,
    tokens_family,
    unpriced_family,
)
from mfumon.api.services.usage import labels_of

_METRICS = ("gpu_seconds", "cost", "unpriced", "energy", "tokens")
_JOB_FAMILIES = {
    JOB_GPU_SECONDS: "gpu_seconds",
    JOB_COST: "cost",
    JOB_UNPRICED: "unpriced",
    JOB_ENERGY: "energy",
    JOB_ENERGY_ESTIMATED: "energy_estimated",
    JOB_TOKENS: "tokens",
    JOB_REQUESTS: "requests",
}
#: The fleet's categories that jobs without a team share with the teams (GPU-hours, and the jobs' energy).
_JOB_COST_CATEGORIES = (*CATEGORIES, "energy")


class _Tally:
    """One group's amounts: metric -> category ('' where the family has none) -> value."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, float]] = {m: defaultdict(float) for m in _METRICS}

    def get(self, metric: str, category: str = "") -> float:
        return self.values[metric].get(category, 0.0)

    def minus(self, others: Iterable[_Tally]) -> _Tally:
        out = _Tally()
        others = list(others)
        for metric, by_category in self.values.items():
            for category, value in by_category.items():
                rest = value - math.fsum(o.get(metric, category) for o in others)
                out.values[metric][category] = rest if abs(rest) > 1e-9 * max(1.0, abs(value)) else 0.0
        return out


def _per(numerator: float | None, tokens: float | None, scale: float = 1.0) -> float | None:
    return None if numerator is None or not tokens else numerator / tokens * scale


def _row(
    kind: str, name: str | None, tally: _Tally, categories: Iterable[str], energy: Iterable[str], tokens: bool
) -> ChargebackRow:
    categories, energy = list(categories), list(energy)
    entries = []
    for category in categories:
        gpu_seconds, unpriced = tally.get("gpu_seconds", category), tally.get("unpriced", category)
        entries.append(
            CostEntry(
                category=category,
                gpu_seconds=gpu_seconds,
                cost=known_cost(tally.get("cost", category), gpu_seconds, unpriced),
                unpriced_gpu_seconds=unpriced,
            )
        )
    energy_cost = 0.0
    for category in energy:
        cost_category = ENERGY_COST_CATEGORY[category]
        value = tally.get("cost", cost_category)
        energy_cost += value
        entries.append(CostEntry(category=cost_category, gpu_seconds=0.0, cost=value, unpriced_gpu_seconds=0.0))
    gpu_seconds = math.fsum(tally.get("gpu_seconds", c) for c in categories)
    unpriced = math.fsum(tally.get("unpriced", c) for c in categories)
    cost = known_cost(math.fsum(tally.get("cost", c) for c in categories) + energy_cost, gpu_seconds, unpriced)
    joules = math.fsum(tally.get("energy", c) for c in energy)
    count = tally.get("tokens") if tokens else None
    count = count or None
    return ChargebackRow(
        kind=kind,  # type: ignore[arg-type]
        name=name,
        gpu_seconds=gpu_seconds,
        gpu_hours=gpu_seconds / 3600.0,
        cost=cost,
        unpriced_gpu_seconds=unpriced,
        energy_joules=joules,
        tokens=count,
        cost_per_million_tokens=_per(cost, count, 1e6),
        joules_per_token=_per(joules, count) if joules else None,
        categories=entries,
    )


def read_chargeback(ctx: AppContext, since: float, until: float) -> ChargebackPublic:
    if since >= until:
        raise InputError("since", "since must be before until")
    families = {}
    for scope in SCOPES:
        families.update(
            {
                gpu_seconds_family(scope): (scope, "gpu_seconds"),
                cost_family(scope): (scope, "cost"),
                unpriced_family(scope): (scope, "unpriced"),
                energy_family(scope): (scope, "energy"),
                tokens_family(scope): (scope, "tokens"),
            }
        )
    with ctx.sessions() as session:
        rows = read_hours(session, names=[*families, *_JOB_FAMILIES], since=since, until=until)
        groups: dict[tuple[str, str | None], _Tally] = defaultdict(_Tally)
        jobs: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for name, labels_text, value in rows:
            labels = labels_of(labels_text)
            if name in _JOB_FAMILIES:
                jobs[(labels.get("job_id", ""), labels.get("kind", ""))][_JOB_FAMILIES[name]] += value
                continue
            scope, metric = families[name]
            key = (scope, labels.get(scope) if scope != "cluster" else None)
            groups[key].values[metric][labels.get("category", "")] += value
        teams = _teams_of(session, [job_id for job_id, _ in jobs])

    fleet = groups[("cluster", None)]
    team_tallies = {name: tally for (scope, name), tally in groups.items() if scope == "team" and name is not None}
    job_energy = ("job",)
    rows_out = [_row("team", name, team_tallies[name], CATEGORIES, job_energy, True) for name in sorted(team_tallies)]
    rows_out.append(_row("no_team", None, fleet.minus(team_tallies.values()), CATEGORIES, job_energy, True))
    rows_out.append(_row("idle", None, fleet, ("idle",), ("idle",), False))
    rows_out.append(_row("unreported", None, fleet, ("unreported",), ("unreported",), False))
    energy_all = ("job", "unreported", "idle")
    pools = sorted(name for scope, name in groups if scope == "pool" and name is not None)
    prices = ctx.state.prices
    return ChargebackPublic(
        since=hour_of(since),
        until=hour_of(until) + (HOUR if until % HOUR else 0),
        currency=prices.currency,
        priced=bool(prices),
        fleet=_row("fleet", None, fleet, CLUSTER_CATEGORIES, energy_all, True),
        rows=rows_out,
        pools=[_row("pool", p, groups[("pool", p)], CLUSTER_CATEGORIES, energy_all, True) for p in pools],
        jobs=sorted(
            (_job(job_id, kind, teams.get(job_id), v) for (job_id, kind), v in jobs.items()),
            key=lambda j: (-(j.cost or 0.0), -j.gpu_seconds, j.job_id),
        ),
    )


def _job(job_id: str, kind: str, team: str | None, v: dict[str, float]) -> ChargebackJob:
    gpu_seconds, unpriced, energy = v.get("gpu_seconds", 0.0), v.get("unpriced", 0.0), v.get("energy", 0.0)
    cost = known_cost(v.get("cost", 0.0), gpu_seconds, unpriced)  # GPU-hours and energy: a job's counter holds both
    tokens, requests = v.get("tokens") or None, v.get("requests") or None
    return ChargebackJob(
        job_id=job_id,
        kind=kind,
        team=team,
        gpu_seconds=gpu_seconds,
        gpu_hours=gpu_seconds / 3600.0,
        cost=cost,
        unpriced_gpu_seconds=unpriced,
        energy_joules=energy,
        energy_estimated_joules=v.get("energy_estimated", 0.0),
        tokens=tokens,
        requests=requests,
        cost_per_million_tokens=_per(cost, tokens, 1e6),
        joules_per_token=_per(energy, tokens) if energy else None,
        joules_per_request=_per(energy, requests) if energy else None,
    )


def _teams_of(session: Session, job_ids: list[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for i in range(0, len(job_ids), 500):
        chunk = job_ids[i : i + 500]
        rows = session.execute(select(JobRow.job_id, JobRow.team).where(JobRow.job_id.in_(chunk)))
        out.update((job_id, team) for job_id, team in rows)
    return out
