"""Job event bodies: ``POST /v1/jobs/{job_id}/events`` (the wire contract of ``../shared/interface.md``)."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mfumon.api.schemas._common import CLOCK_SKEW_RULE, ExitCode, Number, Step, Timestamp, null

EventType = Literal["init", "checkpoint_save", "checkpoint_load", "eval", "restart", "failure"]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)

#: A week: longer than any start-up, checkpoint or evaluation; a larger figure is a unit mistake (ms for s).
MAX_EVENT_SECONDS = 7 * 86400.0


class JobEventCreate(BaseModel):
    """One lifecycle event of a job: how long it took (``seconds``), at which ``step``, when (``timestamp``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={  # exit_code belongs to a failure
            "anyOf": [{"properties": {"type": {"const": "failure"}}}, null("exit_code")],
        },
    )

    type: EventType
    seconds: Annotated[Number, Field(ge=0, le=MAX_EVENT_SECONDS)] | None = None
    step: Step | None = None
    timestamp: Timestamp | None = Field(None, description=CLOCK_SKEW_RULE)
    exit_code: ExitCode | None = None

    @model_validator(mode="after")
    def _exit_code_only_on_failure(self) -> JobEventCreate:
        if self.exit_code is not None and self.type != "failure":
            raise ValueError("exit_code belongs to a 'failure' event only")
        return self


class JobEventResult(BaseModel):
    """What the event did to the job."""

    job_id: str
    type: str
    status: str
    restarts: int
    failures: int
    restarted: bool = Field(description="true when this event started a new attempt (an ended job came back)")


class JobEventPublic(BaseModel):
    """One stored event, as ``GET /v1/jobs/{job_id}/events`` lists it."""

    type: str
    seconds: float | None
    step: int | None
    timestamp: float | None
    received_at: float
    exit_code: int | None
    attempt: int
    inferred: str | None


class JobEventsPublic(BaseModel):
    data: list[JobEventPublic]
    count: int
