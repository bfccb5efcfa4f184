"""What the GPU-hours cost and the energy they drew (issue 60), over the dashboard's range: the "Cost and energy" row
of the GPU-hours board.

The aggregator bills cost, unpriced GPU-seconds, energy and tokens into durable counters (``mfumon_*_cost_total``,
``..._unpriced_gpu_seconds_total``, ``..._energy_joules_total``, ``..._tokens_total``: database-backed, they never
reset), so, like the waterfall beside them, every figure is their growth over the range read with
:func:`window_increase`, alike in PromQL and MetricsQL, never ``increase()`` or ``rate()``; each series is collapsed
with ``max by`` (replicas export the same values) before it is summed. Costs are in the price list's currency
(``mfumon_prices_info{currency}``); GPU-hours no price covers are counted apart as unpriced, never as a cost of 0.
Without a price list every panel here is empty; ``GET /v1/chargeback`` gives the same amounts per team and job.
"""

from __future__ import annotations

from _panels import JOB_LINK, Panel, bargauge, row, stat, table, target, timeseries
from _window import window_increase

POOL = 'pool=~"$pool"'
TEAM = 'team=~"$team"'
JOULES_PER_KWH = "3.6e6"
COST_DECIMALS = 2


def growth(family: str, by: str, selector: str = "", window: str = "$__range") -> str:
    """The durable counter ``family``'s growth over ``window`` per ``by`` labels, replicas collapsed."""
    return f"max by ({by}) ({window_increase(f'{family}{{{selector}}}', window)})"


def total(family: str, group: str = "", selector: str = "", *, categories: bool = True) -> str:
    """``family``'s growth over the range summed over its categories, per ``group`` (a label, or the cluster)."""
    by = ", ".join(label for label in (group, "category" if categories else "") if label)
    if not by:  # the cluster's tokens: one series (a bare `max` is kept apart per cluster by the scoping)
        return f"max({window_increase(f'{family}{{{selector}}}', '$__range')})"
    summed = growth(family, by, selector)
    return f"sum by ({group}) ({summed})" if group else f"sum({summed})"


def per_million_tokens(scope: str, group: str = "", selector: str = "") -> str:
    """Cost over the range ÷ the tokens of the range x 1e6 (a scope with no tokens in it shows none)."""
    cost = total(f"mfumon_{scope}_cost_total", group, selector)
    tokens = total(f"mfumon_{scope}_tokens_total", group, selector, categories=False)
    return f"{cost} / ({tokens} > 0) * 1e6"


