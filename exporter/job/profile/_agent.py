"""The job side of on-demand profiles: learn of a request, profile the next steps on this rank, send the summary.

`ProfileAgent.on_step` is on the training loop's hot path: with no profile asked it is one attribute test. A request
arrives from rank 0's report answer (`offer`) or, on the other ranks, from the process-group store (`poll`, on a
daemon thread). At most one profile runs at a time; a request already seen is ignored; the steps are capped at
`MAX_STEPS` and the kept trace at ``max_trace_bytes``. Nothing here raises into the training step.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mfumon.exporter.job.profile._capture import Capture, CaptureResult, default_trace_dir
from mfumon.exporter.job.profile._request import ProfileRequest, StoreChannel

logger = logging.getLogger("mfumon.exporter.job.profile")

MAX_STEPS = 20
"""The most steps profiled at once, whatever is asked (the aggregator refuses more, too)."""
MAX_TRACE_BYTES = 512 * 1024 * 1024
"""The largest gzipped trace kept on local disk; a larger one is summarised and deleted."""

Send = Callable[[dict[str, Any]], None]


class ProfileAgent:
    """Profiles this rank when a request names it, and hands each summary to ``send`` (a POST to the aggregator)."""

    def __init__(
        self,
        *,
        job_id: str,
        rank: int,
        world_size: int | None,
        send: Send,
        trace_dir: str | os.PathLike[str] | None = None,
        max_trace_bytes: int = MAX_TRACE_BYTES,
        channel: Callable[[], StoreChannel | None] = StoreChannel.of_default_group,
    ) -> None:
        self.job_id = job_id
        self.rank = rank
        self.world_size = world_size
        self.trace_dir = Path(trace_dir) if trace_dir is not None else default_trace_dir()
        self.max_trace_bytes = max_trace_bytes
        self._send = send
        self._channel = channel
        self._lock = threading.Lock()
        self._pending: ProfileRequest | None = None  # set by offer/poll, taken by on_step
        self._capture: Capture | None = None  # only the training thread touches it
        self._seen: set[int] = set()
        self._profiled_steps = 0
        self._marked_steps = 0  # rank 0: steps slowed by a profile on some rank, counted whether or not it profiles
        self.finished: list[CaptureResult] = []
        self._finishers: list[threading.Thread] = []

    # -- learning of a request (background threads) --------------------------------------------------------------

    def offer(self, request: ProfileRequest | None) -> None:
        """Rank 0: a request read from a report's answer; passed on to the other ranks through the store."""
        if request is None or not self._first_sight(request):
            return
        try:
            channel = self._channel()
            if channel is not None:
                channel.publish(request)
        except Exception:
            logger.warning("mfumon profile: could not pass request %d to the other ranks", request.id, exc_info=True)
        if not request.names(self.rank, self.world_size):  # other ranks' profiles slow the job's steps too
            with self._lock:
                self._marked_steps = max(self._marked_steps, min(request.steps, MAX_STEPS) + 1)
        self._accept(request)

    def poll(self) -> None:
        """Other ranks: read the store for a request rank 0 passed on."""
        try:
            channel = self._channel()
            request = channel.read() if channel is not None else None
        except Exception:
            logger.debug("mfumon profile: reading the store failed", exc_info=True)
            return
        if request is not None and self._first_sight(request):
            self._accept(request)

    def _first_sight(self, request: ProfileRequest) -> bool:
        with self._lock:
            if request.id in self._seen:
                return False
            self._seen.add(request.id)
            return True

    def _accept(self, request: ProfileRequest) -> None:
        if not request.names(self.rank, self.world_size):
            return
        with self._lock:
            if self._pending is None:
                self._pending = request
        logger.info("mfumon profile: profiling the next %d step(s) on rank %d", request.steps, self.rank)

    # -- the hot path (training thread) --------------------------------------------------------------------------

    def on_step(self) -> None:
        """Call once after each training step."""
        if self._pending is None and self._capture is None and not self._marked_steps:
            return
        try:
            self._advance()
        except Exception:
            logger.warning("mfumon profile: profiling failed; training goes on", exc_info=True)
            if self._capture is not None:
                self._capture.abandon()
            self._capture = None

    def _advance(self) -> None:
        if self._capture is not None:  # the step that just ended ran under the profiler
            with self._lock:
                self._profiled_steps += 1
            if self._capture.step():
                capture, self._capture = self._capture, None
                self._finish_later(capture)
            return
        with self._lock:
            request, self._pending = self._pending, None
            if request is None and self._marked_steps:
                self._marked_steps -= 1
                self._profiled_steps += 1
        if request is not None:  # profiling starts with the next step
            self._capture = Capture(request, steps=max(1, min(request.steps, MAX_STEPS)))

    def take_profiled_steps(self) -> int:
        """Steps profiled (or slowed by a profile elsewhere) since the last call: the report's ``profiled_steps``."""
        with self._lock:
            steps, self._profiled_steps = self._profiled_steps, 0
        return steps

    # -- after the capture (daemon thread) -----------------------------------------------------------------------

    def _finish_later(self, capture: Capture) -> None:
        thread = threading.Thread(target=self._finish, args=(capture,), name="mfumon-profile", daemon=True)
        self._finishers.append(thread)
        thread.start()

    def _finish(self, capture: Capture) -> None:
        stem = f"{self.job_id}-profile{capture.request.id}-rank{self.rank}"
        try:
            result = capture.finish(self.trace_dir, stem, max_trace_bytes=self.max_trace_bytes)
        except Exception:
            logger.warning("mfumon profile: summarising profile %d failed", capture.request.id, exc_info=True)
            return
        self.finished.append(result)
        body = {
            **result.summary.to_json(),
            "profile_id": capture.request.id,
            "rank": self.rank,
            "trace_path": None if result.trace_path is None else str(result.trace_path),
            "trace_bytes": result.trace_bytes,
            "captured_at": result.captured_at,
        }
        try:
            self._send(body)
        except Exception:
            logger.warning("mfumon profile: sending profile %d failed", capture.request.id, exc_info=True)

    def wait(self, timeout_seconds: float = 30.0) -> None:
        """Wait for summaries being made (at close: a short job's profile still gets sent)."""
        for thread in list(self._finishers):
            thread.join(timeout_seconds)

    @property
    def busy(self) -> bool:
        return self._pending is not None or self._capture is not None
