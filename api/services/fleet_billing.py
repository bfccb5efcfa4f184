"""What the periodic billing adds beside the idle and unreported GPU-seconds (issue 60): the fleet's energy split by
job and state, and the price of the GPU-seconds no job's ledger bills (idle and unreported GPUs).

Families (durable counters; ``SCOPE`` is ``cluster``, ``pool`` or ``team``):

- ``mfumon_job_energy_joules_total{job_id,kind}`` and its ``..._estimated_...`` part (power samples, not counters);
- ``mfumon_SCOPE_energy_joules_total{category}``: ``job``, ``unreported``, ``idle`` (team: ``job`` only);
- ``mfumon_SCOPE_cost_total{category}``: the waterfall's categories and ``idle``/``unreported`` at the GPU-hour
  price; ``energy`` (jobs), ``idle_energy``, ``unreported_energy`` at the kWh price x PUE;
- ``mfumon_SCOPE_unpriced_gpu_seconds_total{category}``: GPU-seconds nothing prices, so a bill can say it is
  incomplete rather than show 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from mfumon.api.crud.counters import Increments
from mfumon.api.metrics._text import labels_text
from mfumon.api.pricing import PriceList
from mfumon.api.state.aggregate import gpu_state, node_gpu_states, reporting_jobs
from mfumon.api.state.energy import FleetDraw, node_draw
from mfumon.api.state.store import Snapshot

JOB_ENERGY = "mfumon_job_energy_joules_total"
JOB_ENERGY_ESTIMATED = "mfumon_job_energy_estimated_joules_total"
JOB_COST = "mfumon_job_cost_total"
JOB_UNPRICED = "mfumon_job_unpriced_gpu_seconds_total"
#: Per-job GPU-seconds by the hour, for the chargeback's job rows; not exported (``mfumon_job_gpu_seconds_total``
#: is the job's waterfall, from its ledger).
JOB_GPU_SECONDS = "mfumon_job_charged_gpu_seconds_total"
JOB_TOKENS = "mfumon_job_tokens_total"
JOB_REQUESTS = "mfumon_job_requests_total"
#: Cost categories of energy, by the energy category they price.
ENERGY_COST_CATEGORY = {"job": "energy", "idle": "idle_energy", "unreported": "unreported_energy"}


def energy_family(scope: str) -> str:
    return f"mfumon_{scope}_energy_joules_total"


def cost_family(scope: str) -> str:
    return f"mfumon_{scope}_cost_total"


def unpriced_family(scope: str) -> str:
    return f"mfumon_{scope}_unpriced_gpu_seconds_total"


def tokens_family(scope: str) -> str:
    return f"mfumon_{scope}_tokens_total"


def job_labels(job_id: str, kind: str) -> str:
    return labels_text([("job_id", job_id), ("kind", kind)])


@dataclass(slots=True)
class StatePrice:
    """The GPUs of one scope and state now: how many, their summed price per second, and how many nothing prices."""

    gpus: int = 0
    per_second: float = 0.0
    unpriced_gpus: int = 0


def fleet_draw(snapshot: Snapshot) -> FleetDraw:
    """The fleet's power now, split by reporting job and by scope and state (:func:`node_draw`)."""
    reporting = reporting_jobs(snapshot)
    kinds = {job.job_id: job.kind for job in snapshot.jobs}
    out = FleetDraw()
    pools_of = snapshot.pools.of
    for node in snapshot.nodes:
        node_draw(out, node, tuple(pools_of(node)), kinds, reporting)
    return out.settle()


