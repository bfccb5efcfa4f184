"""Everything one aggregator process holds: settings, database, in-memory state, peak table, counters."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api.core.config import Settings
from api.core.security import TokenVerifier
from api.metrics.render import MetricsRenderer
from api.metrics.self_metrics import SelfMetrics
from api.mfu import PeakTable
from api.state.devices import DeviceResolver
from api.state.refresh import Refresher
from api.state.store import ClusterState


@dataclass
class AppContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    state: ClusterState
    peak_table: PeakTable
    resolver: DeviceResolver
    verifier: TokenVerifier
    refresher: Refresher
    self_metrics: SelfMetrics
    renderer: MetricsRenderer
    clock: Callable[[], float] = time.time
