"""Replicas on PostgreSQL tell each other what changed: triggers NOTIFY, a thread in each replica LISTENs.

Triggers on the tables the state mirrors (:data:`MIRRORED`; ``mfumon.migrations.change_triggers`` makes them) send, for
every statement that writes them, the keys it wrote and the writer's id (``mfumon.origin``, set on each of its
connections by :func:`tag_writes`). PostgreSQL delivers a notification to
every listener when, and only if, the transaction commits, in commit order. So every write path is covered,
whoever adds it, without a line of its own. :class:`ChangeListener` holds one connection per replica, skips its
own writes (already in its state), gathers notifications for a moment, and has the refresher read exactly the
rows they name. Nothing is polled: an idle cluster costs nothing, and a change reaches the other replicas within
one gathering window (``GATHER_S``) plus the read. When the connection drops, the listener reconnects, listens
again, and only then catches up on what changed while it was away, so nothing committed in between is missed.

On SQLite (one process, no replicas) there are no triggers and no listener.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from sqlalchemy import Engine, event

from mfumon.api.db.migrate import CHANGE_CHANNEL as CHANNEL
from mfumon.api.state.refresh import Refresher

logger = logging.getLogger(__name__)

# Every table the replicas mirror in memory, and its key column: the one list. To mirror another table, add it here,
# give it triggers in its migration (``create_change_triggers(table, key)``, one line) and a reader in
# ``Refresher.load_changed``; a test checks that all three agree.
MIRRORED: dict[str, str] = {
    "nodes": "name",
    "jobs": "job_id",
    "baselines": "signature",
    "counters": "name",
    "scheduler_sources": "name",
    "queue_wait_histograms": "pool",
}


def tag_writes(engine: Engine, origin: str) -> None:
    """Mark every connection of this process, so that the notifications of its writes carry ``origin``."""

    @event.listens_for(engine, "connect")
    def _set_origin(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cursor:
            cursor.execute("SELECT set_config('mfumon.origin', %s, false)", (origin,))
        dbapi_conn.commit()  # a session setting made inside a transaction lasts only if it commits


class ChangeListener:
    """LISTENs on one connection and applies what other replicas changed; see the module docstring."""

    GATHER_S = 0.05  # after a first notification, wait this long for more and read them all at once
    RECONNECT_S = 1.0

    def __init__(self, engine: Engine, refresher: Refresher, origin: str) -> None:
        self._engine = engine
        self._refresher = refresher
        self._origin = origin
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.connected = threading.Event()
        self.applied = 0

    def start(self) -> None:
        """Listen, then load the state (so no change between the two is missed), then follow in a thread."""
        self._listen()
        self._refresher.load()
        self.connected.set()
        self._thread = threading.Thread(target=self._run, name="mfumon-listener", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._close()

    def _listen(self) -> None:
        raw = self._engine.raw_connection()
        conn = raw.driver_connection
        assert conn is not None
        raw.detach()  # a connection of its own for good, outside the pool
        conn.rollback()
        conn.autocommit = True
        conn.execute(f"LISTEN {CHANNEL}")
        self._conn = conn

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                logger.debug("closing the listener connection failed", exc_info=True)
            self._conn = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._conn is None:
                    self._listen()
                    self._refresher.load()
                    self.connected.set()
                    logger.info("listening for other replicas' changes again")
                self._follow()
            except Exception:
                if self._stop.is_set():
                    return
                self.connected.clear()
                self._refresher.errors += 1
                logger.exception("lost the notification connection; reconnecting")
                self._close()
                self._stop.wait(self.RECONNECT_S)

    def _follow(self) -> None:
        while not self._stop.is_set():
            first = list(self._conn.notifies(timeout=0.5, stop_after=1))
            if not first:
                continue
            changed: dict[str, set[str]] = {table: set() for table in MIRRORED}
            for notify in first:
                self._collect(notify.payload, changed)
            deadline = time.monotonic() + self.GATHER_S
            while (left := deadline - time.monotonic()) > 0:  # gather the rest of the window, then read once
                batch = list(self._conn.notifies(timeout=left, stop_after=1000))
                if not batch:
                    break
                for notify in batch:
                    self._collect(notify.payload, changed)
            if any(changed.values()):  # not only this replica's own writes
                self.applied += self._refresher.load_changed(changed)

    def _collect(self, payload: str, changed: dict[str, set[str]]) -> None:
        """``<table> <origin> <JSON list of keys>``, as the trigger function writes it."""
        table, origin, keys = [*payload.split(" ", 2), "", ""][:3]
        if origin == self._origin or table not in changed:
            return  # our own writes are in the state already
        try:
            changed[table].update(str(k) for k in json.loads(keys))
        except ValueError:
            logger.warning("ignoring a malformed change notification: %.200s", payload)
