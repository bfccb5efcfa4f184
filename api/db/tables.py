"""SQL tables. The schema itself is created and changed only by Alembic migrations in ``migrations/``.

Timestamps are Unix seconds (float): they compare the same way on SQLite and PostgreSQL and match the wire format.
``updated_at`` is what other replicas poll to pick up this row's changes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, SmallInteger, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ID_LENGTH = 128
LABEL_LENGTH = 128


class Base(DeclarativeBase):
    pass


class NodeRow(Base):
    """A GPU node, as last described by its exporter: one row holds the node's newest sample.

    ``sample`` is the body of that push as received (it was validated on the way in, and is validated again when
    read back, see ``mfumon.api.crud.nodes``): a push replaces the node's whole GPU list, so one row per node makes the
    write one conditional upsert and the read one row, whatever the number of GPUs. Counters absent from it are
    unsupported, not zero.
    """

    __tablename__ = "nodes"
    # Updated in place on PostgreSQL (HOT): no index on a column a flush changes, and room on each page
    # (migration 0017_node_updates_in_place).
    __table_args__ = {"postgresql_with": {"fillfactor": 50}}

    name: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    pool: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    last_seen_at: Mapped[float] = mapped_column(Float)  # aggregator clock, when the last push arrived
    last_sample_timestamp: Mapped[float] = mapped_column(Float)  # exporter clock, newest sample applied
    samples_received: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[float] = mapped_column(Float)
    sample: Mapped[str] = mapped_column(Text)
    # The driver and firmware its agent reported last ([{component, version}], issue 59): written only when a push
    # brings a different list (migration 0020_node_software), kept when a push has none.
    software: Mapped[list[dict[str, str]] | None] = mapped_column(JSON)


class JobRow(Base):
    """A job's metadata and the numbers derived from its latest report."""

    __tablename__ = "jobs"

    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), index=True)  # pending | running | ended
    kind: Mapped[str] = mapped_column(String(16), default="training")
    name: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    team: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    pool: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    gpu_model: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    dtype: Mapped[str] = mapped_column(String(8), default="bf16")
    num_gpus: Mapped[int | None] = mapped_column(Integer)
    gpus_requested: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    peak_flops_per_gpu: Mapped[float | None] = mapped_column(Float)
    recompute_activations: Mapped[bool | None] = mapped_column(Boolean)
    # Inference: how the served model is stored, for MBU (None: the storage `dtype` implies).
    weight_dtype: Mapped[str | None] = mapped_column(String(8))
    kv_cache_dtype: Mapped[str | None] = mapped_column(String(8))
    peak_memory_bandwidth_per_gpu: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    last_report_at: Mapped[float | None] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reports_received: Mapped[int] = mapped_column(Integer, default=0)
    # The latest derived numbers, so every replica can serve them without recomputing history.
    latest: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    updated_at: Mapped[float] = mapped_column(Float, index=True)
    # Lifecycle and accounting (mfumon.api.accounting): restarts and failures seen, how the job ended, the GPU-seconds
    # ledger (waterfall, FLOPs, lost-progress debt) and, once ended, its frozen lifetime summary.
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    outcome: Mapped[str | None] = mapped_column(String(16))  # success | failure | unknown | expired, once ended
    accounting: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # What a scheduler adapter (``mfumon scheduler``) says about the job; all null for jobs no scheduler reports.
    source: Mapped[str | None] = mapped_column(String(64), index=True)  # the scheduler source that owns the job
    submitted_at: Mapped[float | None] = mapped_column(Float)
    queued_at: Mapped[float | None] = mapped_column(Float)  # eligible to start; null while held or blocked
    pending_reason: Mapped[str | None] = mapped_column(String(64))
    scheduler_restarts: Mapped[int | None] = mapped_column(Integer)  # the scheduler's requeue count
    gpus_scheduled: Mapped[int | None] = mapped_column(Integer)  # GPUs the scheduler allocated
    placement: Mapped[dict[str, int] | None] = mapped_column(JSON)  # node -> GPUs the scheduler placed there
    request_units: Mapped[list[list[int]] | None] = mapped_column(JSON)  # [[gpus per unit, units]]: one node each
    end_state: Mapped[str | None] = mapped_column(String(32))  # the scheduler's final state (COMPLETED, Failed...)
    # How the model is laid out over the GPUs (tensor, pipeline, ... parallel sizes, micro-batch): with it, the
    # baseline signature ignores the data-parallel degree (mfumon.api.services.baselines).
    parallelism: Mapped[dict[str, int] | None] = mapped_column(JSON)
    # The figures of the job's latest profile (mfumon.api.state.profiles.ProfileFigures), for metrics and diagnosis.
    profile: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # A serving job's latency targets as it sent them (api.schemas.jobs.SloTargets); the rest from pool or defaults.
    slo: Mapped[dict[str, float] | None] = mapped_column(JSON)
    # The job's software fingerprint (component -> version) as it sent it: what a regression is traced to.
    software: Mapped[dict[str, str] | None] = mapped_column(JSON)


