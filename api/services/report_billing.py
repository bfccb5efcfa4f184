"""The report's bill: the job's waterfall tile closed with it, added to the pool, team and cluster counters."""

from __future__ import annotations

from dataclasses import replace

from mfumon.api.accounting import STEP_CATEGORIES, Bill
from mfumon.api.context import AppContext
from mfumon.api.crud.counters import Increments
from mfumon.api.db.tables import JobRow
from mfumon.api.metrics._text import labels_text
from mfumon.api.services import accounting, lifecycle
from mfumon.api.services.accounting import scopes_of
from mfumon.api.services.fleet_billing import JOB_REQUESTS, JOB_TOKENS, job_labels, tokens_family
from mfumon.api.services.report_evaluation import ReportEvaluation
from mfumon.api.serving import ServingTile, split_tile
from mfumon.api.state.outcome import ReportOutcome
from mfumon.api.state.views import JobShare


def bill_report(
    ctx: AppContext,
    job: JobRow,
    evaluation: ReportEvaluation,
    increments: lifecycle.Increments,
    serving: ServingTile | None = None,
) -> None:
    """Close the job's waterfall tile with this report and add it to the pool, team and cluster counters.

    The pool is that of the nodes exporters attribute the job's GPUs to (the first by name; the job's own pool when
    those nodes are in it, as a scheduler's overlapping partitions make them), else the job's label.
    """
    outcome, shares = evaluation.outcome, evaluation.shares
    pools_of = ctx.state.pools(evaluation.now).of
    pools = sorted({pool for node, _ in shares for pool in pools_of(node)})
    pool = job.pool if job.pool in pools else (pools[0] if pools else job.pool)
    # Priced as billed: this tile, and the close of the attempt should no report follow, at the price in effect now.
    price = ctx.state.prices.gpu_second(pools or ([pool] if pool else []), outcome.device)
    job.accounting = {**(job.accounting or {}), "pool": pool, "price_per_gpu_second": price}
    ledger = accounting.ledger_of(job)
    known = outcome.mfu is not None
    gpus = allocated_gpus(outcome.num_gpus, [share for _, share in shares])
    bill = ledger.report(
        evaluation.now,
        gpus=gpus,
        covered_seconds=evaluation.covered_seconds,
        stalled=outcome.tokens_per_second == 0,
        split=evaluation.split,
        model_flops_per_second=outcome.model_flops_per_second if known else None,
        peak_flops_per_gpu=outcome.peak_flops_per_gpu if known else None,
        mfu=outcome.mfu,
        max_gap_seconds=ctx.settings.JOB_TTL_SECONDS,
    )
    if serving is not None:  # the same tile, as serving time (mfumon.api.serving.waterfall)
        tile = replace(
            serving,
            serving_gpu_seconds=sum(bill.gpu_seconds.get(c, 0.0) for c in STEP_CATEGORIES),
            stalled_gpu_seconds=bill.gpu_seconds.get("stalled", 0.0) if outcome.tokens_per_second == 0 else 0.0,
        )
        ledger.add_serving(split_tile(tile))
    count_work(increments, job, bill, outcome, allocated=gpus)
    if job.kind == "inference":
        ledger.checkpoint_saved()  # a request served stays served: a server's failure loses no work to redo
    accounting.bill_job(job, ledger, bill, increments)


def count_work(increments: Increments, job: JobRow, bill: Bill, outcome: ReportOutcome, *, allocated: float) -> None:
    """The tokens (and a server's requests) of the tile: the report's rate over the tile's step time, so that energy
    and cost per token divide like for like. Training counts every token processed; serving its output tokens
    (the decode phase's rate where the report has one) and requests."""
    if allocated <= 0:
        return
    seconds = sum(bill.gpu_seconds.get(c, 0.0) for c in STEP_CATEGORIES) / allocated
    rate, requests = outcome.tokens_per_second, None
    if job.kind == "inference":
        decode = outcome.inference.phase("decode").tokens_per_second if outcome.inference is not None else None
        rate = decode if decode is not None else rate
        requests = outcome.serving.requests_per_second if outcome.serving is not None else None
    labels = job_labels(job.job_id, job.kind)
    if rate:
        tokens = rate * seconds
        increments[(JOB_TOKENS, labels)] += tokens
        for scope, scope_labels in scopes_of((job.accounting or {}).get("pool"), job.team):
            increments[(tokens_family(scope), labels_text(scope_labels))] += tokens
    if requests:
        increments[(JOB_REQUESTS, labels)] += requests * seconds


def allocated_gpus(num_gpus: int | None, shares: list[JobShare]) -> float:
    """GPU-equivalents the waterfall bills for a tile: the job's GPUs, each shared one counted at the job's share
    of it (so two jobs on one GPU are billed one GPU-second per second between them, not two)."""
    if not num_gpus:
        return 0.0
    shared = sum(share.shared for share in shares)
    held = sum(share.gpu_share - share.count for share in shares)  # its share of the shared GPUs
    return max(0.0, num_gpus - shared + held)
