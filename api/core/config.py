"""Aggregator settings: one pydantic-settings class, read from ``MFUMON_*`` environment variables.

CLI flags (``mfumon serve --host/--port/--insecure``) override the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mfumon.api.core.security import Token, parse_tokens

DEFAULT_DATABASE_URL = "sqlite:///mfumon.db"


class PoolSlo(BaseModel):
    """A pool's serving targets (``MFUMON_SLO_POOLS``); a target left out falls back to the default."""

    model_config = ConfigDict(extra="forbid")

    ttft_seconds: float | None = Field(default=None, gt=0, le=3600)
    tpot_seconds: float | None = Field(default=None, gt=0, le=60)
    objective_ratio: float | None = Field(default=None, gt=0, le=1)


class Settings(BaseSettings):
    """Everything the aggregator can be told; every field maps to ``MFUMON_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="MFUMON_", env_ignore_empty=True, extra="ignore")

    DATABASE_URL: str = DEFAULT_DATABASE_URL
    HOST: str = "127.0.0.1"
    PORT: int = Field(default=8000, ge=0, le=65535)  # 0: the kernel picks a free port

    # Security: tokens for ingest (PUT/POST). Comma separated in the environment, or one per line in a file, where a
    # line may name the token and limit it to scopes and teams (mfumon.api.core.security).
    INGEST_TOKENS: str = Field(default="", repr=False)
    INGEST_TOKENS_FILE: Path | None = None
    ALLOW_INSECURE: bool = False
    # Reads (/v1/* GETs and /metrics) need a token with the "read" scope too; Prometheus sends it as a bearer token.
    READ_REQUIRES_TOKEN: bool = False
    # One log line per write naming the token (logger "api.audit"); off for very large clusters if too chatty.
    AUDIT_LOG: bool = True

    # Expiry: series of silent nodes and jobs vanish after these times; ended jobs vanish at once.
    NODE_TTL_SECONDS: float = Field(default=300.0, gt=0)
    JOB_TTL_SECONDS: float = Field(default=600.0, gt=0)
    PENDING_JOB_TTL_SECONDS: float = Field(default=86400.0, gt=0)
    # How often each replica ends running jobs silent past JOB_TTL_SECONDS (outcome "expired").
    EXPIRY_INTERVAL_SECONDS: float = Field(default=30.0, gt=0)

    # The waste waterfall (README, "Where the GPU-hours go"): how often idle and unreported GPUs are billed (one
    # replica per interval), and how long the hourly GPU-seconds that GET /v1/usage reads are kept.
    ACCOUNTING_INTERVAL_SECONDS: float = Field(default=15.0, gt=0)
    # Software regressions (issue 59): how often the comparison of jobs before and after each software change is
    # recomputed for /metrics and the diagnosis, and over how many days of jobs (GET /v1/regressions takes any window).
    REGRESSIONS_INTERVAL_SECONDS: float = Field(default=300.0, gt=0)
    REGRESSIONS_WINDOW_DAYS: float = Field(default=30.0, gt=0)
    USAGE_RETENTION_DAYS: float = Field(default=400.0, gt=0)

    # Fleet health: an error counter fails its check while it has grown within this window (flapping links,
    # NVLink/PCIe/InfiniBand errors).
    HEALTH_WINDOW_SECONDS: float = Field(default=900.0, gt=0)

    # Scheduler adapters (mfumon scheduler): their jobs stay visible while the adapter synced within this time.
    SCHEDULER_TTL_SECONDS: float = Field(default=600.0, gt=0)
    # A sync carries the whole queue (about 300 bytes a job): its own body limit, checked on the head like every
    # other (MAX_BODY_BYTES), and only for a token with the "scheduler" scope.
    MAX_SCHEDULER_BODY_BYTES: int = Field(default=64 * 1_048_576, ge=1024)

    # Node samples are answered from memory and stored by one writer every SAMPLE_FLUSH_SECONDS; pushes are refused
    # (503 + Retry-After) while the oldest one not yet stored is older than SAMPLE_MAX_UNFLUSHED_SECONDS.
    SAMPLE_FLUSH_SECONDS: float = Field(default=1.0, gt=0, le=60)
    SAMPLE_MAX_UNFLUSHED_SECONDS: float = Field(default=10.0, gt=0)

    # How often expired nodes and ended jobs are dropped from memory. Replicas (PostgreSQL) learn each other's
    # writes by LISTEN/NOTIFY; after a lost connection they re-read what changed since, minus this overlap.
    REFRESH_INTERVAL_SECONDS: float = Field(default=2.0, gt=0)
    REFRESH_OVERLAP_SECONDS: float = Field(default=30.0, ge=0)

    # Baselines: skip the first reports (warm-up), then take the median of a window whose spread is small.
    BASELINE_WARMUP_REPORTS: int = Field(default=2, ge=0)
    BASELINE_WINDOW_REPORTS: int = Field(default=5, ge=2)
    BASELINE_MAX_RELATIVE_SPREAD: float = Field(default=0.10, gt=0)
    # An unpinned baseline is raised when every report of a later stable window beats it by this fraction.
    BASELINE_RAISE_MARGIN: float = Field(default=0.05, ge=0)

    # Timestamps sent by clients may run ahead of this server's clock by at most this much (422 beyond it).
    MAX_CLOCK_SKEW_SECONDS: float = Field(default=300.0, gt=0)

    # Overload (api/server/overload.py): ingest past this many taken and not yet answered is refused as its head is
    # read;
    # ingest that waited in this server's queue (from when its bytes were read to when the app got to it) longer
    # than the bound is refused before its body is validated. Both: 503 + Retry-After.
    MAX_INGEST_IN_FLIGHT: int = Field(default=64, ge=1)
    MAX_INGEST_QUEUE_SECONDS: float = Field(default=0.05, gt=0, le=60)
    OVERLOAD_RETRY_AFTER_SECONDS: int = Field(default=1, ge=1, le=3600)

    # Serving SLO goodput (api/serving/slo.py): a request counts when its time to first token and its mean time per
    # output token are both within target. A job's own `slo` beats its pool's (SLO_POOLS, JSON: pool -> targets),
    # which beats these. The defaults are bucket edges of vLLM's and SGLang's default histograms, so the share within
    # them is exact per target, not a bound.
    SLO_TTFT_SECONDS: float = Field(default=1.0, gt=0, le=3600)
    SLO_TPOT_SECONDS: float = Field(default=0.1, gt=0, le=60)
    SLO_OBJECTIVE_RATIO: float = Field(default=0.9, gt=0, le=1)
    SLO_POOLS: dict[str, PoolSlo] = Field(default_factory=dict)

    HISTORY_RETENTION_DAYS: float = Field(default=30.0, gt=0)
    MAX_BODY_BYTES: int = Field(default=1_048_576, ge=1024)

    # Cardinality: every label a client controls is bounded (README "Security"). Past a limit, new nodes and jobs get
    # 429 (Retry-After) until old ones expire, and GPU models unknown to the peak table are counted as "other".
    MAX_NODES: int = Field(default=20_000, ge=1)
    MAX_GPUS: int = Field(default=131_072, ge=1)
    MAX_GPUS_PER_NODE: int = Field(default=128, ge=1, le=1024)
    MAX_ACTIVE_JOBS: int = Field(default=20_000, ge=1)
    MAX_UNKNOWN_GPU_MODELS: int = Field(default=64, ge=1)

    # Reads: at most this many list/detail reads computed at once (plus 2 for /metrics), so reads cannot starve
    # ingest; a read that finds no free slot within READ_WAIT_SECONDS gets 503 with Retry-After.
    MAX_CONCURRENT_READS: int = Field(default=4, ge=1)
    READ_WAIT_SECONDS: float = Field(default=10.0, gt=0)
    # /metrics renders one at a time; a scrape of the same shard within this time of the last render gets that body
    # (api/metrics/scrapes.py), so back-to-back scrapers cannot take the CPU from ingest. 0: render every scrape.
    METRICS_MAX_AGE_SECONDS: float = Field(default=1.0, ge=0, le=60)

    # Connections (mfumon serve): no idle, slow or silent client holds one for long (api/server/guard.py).
    # An idle kept-alive connection is closed after KEEPALIVE_TIMEOUT_SECONDS. It must be longer than any client's
    # interval (exporter 10 s, demo 5 s, scheduler 30 s, reporter 10-60 s): at 5 s, a client pushing every 5 s reused
    # connections the server was closing in that instant and got "Connection reset by peer" (issue 30). Idle kept-
    # alive connections remain the first evicted past MAX_CONNECTIONS, and clients resend a request that met a
    # connection closed under it once, on a fresh one (mfumon.exporter.transport).
    KEEPALIVE_TIMEOUT_SECONDS: float = Field(default=75.0, gt=0)
    # Connection open -> request head, or first byte of a later request head -> the whole head.
    HEADER_TIMEOUT_SECONDS: float = Field(default=10.0, gt=0)
    BODY_TIMEOUT_SECONDS: float = Field(default=30.0, gt=0)  # request head -> whole body, else 408
    WRITE_TIMEOUT_SECONDS: float = Field(default=30.0, gt=0)  # a client that stops reading its response
    MAX_CONNECTIONS: int = Field(default=4096, ge=16)  # also kept below the process's file-descriptor limit
    # The share of MAX_CONNECTIONS that connections on which no valid token was seen yet may hold (the oldest
    # waiting one is evicted past it), so an unauthenticated storm never closes an exporter's connection.
    UNAUTHENTICATED_CONNECTIONS_RATIO: float = Field(default=0.25, gt=0, le=1)
    # The in-place path (api/server/door.py, api/server/protocol.py): admission, the ingest gate and node pushes
    # taken in the callback that read them, with no ASGI cycle. 0 serves every request through the ASGI stack (same
    # answers, more CPU a push); mfumon serve also does so by itself, with one warning, when uvicorn or h11 lack
    # what that path relies on.
    IN_PLACE: bool = True
    LOG_REPEATS_PER_MINUTE: int = Field(default=10, ge=1)  # the same log line more often than this is counted
    PEAKS_FILE: Path | None = None
    # Prices (issue 60): a YAML or JSON price list (mfumon.api.schemas.prices.PricesIn) stored at start-up when it
    # differs from the one in effect; PUT /v1/prices (scope "prices") changes it at run time. History is kept.
    PRICES_FILE: Path | None = None
    LOG_LEVEL: str = "INFO"

    @field_validator("DATABASE_URL")
    @classmethod
    def _use_psycopg3(cls, value: str) -> str:
        """Plain ``postgresql://`` URLs get the psycopg 3 driver, the one our ``postgres`` extra installs."""
        if value.startswith("postgresql://") or value.startswith("postgres://"):
            return "postgresql+psycopg://" + value.split("://", 1)[1]
        return value

    @model_validator(mode="after")
    def _bound_exceeds_flush_interval(self) -> Settings:
        if self.SAMPLE_MAX_UNFLUSHED_SECONDS <= self.SAMPLE_FLUSH_SECONDS:
            raise ValueError(
                f"SAMPLE_MAX_UNFLUSHED_SECONDS ({self.SAMPLE_MAX_UNFLUSHED_SECONDS:g}) must exceed "
                f"SAMPLE_FLUSH_SECONDS ({self.SAMPLE_FLUSH_SECONDS:g}), or every push would be refused"
            )
        return self

    def ingest_tokens(self) -> list[Token]:
        """The configured tokens: comma-separated in the environment, one per line in the file (see README Security)."""
        file_lines = self.INGEST_TOKENS_FILE.read_text().splitlines() if self.INGEST_TOKENS_FILE is not None else []
        return parse_tokens(self.INGEST_TOKENS.split(","), file_lines)