class JobEventRow(Base):
    """A lifecycle event a job reported (``POST /v1/jobs/{id}/events``) or the aggregator inferred (a restart)."""

    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job_id_received_at", "job_id", "received_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), ForeignKey("jobs.job_id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(32))
    seconds: Mapped[float | None] = mapped_column(Float)
    step: Mapped[int | None] = mapped_column(BigInteger)
    timestamp: Mapped[float | None] = mapped_column(Float)  # the job's clock, as sent
    received_at: Mapped[float] = mapped_column(Float, index=True)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer)  # the job's restarts when it arrived: 0 for the first run
    inferred: Mapped[str | None] = mapped_column(Text)  # why the aggregator recorded it itself, else None


class CounterRow(Base):
    """A durable counter: Prometheus counters that must survive restarts and read the same on every replica.

    Each series is split over a few ``shard`` rows (by job id) so concurrent writers rarely wait on one row;
    readers sum the shards. Values only grow: every write is ``value = value + increment`` in the transaction
    that stores what caused it.
    """

    __tablename__ = "counters"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    labels: Mapped[str] = mapped_column(String(512), primary_key=True)  # exposition label text, canonical order
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    value: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float, index=True)


class CounterHourRow(Base):
    """The durable counters' increments by the hour they were written in: what windowed questions read (how many
    GPU-seconds went where between two times, per team, pool or the cluster; ``GET /v1/usage``).

    Written with the same increments as :class:`Counter`, sharded the same way while the hour is current; hours
    that are over are folded into shard 0 (``mfumon.api.crud.counters.compact_hours``) and dropped after the retention.
    """

    __tablename__ = "counter_hours"

    hour: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # Unix seconds at the start of the hour
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    labels: Mapped[str] = mapped_column(String(512), primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    value: Mapped[float] = mapped_column(Float)


class BillingMarkRow(Base):
    """How far a periodic, cluster-wide billing has got (``name``): the replica that moves the mark bills the
    interval, so every interval is billed once whichever replicas run."""

    __tablename__ = "billing_marks"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    until: Mapped[float] = mapped_column(Float)


class JobReportRow(Base):
    """One report as received, with what was derived from it: the job's history."""

    __tablename__ = "job_reports"
    __table_args__ = (Index("ix_job_reports_job_id_received_at", "job_id", "received_at"),)

    # 64-bit: one id per report ever stored. SQLite keeps INTEGER, the type that makes it the auto-increment rowid.
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), ForeignKey("jobs.job_id", ondelete="CASCADE"))
    received_at: Mapped[float] = mapped_column(Float)
    tokens_per_second: Mapped[float] = mapped_column(Float)
    num_gpus: Mapped[int | None] = mapped_column(Integer)
    mfu: Mapped[float | None] = mapped_column(Float)
    hfu: Mapped[float | None] = mapped_column(Float)
    model_flops_per_second: Mapped[float | None] = mapped_column(Float)
    comm_ratio: Mapped[float | None] = mapped_column(Float)
    data_wait_ratio: Mapped[float | None] = mapped_column(Float)
    step_seconds: Mapped[float | None] = mapped_column(Float)
    step: Mapped[int | None] = mapped_column(BigInteger)
    reason: Mapped[str | None] = mapped_column(Text)
    # The hardware's estimate over the job's GPUs when the report arrived (tensor activity x clocks): the cross-check
    # over time. None when no GPU of the job reports tensor activity.
    hardware_mfu: Mapped[float | None] = mapped_column(Float)
    # Steps of the interval the profiler slowed (issue 32): such a report never joins a baseline's stable window.
    profiled_steps: Mapped[int | None] = mapped_column(Integer)
    # Inference reports that split their tokens by phase.
    mbu: Mapped[float | None] = mapped_column(Float)
    prefill_tokens_per_second: Mapped[float | None] = mapped_column(Float)
    decode_tokens_per_second: Mapped[float | None] = mapped_column(Float)
    prefill_mfu: Mapped[float | None] = mapped_column(Float)
    decode_mfu: Mapped[float | None] = mapped_column(Float)
    # A serving report's request figures (api.serving.figures.ServingFigures): latencies, SLO counts, pressure.
    serving: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class BaselineRow(Base):
    """The MFU a workload signature is held to (``mfumon.api.services.baselines``): captured from a job's stable window,
    raised when a later run is steadily better, or pinned by someone. ``mfu`` null: reset, the next stable window
    captures a new one (the row stays so that every replica learns of the reset)."""

    __tablename__ = "baselines"

    signature: Mapped[str] = mapped_column(String(512), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    model_key: Mapped[str] = mapped_column(String(256))
    gpu_model: Mapped[str] = mapped_column(String(LABEL_LENGTH))
    num_gpus: Mapped[int | None] = mapped_column(Integer)  # GPUs of the run it came from (none for a bare pin)
    dtype: Mapped[str] = mapped_column(String(8))
    mfu: Mapped[float | None] = mapped_column(Float)
    tokens_per_second_per_gpu: Mapped[float | None] = mapped_column(Float)
    source_job_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    captured_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float, index=True)
    captures: Mapped[int] = mapped_column(Integer, default=1)  # automatic captures and raises so far
    previous_mfu: Mapped[float | None] = mapped_column(Float)  # the value the last capture, pin or reset replaced
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    pinned_by: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))  # token name
    pinned_at: Mapped[float | None] = mapped_column(Float)
    note: Mapped[str | None] = mapped_column(String(256))
    reset_by: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    reset_at: Mapped[float | None] = mapped_column(Float)
    # +1 on every write, in the database: the order of writes, which clocks (updated_at) may not give.
    version: Mapped[int] = mapped_column(Integer, default=1)


