"""Diagnosis route: why a job's MFU is what it is, the costliest cause first."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from mfumon.api.deps import ContextDep, JobIdPath
from mfumon.api.diagnosis import empty_reason
from mfumon.api.schemas.diagnosis import DiagnosisPublic, FindingPublic
from mfumon.api.schemas.jobs import WaterfallEntry
from mfumon.api.services.diagnosis import diagnose_job

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get("/{job_id}/diagnosis", response_model=DiagnosisPublic)
def read_diagnosis(job_id: JobIdPath, ctx: ContextDep) -> DiagnosisPublic:
    """A job's waterfall and the causes of its lost GPU-seconds, ranked by GPU-seconds at stake, or why none."""
    result = diagnose_job(ctx, job_id)
    if result is None:
        raise HTTPException(status_code=404, detail=f"job {job_id!r} not found")
    facts, findings = result
    code, reason = empty_reason(facts) if not findings else (None, None)
    return DiagnosisPublic(
        job_id=facts.job_id,
        status=facts.status,
        total_gpu_seconds=facts.total,
        waterfall=[WaterfallEntry(category=c, gpu_seconds=s) for c, s in facts.gpu_seconds.items()],
        goodput_ratio=facts.goodput,
        lifetime_mfu=facts.lifetime_mfu,
        compute_mfu=facts.compute_mfu,
        findings=[
            FindingPublic(
                cause=f.cause,
                gpu_seconds=f.gpu_seconds,
                share_of_allocated=facts.share(f.gpu_seconds) if facts.total > 0 else None,
                evidence=f.evidence,
                advice=f.advice,
            )
            for f in findings
        ],
        reports_received=facts.reports_received or 0,
        reason_code=code,
        reason=reason,
    )
