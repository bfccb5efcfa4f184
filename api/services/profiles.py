"""On-demand profiles, end to end: ask a job, tell it in its report's answer, keep its ranks' summaries.

A profile is asked (``requested``), told to the job in the answer to its next report (``running``; told again in
every answer until a rank answers, since an answer can be lost), and ``done`` once the first rank's summary arrives;
later ranks add theirs. One profile at a time per job; one nobody answers within `REQUEST_TTL_SECONDS` is ``expired``
and a new one may be asked. The job's latest figures (`ProfileFigures`) go on its row for metrics and diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from mfumon.api.context import AppContext
from mfumon.api.core.security import ANONYMOUS, Principal
from mfumon.api.crud import jobs as job_crud
from mfumon.api.crud import profiles as crud
from mfumon.api.db.tables import JobProfileRow, JobRow
from mfumon.api.errors import ConflictError, InputError, NotFoundError
from mfumon.api.schemas.profiles import (
    ProfileGroupPublic,
    ProfilePublic,
    ProfileRequestCreate,
    ProfileRequestNotice,
    ProfileSummaryCreate,
)
from mfumon.api.state.profiles import ProfileFigures, combine
from mfumon.api.state.refresh import job_view

REQUEST_TTL_SECONDS = 1800.0
"""A profile no rank answered within this long is given up (the job may have stopped stepping, or runs no reporter
that can profile); another may then be asked."""
MAX_RANK_SUMMARIES = 4096
"""Summaries kept per profile (a few kB each): 'all' on a very large job keeps the first ranks that answer."""


def request_profile(
    ctx: AppContext, job_id: str, body: ProfileRequestCreate, principal: Principal = ANONYMOUS
) -> JobProfileRow:
    """Ask a running job for a profile of its next ``steps`` steps; ConflictError while one is open."""
    now = ctx.clock()
    with ctx.sessions.begin() as session:
        job = job_crud.read_job(session=session, job_id=job_id, for_update=True)
        if job is None:
            raise NotFoundError(f"job {job_id!r} not found")
        principal.job_team(job_id, None, job.team, exists=True)
        if job.status != "running":
            raise ConflictError(f"job {job_id!r} is {job.status}: only a running job can be profiled")
        _expire_stale(session, job_id, now)
        if (open_row := crud.open_profile(session=session, job_id=job_id)) is not None:
            raise ConflictError(
                f"job {job_id!r} already has profile {open_row.id} {open_row.status}: one profile at a time per job"
            )
        row = crud.add_profile(
            session=session,
            job_id=job_id,
            status="requested",
            requested_at=now,
            steps=body.steps,
            ranks=body.ranks,
            requested_by=principal.name,
        )
    return row


def notice_for(session: Session, job_id: str, now: float) -> ProfileRequestNotice | None:
    """The open profile to tell the job in its report's answer (marking it told), or None."""
    _expire_stale(session, job_id, now)
    row = crud.open_profile(session=session, job_id=job_id)
    if row is None or row.steps is None:
        return None
    if row.status == "requested":
        row.status, row.delivered_at = "running", now
    return ProfileRequestNotice(id=row.id, steps=row.steps, ranks=row.ranks)


def record_summary(
    ctx: AppContext, job_id: str, body: ProfileSummaryCreate, principal: Principal = ANONYMOUS
) -> JobProfileRow:
    """Keep one rank's summary; the profile it answers is done, and the job's figures are recomputed."""
    _check_consistent(body)
    now = ctx.clock()
    with ctx.sessions.begin() as session:
        job = job_crud.read_job(session=session, job_id=job_id, for_update=True)
        if job is None:
            raise NotFoundError(f"job {job_id!r} not found")
        principal.job_team(job_id, None, job.team, exists=True)
        if body.profile_id is None:
            row = crud.add_profile(session=session, job_id=job_id, status="done", requested_at=now)
        elif (found := crud.read_profile(session=session, job_id=job_id, profile_id=body.profile_id)) is None:
            raise NotFoundError(f"job {job_id!r} has no profile {body.profile_id}")
        else:
            row = found
        summary = body.model_dump(mode="json", exclude={"profile_id"})
        others = [s for s in row.summaries if s.get("rank") != body.rank]
        if len(others) >= MAX_RANK_SUMMARIES:
            raise ConflictError(f"profile {row.id} already holds {MAX_RANK_SUMMARIES} ranks' summaries")
        row.summaries = sorted([*others, summary], key=lambda s: int(s["rank"]))
        row.status = "done"
        row.completed_at = row.completed_at or now
        figures = combine(row.id, body.captured_at or now, row.summaries)
        _keep_latest(job, figures, now)
    ctx.state.apply_job(job_view(job))
    return row


