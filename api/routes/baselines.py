"""Baseline routes: list and read workload baselines, pin one, reset one (``mfumon.api.services.baselines``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Response

from mfumon.api.db.tables import BaselineRow
from mfumon.api.deps import BaselineWriter, ContextDep, SignaturePageDep
from mfumon.api.openapi import answer
from mfumon.api.route_table import route_spec
from mfumon.api.schemas.baselines import (
    SIGNATURE_MAX_LENGTH,
    SIGNATURE_PATTERN,
    SIGNATURE_RULE,
    BaselinePin,
    BaselinePublic,
    BaselinesPublic,
)
from mfumon.api.services import baselines

router = APIRouter(prefix="/v1/baselines", tags=["baselines"])

SignaturePath = Annotated[
    str, Path(pattern=SIGNATURE_PATTERN, max_length=SIGNATURE_MAX_LENGTH, description=SIGNATURE_RULE)
]


def public(row: BaselineRow) -> BaselinePublic:
    return BaselinePublic(
        signature=row.signature,
        kind=row.kind,
        model=row.model_key,
        device=row.gpu_model,
        scale=row.signature.rsplit("|", 2)[-2],
        dtype=row.dtype,
        mfu=row.mfu,
        tokens_per_second_per_gpu=row.tokens_per_second_per_gpu,
        num_gpus=row.num_gpus,
        source="reset" if row.mfu is None else "pinned" if row.pinned else "captured",
        source_job_id=row.source_job_id,
        captured_at=row.captured_at,
        updated_at=row.updated_at,
        captures=row.captures,
        previous_mfu=row.previous_mfu,
        pinned=row.pinned,
        pinned_by=row.pinned_by,
        pinned_at=row.pinned_at,
        note=row.note,
        reset_by=row.reset_by,
        reset_at=row.reset_at,
    )


@router.get("", response_model=BaselinesPublic)
def read_baselines(
    ctx: ContextDep,
    page: SignaturePageDep,
    pinned: Annotated[bool | None, Query(description="only pinned (true) or only captured (false) baselines")] = None,
    include_reset: Annotated[bool, Query(description="also signatures whose baseline was reset")] = False,
) -> BaselinesPublic:
    """Workload baselines in signature order, a page at a time: pass `next_cursor` back as `cursor`."""
    rows = baselines.read_baselines(ctx, limit=page.limit, after=page.after, pinned=pinned, include_reset=include_reset)
    data = [public(r) for r in rows]
    return BaselinesPublic(data=data, count=len(data), next_cursor=page.next_cursor([r.signature for r in rows]))


@router.get("/{signature:path}", response_model=BaselinePublic)
def read_baseline(signature: SignaturePath, ctx: ContextDep) -> BaselinePublic:
    """One signature's baseline (a reset one too, with who reset it)."""
    return public(baselines.read_baseline(ctx, signature))


@router.put(
    "/{signature:path}",
    response_model=BaselinePublic,
    responses=answer(409, "`job_id` runs another signature than the one pinned."),
)
@route_spec("baselines")
def pin_baseline(
    signature: SignaturePath, ctx: ContextDep, principal: BaselineWriter, body: BaselinePin | None = None
) -> BaselinePublic:
    """Pin a baseline: a job's recent window (`job_id`), an explicit `mfu`, or with an empty body the value held
    now. No automatic capture replaces a pin; another pin or a reset does."""
    return public(baselines.pin(ctx, signature, body or BaselinePin(), principal))


@router.delete("/{signature:path}", status_code=204, response_class=Response)
@route_spec("baselines")
def reset_baseline(signature: SignaturePath, ctx: ContextDep, principal: BaselineWriter) -> Response:
    """Reset a baseline, pinned or not: jobs of this signature have none until the next stable window captures."""
    if baselines.reset(ctx, signature, principal) is None:
        raise HTTPException(status_code=404, detail=f"no baseline for {signature!r}")
    return Response(status_code=204)