def state_prices(snapshot: Snapshot, prices: PriceList) -> dict[tuple[str | None, str], StatePrice]:
    """Idle and unreported GPUs now, per scope (pool; None for the cluster) and state, priced by pool, then device,
    then default: what their GPU-seconds cost, since no job's ledger bills them. A node of one device (every node
    we know of) is priced once; a node of several, GPU by GPU."""
    reporting = reporting_jobs(snapshot)
    out: dict[tuple[str | None, str], StatePrice] = {}
    pools_of = snapshot.pools.of
    memo: dict[tuple[tuple[str, ...], str | None], float | None] = {}

    def add(pools: tuple[str, ...], device: str | None, state: str, gpus: int) -> None:
        key = (pools, device)
        price = memo[key] if key in memo else memo.setdefault(key, prices.gpu_second(pools, device))
        for scope in (None, *pools):
            held = out.setdefault((scope, state), StatePrice())
            held.gpus += gpus
            if price is None:
                held.unpriced_gpus += gpus
            else:
                held.per_second += price * gpus

    out[(None, "idle")], out[(None, "unreported")] = StatePrice(), StatePrice()  # the cluster's, even when none
    for node in snapshot.nodes:
        pools = tuple(pools_of(node))
        if node.device is not None or all(gpu.device is None for gpu in node.gpus):
            states = node_gpu_states(node, reporting)
            for state in ("idle", "unreported"):
                if states[state]:
                    add(pools, node.device, state, states[state])
            continue
        for gpu in node.gpus:
            state = gpu_state(gpu, reporting)
            if state in ("idle", "unreported"):
                add(pools, gpu.device, state, 1)
    return out


def state_counts(priced: dict[tuple[str | None, str], StatePrice]) -> dict[str | None, tuple[int, int]]:
    """Idle and unreported GPUs per pool (None: the cluster), as :func:`~mfumon.api.state.aggregate.summarize`
    counts them, from :func:`state_prices`' one pass: the billing's count, without the rest of a summary."""
    scopes = {scope for scope, _ in priced}
    count = lambda scope, state: held.gpus if (held := priced.get((scope, state))) else 0  # noqa: E731
    return {scope: (count(scope, "idle"), count(scope, "unreported")) for scope in scopes}


def _scope_labels(pool: str | None) -> tuple[str, list[tuple[str, str]]]:
    return ("cluster", []) if pool is None else ("pool", [("pool", pool)])


def state_cost_increments(
    increments: Increments, priced: dict[tuple[str | None, str], StatePrice], seconds: float
) -> None:
    """The idle and unreported GPU-seconds' cost (or unpriced seconds) over ``seconds``."""
    for (pool, category), held in priced.items():
        scope, labels = _scope_labels(pool)
        key = labels_text([*labels, ("category", category)])
        increments[(cost_family(scope), key)] += held.per_second * seconds
        increments[(unpriced_family(scope), key)] += held.unpriced_gpus * seconds


def energy_increments(
    increments: Increments, draw: FleetDraw, teams: dict[str, str | None], prices: PriceList, seconds: float
) -> None:
    """The energy of ``seconds`` at the power drawn now: per job (and its team), per pool and the cluster by
    category; with a kWh price, its cost in the same scopes."""
    per_joule = prices.per_joule
    for (job_id, kind), held in draw.jobs.items():
        joules = held.watts * seconds
        own = job_labels(job_id, kind)
        increments[(JOB_ENERGY, own)] += joules
        increments[(JOB_ENERGY_ESTIMATED, own)] += held.estimated_watts * seconds
        team = teams.get(job_id)
        if team:
            increments[(energy_family("team"), labels_text([("team", team), ("category", "job")]))] += joules
        if per_joule is not None:
            increments[(JOB_COST, own)] += joules * per_joule
            if team:
                key = labels_text([("team", team), ("category", "energy")])
                increments[(cost_family("team"), key)] += joules * per_joule
    for (pool, category), held in draw.scopes.items():
        scope, labels = _scope_labels(pool)
        joules = held.watts * seconds
        increments[(energy_family(scope), labels_text([*labels, ("category", category)]))] += joules
        if per_joule is not None:
            key = labels_text([*labels, ("category", ENERGY_COST_CATEGORY[category])])
            increments[(cost_family(scope), key)] += joules * per_joule
