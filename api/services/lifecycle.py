"""A job's lifecycle on its locked row: activity, restarts (announced or inferred), failures and the end.

Rules (README, "Job events"):
- Anything but a ``failure`` reaching an ended job starts a new attempt: an explicit, counted restart, recorded as
  an inferred ``restart`` event; the job is running again and its end fields are cleared.
- A ``restart`` event always counts one restart; a report whose ``step`` goes back (a new process counting from
  the start, or a run resumed from a checkpoint) while the job runs counts one too, recorded as inferred.
- A ``failure`` counts once per attempt; an end with a non-zero exit code counts as the attempt's failure unless
  a ``failure`` event already did. The end's outcome is ``success`` (exit 0), ``failure`` (non-zero, or a failure
  reported and no exit code), ``unknown`` (no exit code), or ``expired`` (silent past the job TTL).

Every function here runs inside the caller's transaction with the job row locked, and returns the durable-counter
increments to write in that same transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mfumon.api.accounting import Ledger
from mfumon.api.crud import events as event_crud
from mfumon.api.crud.counters import Increments
from mfumon.api.db.tables import JobRow
from mfumon.api.metrics._text import labels_text
from mfumon.api.services import accounting

ENDS_TOTAL = "mfumon_job_ends_total"
EVENTS_TOTAL = "mfumon_job_events_total"


def _accounting(job: JobRow) -> dict[str, Any]:
    return dict(job.accounting or {})


def count_event(increments: Increments, job: JobRow, event_type: str) -> None:
    increments[(EVENTS_TOTAL, labels_text([("kind", job.kind), ("type", event_type)]))] += 1


def restart(session: Session, job: JobRow, now: float, increments: Increments, *, inferred: str | None) -> None:
    """Begin a new attempt of ``job``: count it, reopen it if it had ended, forget the last attempt's step mark.

    A restart with no failure seen before it (a running job that came back, or one that expired) lost the progress
    since its last checkpoint all the same: the ledger charges it; after a clean end (success, or an end without an
    exit code) nothing was lost.
    """
    job.restarts += 1
    ledger = accounting.ledger_of(job)
    if not (job.accounting or {}).get("failure_pending") and job.outcome in (None, "expired"):
        ledger.failed()
    if job.status != "ended":  # the last attempt ends here: its silence since the last report is stalled
        accounting.bill_job(job, ledger, ledger.close(now, gpus=job.num_gpus), increments)
    accounting.store_ledger(job, ledger)
    acct = _accounting(job)
    acct["failure_pending"] = False
    acct["step_mark"] = None
    job.accounting = acct
    if job.status == "ended":
        job.ended_at = job.exit_code = job.outcome = None
        job.summary = None
    job.status = "running"
    job.started_at = job.started_at or now
    if inferred is not None:
        event_crud.add_event(
            session=session, job_id=job.job_id, type="restart", received_at=now, attempt=job.restarts, inferred=inferred
        )
        count_event(increments, job, "restart")


def note_activity(
    session: Session, job: JobRow, now: float, increments: Increments, *, what: str, step: int | None = None
) -> bool:
    """A report or a non-failure event arrived: reopen an ended job, infer a restart from a step that went back.

    Returns True when this activity started a new attempt.
    """
    restarted = False
    if job.status == "ended":
        restart(session, job, now, increments, inferred=f"{what} after the job had ended")
        restarted = True
    elif step is not None:
        mark = (job.accounting or {}).get("step_mark")
        if mark is not None and step < mark:
            restart(session, job, now, increments, inferred=f"{what} step went back from {mark} to {step}")
            restarted = True
    if step is not None:
        acct = _accounting(job)
        acct["step_mark"] = max(step, acct.get("step_mark") or 0) if not restarted else step
        job.accounting = acct
    if job.status == "pending":
        job.status = "running"
    job.started_at = job.started_at or now
    return restarted


def record_failure(job: JobRow, exit_code: int | None) -> None:
    """A failure of the current attempt; counted once per attempt, its progress since the last checkpoint lost."""
    if not (job.accounting or {}).get("failure_pending"):
        job.failures += 1
        ledger = accounting.ledger_of(job)
        ledger.failed()
        accounting.store_ledger(job, ledger)
    acct = _accounting(job)
    acct["failure_pending"] = True
    if exit_code is not None:
        acct["failure_exit_code"] = exit_code
    job.accounting = acct


def outcome_of(job: JobRow, exit_code: int | None) -> tuple[str, int | None]:
    """The end's outcome and the exit code to store (a reported failure's code when the end gives none)."""
    acct = job.accounting or {}
    if exit_code is None and acct.get("failure_pending"):
        return "failure", acct.get("failure_exit_code")
    if exit_code is None:
        return "unknown", None
    return ("success" if exit_code == 0 else "failure"), exit_code


def end(
    job: JobRow,
    now: float,
    increments: Increments,
    *,
    exit_code: int | None,
    outcome: str | None = None,
) -> None:
    """End the job's current attempt: close its ledger (the silence since its last report is stalled, up to the
    job TTL), count the end by kind and outcome, and freeze its summary. An ended job is left as it is."""
    if job.status == "ended":
        return
    resolved, code = outcome_of(job, exit_code)
    outcome = outcome or resolved
    if outcome == "failure":
        record_failure(job, code)
    ledger = accounting.ledger_of(job)
    bill = ledger.close(now, gpus=job.num_gpus)
    accounting.bill_job(job, ledger, bill, increments)
    job.status = "ended"
    job.ended_at = now
    job.exit_code = code
    job.outcome = outcome
    increments[(ENDS_TOTAL, labels_text([("kind", job.kind), ("outcome", outcome)]))] += 1
    job.summary = accounting.summary_of(job, Ledger.from_json(job.accounting))
