"""Jobs silent past the job TTL end as ``expired``: counted once, whichever replica's sweep finds them first."""

from __future__ import annotations

import logging

from mfumon.api.context import AppContext
from mfumon.api.crud import jobs as crud
from mfumon.api.crud.counters import CounterValue, add_to_counters, shard_of
from mfumon.api.services import lifecycle
from mfumon.api.state.refresh import job_view

logger = logging.getLogger(__name__)

BATCH = 500


def expire_silent_jobs(ctx: AppContext) -> int:
    """End every running job silent for longer than ``JOB_TTL_SECONDS``; returns how many ended."""
    now = ctx.clock()
    silent_since = now - ctx.settings.JOB_TTL_SECONDS
    ended = 0
    while True:
        rows: list[CounterValue] = []
        with ctx.sessions.begin() as session:
            jobs = crud.read_silent_jobs(session=session, silent_since=silent_since, limit=BATCH)
            for job in jobs:
                increments = lifecycle.Increments()
                lifecycle.end(job, now, increments, exit_code=None, outcome="expired")
                job.updated_at = now
                rows += add_to_counters(session, increments, shard=shard_of(job.job_id), now=now)
        for job in jobs:
            ctx.state.apply_job(job_view(job))
        ctx.state.counters.apply(rows)
        ended += len(jobs)
        if len(jobs) < BATCH:
            break
    if ended:
        logger.info("ended %d job(s) silent for more than %gs as expired", ended, ctx.settings.JOB_TTL_SECONDS)
    return ended
