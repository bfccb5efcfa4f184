"""Everything one aggregator process holds: settings, database, in-memory state, peak table, counters."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from mfumon.api.core.config import Settings
from mfumon.api.core.security import TokenVerifier
from mfumon.api.metrics.scrapes import ScrapeCache
from mfumon.api.metrics.self_metrics import SelfMetrics
from mfumon.api.metrics.store import MetricsRenderer
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.refresh import Refresher
from mfumon.api.state.store import ClusterState
from mfumon.mfu import PeakTable

if TYPE_CHECKING:
    from mfumon.api.services.samples import SampleWriter
    from mfumon.api.state.notify import ChangeListener


@dataclass
class AppContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]  # ``.begin()`` for writes, plain for reads (mfumon.api.db.session)
    state: ClusterState
    peak_table: PeakTable
    resolver: DeviceResolver
    verifier: TokenVerifier
    refresher: Refresher
    self_metrics: SelfMetrics
    renderer: MetricsRenderer
    sample_writer: SampleWriter
    origin: str  # this process's id in notifications to other replicas
    listener: ChangeListener | None = None  # PostgreSQL only
    scrapes: ScrapeCache = field(default_factory=lambda: ScrapeCache(0.0))
    writer_engine: Engine | None = None  # the sample writer's own (SQLite); None: it shares ``engine``
    clock: Callable[[], float] = time.time

    def ready(self) -> bool:
        """The state is loaded and, with replicas, follows their changes."""
        return self.listener is None or self.listener.connected.is_set()