class SchedulerSourceRow(Base):
    """One scheduler adapter's view (``mfumon scheduler``): when it last synced, the team quotas and pools it read."""

    __tablename__ = "scheduler_sources"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # slurm | kubernetes | ...
    observed_at: Mapped[float] = mapped_column(Float)  # adapter clock: when it read the scheduler
    synced_at: Mapped[float] = mapped_column(Float)  # aggregator clock: when the sync arrived
    quotas: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    # The scheduler's pools, [{"name", "nodes"}]; None when the adapter defines none (exporters' --pool then).
    pools: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True, default=None)
    updated_at: Mapped[float] = mapped_column(Float, index=True)


class QueueWaitHistogramRow(Base):
    """Cumulative histogram of the queue waits of jobs that started, per pool and team (same on every replica)."""

    __tablename__ = "queue_wait_histograms"

    pool: Mapped[str] = mapped_column(String(LABEL_LENGTH), primary_key=True)
    team: Mapped[str] = mapped_column(String(LABEL_LENGTH), primary_key=True)
    buckets: Mapped[list[int]] = mapped_column(JSON)  # counts per upper bound of QUEUE_WAIT_BUCKETS, +Inf last
    sum_seconds: Mapped[float] = mapped_column(Float)
    count: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[float] = mapped_column(Float, index=True)


class RemediationRow(Base):
    """The audit of ``mfumon remediate``: one decision (done, failed, dry run or withheld by a rail) on one node.

    A dry-run or withheld decision repeats every round while it holds; it is one row, ``repeats`` counting the rounds.
    """

    __tablename__ = "remediations"
    __table_args__ = (Index("ix_remediations_node_last_at", "node", "last_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node: Mapped[str] = mapped_column(String(ID_LENGTH))
    scheduler: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(String(LABEL_LENGTH))
    outcome: Mapped[str] = mapped_column(String(16))
    checks: Mapped[list[str]] = mapped_column(JSON)
    pools: Mapped[list[str]] = mapped_column(JSON)
    detail: Mapped[str | None] = mapped_column(Text)
    actor: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    recorded_by: Mapped[str] = mapped_column(String(64))
    attempts: Mapped[int] = mapped_column(Integer)
    first_at: Mapped[float] = mapped_column(Float)
    last_at: Mapped[float] = mapped_column(Float, index=True)
    repeats: Mapped[int] = mapped_column(Integer)
    # A drain or cordon: since when the loop saw the node failing, and the node's GPUs (all, and running jobs) as
    # the aggregator saw them when the decision was recorded; what its cost in GPU-hours is computed from.
    failing_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpus: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gpus_busy: Mapped[int | None] = mapped_column(Integer, nullable=True)


class JobProfileRow(Base):
    """A profile asked of a job (``POST /v1/jobs/{id}/profile``) or sent unasked, and the summaries its ranks sent.

    ``summaries`` holds one body of ``POST /v1/jobs/{id}/profiles`` per rank (a few kB each): the raw traces stay on
    the job's nodes.
    """

    __tablename__ = "job_profiles"
    __table_args__ = (Index("ix_job_profiles_job_id_requested_at", "job_id", "requested_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), ForeignKey("jobs.job_id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16))  # requested | running | done | expired
    steps: Mapped[int | None] = mapped_column(Integer)
    ranks: Mapped[Any] = mapped_column(
        JSON, nullable=True
    )  # "all" | "sample" | [rank, ...]; null for a profile sent unasked
    requested_by: Mapped[str | None] = mapped_column(String(LABEL_LENGTH))
    requested_at: Mapped[float] = mapped_column(Float)
    delivered_at: Mapped[float | None] = mapped_column(Float)  # first told to the job, in a report's answer
    completed_at: Mapped[float | None] = mapped_column(Float)  # the first rank's summary arrived
    summaries: Mapped[list[dict[str, Any]]] = mapped_column(JSON)


class PriceListRow(Base):
    """A price list the operator set (``PUT /v1/prices`` or ``MFUMON_PRICES_FILE``), kept forever: the newest is in
    effect, the others say what a past hour was billed at and who changed it (the audit)."""

    __tablename__ = "price_lists"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    set_at: Mapped[float] = mapped_column(Float, index=True)
    set_by: Mapped[str] = mapped_column(String(LABEL_LENGTH + 8))
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
