"""``torch.profiler`` over a few steps of the training loop, and what happens to the trace after.

The training thread only starts the profiler, marks each step and stops it; exporting the trace, summarising it and
sending the summary run on a daemon thread. Everything is wrapped so that a profiler error is logged and the step
goes on.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfumon.exporter.job.profile._request import ProfileRequest
from mfumon.exporter.job.profile._summary import TraceSummary, summarize_trace
from mfumon.exporter.job.profile._trace import load_trace

logger = logging.getLogger("mfumon.exporter.job.profile")


@dataclass(frozen=True, slots=True)
class CaptureResult:
    """A finished capture: the summary, and where the raw trace stays (None when it was over the size cap)."""

    summary: TraceSummary
    trace_path: Path | None
    trace_bytes: int
    captured_at: float


class Capture:
    """One profile on this rank: `start`, `step` after each training step until it says done, then `finish`."""

    def __init__(self, request: ProfileRequest, *, steps: int) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.request = request
        self.steps_left = steps + 1  # one warm-up step (not recorded), then the asked steps
        self.started_at = time.time()
        # No shapes, stacks or memory: the smallest trace that still has every kernel and its process group. The
        # schedule is what makes the profiler mark each step (ProfilerStep#N), which the summary's steps come from.
        self._profiler: Any = profile(
            activities=activities,
            schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
            record_shapes=False,
            with_stack=False,
        )
        self._profiler.start()

    def step(self) -> bool:
        """Mark the end of one step; True (and the profiler stopped) once the asked steps are recorded.

        The profiler's own work at a step boundary (its warm-up, and handing over the recorded events) happens here,
        on the training thread: that is the overhead `bench/profile_overhead.py` measures.
        """
        self._profiler.step()
        self.steps_left -= 1
        if self.steps_left > 0:
            return False
        self._profiler.stop()
        return True

    def abandon(self) -> None:
        try:
            self._profiler.stop()
        except Exception:  # already stopped, or broken: nothing more to do
            logger.debug("mfumon profile: stopping an abandoned profiler failed", exc_info=True)

    def finish(self, trace_dir: Path, stem: str, *, max_trace_bytes: int) -> CaptureResult:
        """Export the trace, summarise it, keep it gzipped unless it is larger than ``max_trace_bytes``."""
        trace_dir.mkdir(parents=True, exist_ok=True)
        raw = trace_dir / f"{stem}.pt.trace.json"
        self._profiler.export_chrome_trace(str(raw))
        summary = summarize_trace(load_trace(raw))
        gzipped = trace_dir / f"{stem}.pt.trace.json.gz"
        with raw.open("rb") as source, gzip.open(gzipped, "wb", compresslevel=3) as target:
            shutil.copyfileobj(source, target)
        raw.unlink()
        size = gzipped.stat().st_size
        if size <= max_trace_bytes:
            return CaptureResult(summary, gzipped, size, self.started_at)
        logger.warning("mfumon profile: trace of %d bytes over the %d-byte cap, not kept", size, max_trace_bytes)
        gzipped.unlink()
        return CaptureResult(summary, None, size, self.started_at)


def default_trace_dir() -> Path:
    """``MFUMON_PROFILE_DIR``, else ``mfumon-profiles`` in the temporary directory."""
    configured = os.environ.get("MFUMON_PROFILE_DIR")
    if configured:
        return Path(configured)
    import tempfile

    return Path(tempfile.gettempdir()) / "mfumon-profiles"
