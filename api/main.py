"""The FastAPI application: build the process context on startup, mount the routes."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp

from mfumon.api import handlers, openapi, route_table
from mfumon.api.context import AppContext
from mfumon.api.core.config import Settings
from mfumon.api.core.memory import Trimmer
from mfumon.api.core.security import Token, TokenVerifier
from mfumon.api.crud.counters import HOUR
from mfumon.api.db.migrate import upgrade_to_head
from mfumon.api.db.session import make_engine, make_sessionmaker, make_writer_engine
from mfumon.api.metrics.scrapes import ScrapeCache
from mfumon.api.metrics.self_metrics import SelfMetrics
from mfumon.api.metrics.store import MetricsRenderer
from mfumon.api.middleware import (
    BodySizeLimit,
    BodyTimeout,
    JsonContentType,
    ReadLimit,
    WriteAudit,
)
from mfumon.api.routes import (
    baselines,
    chargeback,
    cluster,
    compare,
    diagnosis,
    health,
    job_events,
    jobs,
    landing,
    metrics,
    nodes,
    prices,
    profiles,
    regressions,
    remediations,
    scheduler,
    ui,
    usage,
)
from mfumon.api.server import fast_door
from mfumon.api.server.admission import Admission, Admit
from mfumon.api.server.overload import IngestGate, IngestLimit
from mfumon.api.services.accounting import bill_gpu_states, maintain_hours
from mfumon.api.services.expiry import expire_silent_jobs
from mfumon.api.services.prices import load_prices
from mfumon.api.services.regressions import refresh_regressions
from mfumon.api.services.samples import SampleWriter
from mfumon.api.state.collective_ranks import nvlink_of
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.notify import ChangeListener, tag_writes
from mfumon.api.state.refresh import MaintenanceThread, Refresher
from mfumon.api.state.store import ClusterState
from mfumon.mfu import PeakTable

logger = logging.getLogger(__name__)

TRIM_EVERY_S = 10.0  # how soon free memory goes back to the system after nodes or jobs went away


def build_context(settings: Settings, verifier: TokenVerifier | None = None) -> AppContext:
    """Migrate the database, load the peak table and the current cluster state (not yet following changes)."""
    upgrade_to_head(settings.DATABASE_URL)
    engine = make_engine(settings.DATABASE_URL)
    origin = uuid.uuid4().hex[:12]
    if engine.dialect.name == "postgresql":
        tag_writes(engine, origin)  # other replicas' notifications say who wrote, so each skips its own
    sessions = make_sessionmaker(engine)
    table = PeakTable() if settings.PEAKS_FILE is None else PeakTable.from_file(settings.PEAKS_FILE)
    resolver = DeviceResolver(table)
    state = ClusterState(
        node_ttl_seconds=settings.NODE_TTL_SECONDS,
        job_ttl_seconds=settings.JOB_TTL_SECONDS,
        pending_job_ttl_seconds=settings.PENDING_JOB_TTL_SECONDS,
        health_window_seconds=settings.HEALTH_WINDOW_SECONDS,
        scheduler_ttl_seconds=settings.SCHEDULER_TTL_SECONDS,
    )
    refresher = Refresher(state, sessions, resolver, overlap_seconds=settings.REFRESH_OVERLAP_SECONDS)
    writer_engine = make_writer_engine(settings.DATABASE_URL, engine)
    writer_sessions = sessions if writer_engine is None else make_sessionmaker(writer_engine)
    sample_writer = SampleWriter(writer_sessions, interval_seconds=settings.SAMPLE_FLUSH_SECONDS)
    self_metrics = SelfMetrics()
    scrapes = self_metrics.scrapes = ScrapeCache(settings.METRICS_MAX_AGE_SECONDS)
    self_metrics.max_unknown_devices = settings.MAX_UNKNOWN_GPU_MODELS
    renderer = MetricsRenderer(
        self_metrics,
        lambda: (refresher.last_duration_seconds, refresher.errors),
        lambda: (
            sample_writer.pending(),
            sample_writer.lag_seconds(),
            sample_writer.last_duration_seconds,
            sample_writer.errors,
        ),
        baseline_of=lambda signature: held.mfu if (held := state.baseline(signature)) else None,
        nvlink_of=nvlink_of(table),
    )
    state.on_node, state.on_job = (lambda view: renderer.node_changed(view.name)), renderer.prepare_job
    verifier = verifier or TokenVerifier(settings.ingest_tokens())
    return AppContext(
        settings=settings,
        engine=engine,
        writer_engine=writer_engine,
        sessions=sessions,
        state=state,
        peak_table=table,
        resolver=resolver,
        verifier=verifier,
        refresher=refresher,
        self_metrics=self_metrics,
        renderer=renderer,
        sample_writer=sample_writer,
        origin=origin,
        listener=ChangeListener(engine, refresher, origin) if engine.dialect.name == "postgresql" else None,
        scrapes=scrapes,
    )


def _count_body_timeout(app: FastAPI) -> None:
    ctx = getattr(app.state, "ctx", None)
    if ctx is not None:
        ctx.self_metrics.count_body_timeout()


def _count_overloaded(app: FastAPI, endpoint: str) -> None:
    ctx = getattr(app.state, "ctx", None)
    if ctx is not None:
        ctx.self_metrics.count_ingest(endpoint, "overloaded")


def _count_read_rejected(app: FastAPI, group: str) -> None:
    ctx = getattr(app.state, "ctx", None)
    if ctx is not None:
        ctx.self_metrics.count_read_rejected(group)


CONNECTIONS_PER_TRIM = 256  # a storm of connections that came and went, not the churn of kept-alive ones


def _storms(app: FastAPI) -> int:
    """How many times :data:`CONNECTIONS_PER_TRIM` connections ended (mfumon serve): after a storm, what its
    connections freed goes back to the system at the next trim, not when malloc happens to reuse it."""
    guard = getattr(app.state, "connection_guard", None)
    return guard.ended // CONNECTIONS_PER_TRIM if guard is not None else 0


def _count_admission_refused(app: FastAPI, method: str, path: str, reason: str) -> None:
    ctx = getattr(app.state, "ctx", None)
    endpoint = route_table.endpoint_of(method, path)
    if ctx is not None and endpoint is not None:
        ctx.self_metrics.count_ingest(endpoint, reason)


def _describe(tokens: list[Token]) -> str:
    """Token names and what they may do (never the tokens themselves)."""
    parts = []
    for token in tokens:
        who = token.principal
        teams = f"; teams {','.join(sorted(who.teams))}" if who.teams is not None else ""
        parts.append(f"{who.name} ({','.join(sorted(who.scopes))}{teams})")
    return f"{len(tokens)} token(s): " + ", ".join(parts)


class Aggregator(FastAPI):
    """FastAPI with the node push's fast door (:mod:`mfumon.api.server.fast_door`) in its middleware stack, which
    Starlette builds on the first request, once every middleware and exception handler is known."""

    def build_middleware_stack(self) -> ASGIApp:
        return fast_door.install(self, super().build_middleware_stack())


def create_app(settings: Settings | None = None) -> FastAPI:
    """The aggregator app; the context (database, state) is built when the app starts."""
    settings = settings or Settings()
    admission: Admission | None = None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal admission
        tokens = settings.ingest_tokens()
        logger.info("authentication: %s", _describe(tokens) if tokens else "off (loopback only)")
        verifier = TokenVerifier(tokens)
        ctx = build_context(settings, verifier)
        app.state.admission = admission = Admission(
            verifier,
            reads_need_token=settings.READ_REQUIRES_TOKEN,
            max_body_bytes=settings.MAX_BODY_BYTES,
            routes=app.state.routes,
            body_limits={
                spec.max_body_bytes: getattr(settings, spec.max_body_bytes) for spec in app.state.routes.specs
            },
        )
        # The port opens only after this: a replica never serves (or reports ready with) a partial state.
        if ctx.listener is not None:
            ctx.listener.start()  # LISTEN, then load: nothing committed in between is missed
        else:
            ctx.refresher.load()
        load_prices(ctx)  # the file's list, stored when it differs from the one in effect
        app.state.ctx = ctx
        ctx.self_metrics.connections = getattr(app.state, "connection_guard", None)  # set by mfumon serve
        rendering = asyncio.create_task(ctx.renderer.keep_rendering(ctx.state.node))
        ctx.sample_writer.start()
        maintenance = MaintenanceThread(
            ctx.state,
            ctx.refresher,
            settings.REFRESH_INTERVAL_SECONDS,
            settings.HISTORY_RETENTION_DAYS * 86400,
            periodic=[
                (settings.EXPIRY_INTERVAL_SECONDS, lambda: expire_silent_jobs(ctx)),
                (settings.ACCOUNTING_INTERVAL_SECONDS, lambda: bill_gpu_states(ctx)),
                (HOUR, lambda: maintain_hours(ctx)),
                (settings.REGRESSIONS_INTERVAL_SECONDS, lambda: refresh_regressions(ctx)),
                (TRIM_EVERY_S, Trimmer(lambda: ctx.state.forgotten + ctx.renderer.forgotten + _storms(app))),
            ],
        )
        maintenance.start()
        try:
            yield
        finally:
            rendering.cancel()
            maintenance.stop()
            ctx.sample_writer.stop()
            if ctx.listener is not None:
                ctx.listener.stop()
            ctx.engine.dispose()
            if ctx.writer_engine is not None:
                ctx.writer_engine.dispose()

    app = Aggregator(
        title="mfu-monitor aggregator",
        summary="Cluster-wide MFU: job throughput and GPU counters in, MFU and Prometheus metrics out.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served by mfumon.api.routes.landing from the package, not a CDN
        redoc_url=None,
    )
    app.add_middleware(JsonContentType)  # innermost: a JSON body without its content type is read as JSON
    app.add_middleware(WriteAudit)
    app.add_middleware(
        BodySizeLimit,
        limit_of=lambda method, path: (
            admission.body_limit(method, path) if admission is not None else settings.MAX_BODY_BYTES
        ),
    )
    app.add_middleware(
        BodyTimeout, timeout_seconds=settings.BODY_TIMEOUT_SECONDS, on_timeout=lambda: _count_body_timeout(app)
    )
    app.add_middleware(
        ReadLimit,
        max_concurrent=settings.MAX_CONCURRENT_READS,
        wait_seconds=settings.READ_WAIT_SECONDS,
        on_rejected=lambda group: _count_read_rejected(app, group),
    )
    # Added last, so it runs first: an ingest request past the limit costs nothing more than its refusal. The gate
    # is on app.state for mfumon serve's door, which refuses before the request reaches any of this.
    app.state.ingest_gate = IngestGate(
        limit=settings.MAX_INGEST_IN_FLIGHT,
        max_queue_seconds=settings.MAX_INGEST_QUEUE_SECONDS,
        retry_after_seconds=settings.OVERLOAD_RETRY_AFTER_SECONDS,
        on_refused=lambda endpoint: _count_overloaded(app, endpoint),
    )
    app.add_middleware(IngestLimit, gate=app.state.ingest_gate)
    # Outermost: the token and the declared body size are checked on the head, before any work
    # (mfumon.api.server.admission).
    app.state.on_admission_refused = lambda method, path, reason: _count_admission_refused(app, method, path, reason)
    app.add_middleware(Admit, admission=lambda: admission, on_refused=app.state.on_admission_refused)

    handlers.install(app)
    for module in (
        nodes,
        jobs,
        job_events,
        profiles,
        baselines,
        compare,
        diagnosis,
        cluster,
        usage,
        regressions,
        prices,
        chargeback,
        scheduler,
        remediations,
        metrics,
        health,
        landing,
        ui,
    ):  # node pushes matched first
        app.include_router(module.router)
    app.state.routes = route_table.install(app.routes)  # the door's matcher: each write route's spec, declared with it
    openapi.install(app)
    return app