def cost_energy_panels() -> list[Panel]:
    """The fleet's cost and energy over the range, per pool and team, unpriced GPU-hours, and per token."""
    cluster_cost = "mfumon_cluster_cost_total"
    cluster_energy = "mfumon_cluster_energy_joules_total"
    top_jobs = "topk(10, max by (job_id, kind) (mfumon_job_joules_per_token))"
    return [
        row("Cost and energy over the chosen range"),
        stat(
            "Cost",
            target(total(cluster_cost), instant=True),
            decimals=COST_DECIMALS,
            description="What the fleet's GPU-hours (jobs', idle and unreported) and their energy cost over the range, "
            "in the price list's currency, at the prices in effect when each was billed. Unpriced GPU-hours are not "
            "in it (see beside). Per team and job: GET /v1/chargeback, /ui/chargeback.",
        ),
        stat(
            "Currency",
            target("max by (currency) (mfumon_prices_info)", "{{currency}}", instant=True),
            description="The price list's currency (GET /v1/prices). No data: no price list is in effect "
            "(MFUMON_PRICES_FILE, PUT /v1/prices), so nothing on this row is priced.",
        )
        | {"options": _name_only()},
        stat(
            "Unpriced GPU-hours",
            target(f"{total('mfumon_cluster_unpriced_gpu_seconds_total')} / 3600", instant=True),
            decimals=1,
            thresholds=[(None, "green"), (0.01, "orange")],
            description="GPU-hours no price covers (no pool, device or default price for them): left out of the cost, "
            "never counted as 0. No data: none ever was.",
        ),
        stat(
            "Energy",
            target(f"{total(cluster_energy)} / {JOULES_PER_KWH}", instant=True),
            unit="kwatth",
            decimals=1,
            description="Energy the GPUs drew over the range (jobs', idle and unreported), before PUE.",
        ),
        stat(
            "Cost per million tokens",
            target(per_million_tokens("cluster"), instant=True),
            decimals=COST_DECIMALS,
            description="The fleet's whole cost (idle and unreported GPUs included) ÷ the tokens of every job "
            "(training: processed; serving: output), x 1e6.",
        ),
        stat(
            "Energy per token",
            target(
                f"{total(cluster_energy)} / ({total('mfumon_cluster_tokens_total', categories=False)} > 0)",
                instant=True,
            ),
            unit="joule",
            decimals=3,
            description="The fleet's energy (idle and unreported GPUs included) ÷ the tokens of every job.",
        ),
        table(
            "Cost by category",
            [target(growth(cluster_cost, "category"), instant=True, table=True)],
            renames={"Value": "cost"},
            units={"cost": "none"},
            sort_by="category",
            width=6,
            height=10,
            description="The waterfall's categories at the GPU-hour price, idle and unreported GPUs, and energy "
            "(jobs', idle, unreported) at the kWh price x PUE.",
        ),
        timeseries(
            "Cost per hour by category",
            [target(growth(cluster_cost, "category", window="1h"), "{{category}}")],
            stack=True,
            width=18,
            height=10,
            description="Each category's cost over the hour before each point (the counters' growth, not a rate).",
        ),
        _scope_table(
            "pool",
            POOL,
            "A pool's GPU-hours (its jobs', idle and unreported) and energy at its price. Unpriced GPU-hours: no pool, "
            "device or default price covers them; they are not in the cost.",
        ),
        _scope_table(
            "team",
            TEAM,
            "The team's jobs: their GPU-hours by the waterfall and their energy. Idle and unreported GPUs are no "
            "team's (GET /v1/chargeback lists them, and jobs without a team, so the rows add up to the fleet).",
        ),
        bargauge(
            "Unpriced GPU-hours by pool",
            target(f"{total('mfumon_pool_unpriced_gpu_seconds_total', 'pool', POOL)} / 3600", "{{pool}}", instant=True),
            description="Pools with GPU-hours no price covers: add a price for the pool or its device "
            "(PUT /v1/prices). Only pools that ever had some are listed.",
        ),
        bargauge(
            "Energy by category",
            target(f"{growth(cluster_energy, 'category')} / {JOULES_PER_KWH}", "{{category}}", instant=True),
            unit="kwatth",
            description="Energy the GPUs drew: by their jobs (a shared GPU by share), busy without reports, idle.",
        ),
        bargauge(
            "Cost per million tokens by team",
            target(per_million_tokens("team", "team", TEAM), "{{team}}", instant=True),
            description="The team's cost (GPU-hours and energy) ÷ its jobs' tokens (training: processed; serving: "
            "output) x 1e6; teams without tokens in the range are left out.",
        ),
        table(
            "Energy per token by job (top 10)",
            [
                target(top_jobs, instant=True, table=True, ref="A"),
                target(
                    "max by (job_id, kind) (mfumon_job_cost_total) / (max by (job_id, kind) (mfumon_job_tokens_total) "
                    f"> 0) * 1e6 and on (job_id, kind) {top_jobs}",
                    instant=True,
                    table=True,
                    ref="B",
                ),
            ],
            renames={"Value #A": "J/token", "Value #B": "cost per 1M tokens"},
            units={"J/token": "joule"},
            links={"job_id": ("Job drill-down", JOB_LINK)},
            sort_by="J/token",
            description="The visible jobs that drew most energy per token since they started (serving: per output "
            "token). Energy is measured from the GPUs' energy counters, or estimated from power samples where a GPU "
            "has none (see the job's JSON: energy_estimated_joules).",
            height=10,
        ),
    ]


def _scope_table(scope: str, selector: str, description: str) -> Panel:
    """Cost, GPU-hours, unpriced GPU-hours and kWh of each pool or team over the range."""
    family = lambda name: total(f"mfumon_{scope}_{name}", scope, selector)  # noqa: E731
    columns = [
        ("cost", family("cost_total")),
        ("GPU-hours", f"{family('gpu_seconds_total')} / 3600"),
        ("unpriced GPU-hours", f"{family('unpriced_gpu_seconds_total')} / 3600"),
        ("kWh", f"{family('energy_joules_total')} / {JOULES_PER_KWH}"),
    ]
    refs = "ABCD"
    return table(
        f"Cost by {scope}",
        [target(expr, instant=True, table=True, ref=ref) for ref, (_, expr) in zip(refs, columns, strict=True)],
        renames={f"Value #{ref}": name for ref, (name, _) in zip(refs, columns, strict=True)},
        sort_by=scope,
        width=12,
        description=description,
    )


def _name_only() -> dict[str, object]:
    """A stat that shows its series' name (the legend) instead of its value."""
    return {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "value",
        "graphMode": "none",
        "textMode": "name",
    }
