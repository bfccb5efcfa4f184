"""XID errors from an NVML event set, counted by a background thread.

NVML only reports XIDs to an event set registered before they happen, so the watcher runs for the exporter's whole
life and the totals are "since the exporter started": a Prometheus counter that resets on restart, which ``rate()``
and ``increase()`` handle. The totals survive collection failures (they live here, not in a sample).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from mfumon.exporter.errors import DeviceError, GpuLost
from mfumon.exporter.node.sources.nvml_api import NvmlApi

__all__ = ["XidWatcher"]

logger = logging.getLogger(__name__)


class XidWatcher:
    """Counts XID events per physical GPU (and per MIG GPU instance when NVML names one)."""

    def __init__(self, api: NvmlApi, gpus: Sequence[tuple[str, Any]], *, poll_ms: int = 500) -> None:
        self._api = api
        self._poll_ms = poll_ms
        self._counts: Counter[tuple[str, int | None]] = Counter()
        self._last_xid: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._event_set: Any = None
        self._registered: set[str] = set()
        try:
            self._event_set, self._registered = api.xid_event_set(gpus)
        except DeviceError as exc:
            logger.info("XID events unavailable, xid_errors_total left out: %s", exc)

    @property
    def registered(self) -> frozenset[str]:
        """UUIDs of the GPUs whose XIDs are being counted."""
        return frozenset(self._registered)

    def start(self) -> None:
        """Start the waiting thread (a no-op when no GPU could be registered)."""
        if self._event_set is None or not self._registered or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="mfumon-xid", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and free the event set."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._poll_ms / 1000 * 4 + 1)
        if self._event_set is not None:
            self._api.free_event_set(self._event_set)
            self._event_set = None

    def total(self, uuid: str, gpu_instance_id: int | None = None) -> int | None:
        """XIDs seen on the GPU (a MIG instance also counts events NVML did not pin to an instance).

        ``None`` when the GPU is not registered: the counter is unsupported there, not zero.
        """
        if uuid not in self._registered:
            return None
        with self._lock:
            if gpu_instance_id is None:
                return sum(n for (u, _gi), n in self._counts.items() if u == uuid)
            return self._counts[(uuid, gpu_instance_id)] + self._counts[(uuid, None)]

    def last_xid(self, uuid: str) -> int | None:
        """The most recent XID number on the GPU, if any."""
        with self._lock:
            return self._last_xid.get(uuid)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                event = self._api.wait_xid(self._event_set, self._poll_ms)
            except GpuLost:
                self._stop.wait(self._poll_ms / 1000)
                continue
            except DeviceError as exc:
                failures += 1
                if failures == 1:
                    logger.warning("waiting for XID events failed: %s", exc)
                self._stop.wait(self._poll_ms / 1000)
                continue
            if event is None:
                continue
            with self._lock:
                self._counts[(event.uuid, event.gpu_instance_id)] += 1
                self._last_xid[event.uuid] = event.xid
            logger.warning("XID %d on GPU %s (GPU instance %s)", event.xid, event.uuid, event.gpu_instance_id)