def _keep_latest(job: JobRow, figures: ProfileFigures | None, now: float) -> None:
    """The job row holds its newest profile's figures (a late rank of an older profile changes nothing)."""
    held = ProfileFigures.from_json(job.profile)
    if figures is None or (held is not None and held.profile_id > figures.profile_id):
        return
    job.profile = figures.as_json()
    job.updated_at = now


def read_profiles(ctx: AppContext, job_id: str, *, limit: int) -> Sequence[ProfilePublic]:
    """A job's ``limit`` latest profiles, newest first; NotFoundError for an unknown job."""
    with ctx.sessions() as session:
        if job_crud.read_job(session=session, job_id=job_id) is None:
            raise NotFoundError(f"job {job_id!r} not found")
        return [public(row) for row in crud.read_profiles(session=session, job_id=job_id, limit=limit)]


def public(row: JobProfileRow) -> ProfilePublic:
    figures = combine(row.id, row.completed_at or row.requested_at, row.summaries)
    return ProfilePublic(
        id=row.id,
        job_id=row.job_id,
        status=row.status,
        steps=row.steps,
        ranks=row.ranks,
        requested_by=row.requested_by,
        requested_at=row.requested_at,
        delivered_at=row.delivered_at,
        completed_at=row.completed_at,
        ranks_reported=[int(s["rank"]) for s in row.summaries],
        comm_ratio=None if figures is None else figures.comm_ratio,
        exposed_comm_ratio=None if figures is None else figures.exposed_comm_ratio,
        idle_ratio=None if figures is None else figures.idle_ratio,
        tensor_core_ratio=None if figures is None else figures.tensor_core_ratio,
        groups=[]
        if figures is None
        else [
            ProfileGroupPublic(group=g.group, comm_ratio=g.comm_ratio, exposed_comm_ratio=g.exposed_comm_ratio)
            for g in figures.groups
        ],
        summaries=list(row.summaries),
    )


def _expire_stale(session: Session, job_id: str, now: float) -> None:
    row = crud.open_profile(session=session, job_id=job_id)
    if row is not None and now - row.requested_at > REQUEST_TTL_SECONDS:
        row.status = "expired"


def _check_consistent(body: ProfileSummaryCreate) -> None:
    """Parts never exceed their whole: a summary that says otherwise was not made by a summariser."""
    span = body.span_seconds
    checks: list[tuple[str, float, float]] = [
        ("compute_seconds", body.compute_seconds, span),
        ("comm_seconds", body.comm_seconds, span),
        ("idle_seconds", body.idle_seconds, span),
        ("exposed_comm_seconds", body.exposed_comm_seconds, body.comm_seconds),
    ]
    checks += [(f"groups[{i}].exposed_seconds", g.exposed_seconds, g.comm_seconds) for i, g in enumerate(body.groups)]
    checks += [(f"groups[{i}].comm_seconds", g.comm_seconds, span) for i, g in enumerate(body.groups)]
    for field, part, whole in checks:
        if part > whole * (1 + 1e-6) + 1e-9:
            raise InputError(field, f"{field} ({part:g}) exceeds its whole ({whole:g})")
    groups = [g.group for g in body.groups]
    if len(set(groups)) != len(groups):
        raise InputError("groups", "each group at most once")
