"""``POST /v1/remediations`` (``mfumon remediate``'s audit) and ``GET /v1/remediations``: what the loop did to a node
through the scheduler, would have done (dry run), or was stopped from doing by a safety rail, and why."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from mfumon.api.schemas._common import CLOCK_SKEW_RULE, ID_PATTERN, Label, Text, Timestamp, Whole

RemediationAction = Literal["drain", "resume", "cordon", "uncordon"]
RemediationOutcome = Literal["done", "failed", "dry_run", "withheld"]
REMEDIATION_OUTCOMES: tuple[str, ...] = get_args(RemediationOutcome)
#: A reason is a label value of ``mfumon_remediation_actions_total``: check names, ``healthy``, or a rail's name.
REASON_PATTERN = r"^[A-Za-z0-9_.,:-]{1,128}$"
MAX_CHECKS = 32
MAX_POOLS = 64

NodeName = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Reason = Annotated[str, StringConstraints(pattern=REASON_PATTERN)]
CheckName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]


class RemediationCreate(BaseModel):
    """One decision of ``mfumon remediate``. ``reason`` is the failing checks (a drain or cordon), ``healthy`` (a
    resume or uncordon), or, for a ``withheld`` one, the rail that stopped it: ``kill_switch``, ``not_ours``,
    ``not_in_scheduler``, ``rate_limit``, ``budget_pool``, ``budget_cluster``."""

    model_config = ConfigDict(extra="forbid")

    node: NodeName
    scheduler: Literal["slurm", "kubernetes"]
    action: RemediationAction
    reason: Reason
    outcome: RemediationOutcome = Field(description="done, failed (after retries), dry_run, or withheld by a rail")
    checks: list[CheckName] = Field(default_factory=list, max_length=MAX_CHECKS)
    pools: list[Label] = Field(default_factory=list, max_length=MAX_POOLS)
    detail: Annotated[str, Text(1000)] | None = None
    actor: Label | None = Field(None, description="which copy of the loop (host:pid)")
    attempts: Annotated[int, Whole(0, 100)] = 0
    timestamp: Timestamp = Field(description=CLOCK_SKEW_RULE)
    failing_since: Timestamp | None = Field(
        None,
        description="a drain or cordon: since when the loop saw the node on the drain list (its clock); at most "
        "`timestamp` (422). The node's jobs' GPU-hours from then to the drain are counted as lost before it",
    )

    @model_validator(mode="after")
    def _since_before(self) -> RemediationCreate:
        if self.failing_since is not None and self.failing_since > self.timestamp:
            raise ValueError("failing_since must not be after timestamp")
        return self


class RemediationPublic(BaseModel):
    """A stored decision. Repeats of a ``dry_run`` or ``withheld`` one (the same node, action, reason and outcome,
    every round while it lasts) are one row whose ``repeats`` grows and ``last_at`` moves."""

    id: int
    node: str
    scheduler: str
    action: str
    reason: str
    outcome: str
    checks: list[str]
    pools: list[str]
    detail: str | None
    actor: str | None
    recorded_by: str = Field(description="the name of the token that recorded it")
    attempts: int
    first_at: float = Field(description="Unix seconds, the loop's clock: when it first decided this")
    last_at: float
    repeats: int
    failing_since: float | None = Field(None, description="a drain: since when the node was on the drain list")
    gpus: int | None = Field(None, description="a drain: the node's GPUs when it was recorded (None: node unknown)")
    gpus_busy: int | None = Field(None, description="a drain: of those, GPUs running jobs when it was recorded")
    resumed_at: float | None = Field(
        None,
        description="a done drain or cordon: when the loop's resume (uncordon) of the node was done; None while "
        "it is out",
    )
    jobs_gpu_hours_before_drain: float | None = Field(
        None,
        description="GPU-hours of the node's jobs between `failing_since` and the drain: stalled or lost to the "
        "fault before the loop acted (gpus_busy x time); what a slower reaction would have wasted more of",
    )
    drained_gpu_hours: float | None = Field(
        None,
        description="a done drain or cordon: GPU-hours the node was kept out of scheduling (gpus x time to "
        "`resumed_at`, or to now while out): capacity the loop took, which jobs would otherwise have been placed "
        "on a failing node",
    )


class RemediationsPublic(BaseModel):
    data: list[RemediationPublic]
    count: int = Field(description="Records in this answer, newest first.")
