"""Input wait and exposed gradient sync of each training step, measured from hooks: no timing code in the loop.

**Input wait** runs from the end of one step (`StepPhases.step_ended`) to the start of the next step's compute
(`StepPhases.compute_started`: the first training forward of the watched module, or the framework's batch-start
callback). On a GPU both ends are CUDA events recorded on the current stream, so the figure is the time the *device*
sat idle waiting for the host: a loader that fetches the next batch while the GPU still works costs, and shows,
nothing. On the CPU it is wall time. A gap holding anything but waiting (an evaluation forward, a checkpoint save the
framework announces) is dropped, never counted as input wait.

**Exposed gradient sync**: DDP and FSDP finish the gradient reduction in an autograd *final callback* that makes the
compute stream wait for the collectives still running. When backward starts (a hook on the loss or the model's
output), one callback of ours is queued ahead of theirs and records a mark once every gradient is computed; it
queues a second one, which runs after theirs. The time between is the reduction that backward compute did not hide.
Frameworks that reduce after ``backward()`` returns (DeepSpeed) or communicate inside forward and backward (tensor,
pipeline, expert parallelism; ZeRO-3/FSDP parameter all-gathers) are not seen this way: callers enable the sync
measurement only where it is true.

Per step this costs two or four event records (or clock reads) and a few Python hook calls; results are read when
the events have completed, a step or two later, never by waiting on the device. Every hook is guarded: an error
disables the measurement and is logged once; it never reaches the training step.
"""

from __future__ import annotations

import collections
import logging
import sys
from collections.abc import Mapping
from time import perf_counter
from typing import Any, NamedTuple

logger = logging.getLogger("mfumon.exporter.job.reporter")

_MAX_PENDING = 64  # intervals waiting for their events; past that the oldest are dropped (a stalled device)


class StepTimes(NamedTuple):
    """What one `StepPhases.step_ended` call knows: this step's host time, and the means of finished intervals.

    ``step_seconds`` runs from the end of the previous step, so it holds the input wait; it is None for the first
    step and after an interruption, the steps without an input-wait figure, so that the mean step time and the mean
    wait cover the same steps. ``compute_seconds`` (compute start to end) is there for every step.
    """

    step_seconds: float | None = None
    data_wait_seconds: float | None = None
    comm_seconds: float | None = None
    compute_seconds: float | None = None


class _Marks:
    """Points in time on the host clock (CPU training, gloo) or on a CUDA stream (events, read once complete)."""

    def __init__(self, torch: Any, cuda: bool) -> None:
        self.cuda = cuda
        self._event = torch.cuda.Event if cuda else None
        # ``Event.record()`` without a stream looks the device up through Python on every call: 10.6 µs a record on
        # an H200, against 6.3 µs with the device index known (input-wait timing 110 -> 50 µs per step).
        self._cuda = torch.cuda if cuda else None
        self._device: int | None = None  # read at the first mark, inside the loop (after its set_device)
        self._free: list[Any] = []

    def mark(self) -> Any:
        if not self.cuda:
            return perf_counter()
        event = self._free.pop() if self._free else self._event(enable_timing=True)  # type: ignore[misc]
        if self._device is None:
            self._device = self._cuda.current_device()  # type: ignore[union-attr]
        event.record(self._cuda.current_stream(self._device))  # type: ignore[union-attr]
        return event

    def seconds(self, start: Any, end: Any) -> float | None:
        """The time from ``start`` to ``end``; None while the device has not reached ``end``."""
        if not self.cuda:
            return float(end - start)
        if not end.query():
            return None
        return float(start.elapsed_time(end)) / 1000.0

    def release(self, *marks: Any) -> None:
        if self.cuda:
            self._free.extend(m for m in marks if m is not None)


class StepPhases:
    """Measures the input wait and (optionally) the exposed gradient sync of each step of one training loop.

    Args:
        cuda: time on the device with CUDA events (the model is on a GPU); else on the host clock.
        measure_sync: time the end-of-backward gradient sync (DDP, FSDP); only where that sync is the exposed one.
    """

    def __init__(self, *, cuda: bool = False, measure_sync: bool = False) -> None:
        self._torch = sys.modules["torch"]
        self._engine = self._torch.autograd.Variable._execution_engine
        self._marks = _Marks(self._torch, cuda)
        self.measure_sync = measure_sync
        self.no_comm = False  # a single process, no process group: there is no communication to expose
        self.enabled = True
        self._step = 0
        self._boundary: Any = None  # mark at the end of the previous step, None after an interruption
        self._boundary_host: float | None = None
        self._started_host: float | None = None  # host time the current step's compute started
        self._sync_armed = False  # a backward of this step has queued its callbacks
        self._sync_start: Any = None
        self._pending: collections.deque[tuple[int, bool, Any, Any]] = collections.deque()  # (step, is sync, a, b)
        self._handles: list[Any] = []

    # -- events of the training loop ---------------------------------------------------------------------------------

    def compute_started(self) -> None:
        """The current step's compute begins (its batch is ready); only the first call of a step counts."""
        if self._started_host is not None or not self.enabled:
            return
        self._started_host = perf_counter()
        if self._boundary is not None:
            try:
                self._queue(self._step, False, self._boundary, self._marks.mark())
            except Exception:
                self._fail()
            self._boundary = None

    def interrupt(self) -> None:
        """The time since the last step is not input wait (evaluation, checkpoint): drop it."""
        if self._boundary is not None:
            self._marks.release(self._boundary)
        self._boundary = self._boundary_host = None

    def backward_starting(self, tensor: Any) -> None:
        """Backward will run from ``tensor`` (the loss, or an output it comes from): time the sync at its end."""
        if self._sync_armed or not (self.enabled and self.measure_sync):
            return
        if getattr(tensor, "grad_fn", None) is not None and self._torch.is_grad_enabled():
            try:  # a tensor hook: it runs before hooks registered on the same tensor later (FSDP's, inside forward)
                tensor.register_hook(self._on_backward)
            except Exception:
                self._fail()

    def step_ended(self) -> StepTimes:
        """The step is over: its host time, and the mean input wait and sync of the intervals finished so far."""
        if not self.enabled:
            return StepTimes()
        now = perf_counter()
        step = now - self._boundary_host if self._boundary_host is not None else None
        compute = now - self._started_host if self._started_host is not None else None
        times = StepTimes(step, None, 0.0 if self.no_comm else None, compute)
        try:
            if self._pending:
                times = self._harvest(step, compute)
            self._step += 1
            self._sync_armed = False  # a backward that raised never ran its final callbacks
            if self._boundary is not None:
                self._marks.release(self._boundary)
            self._boundary = self._marks.mark()
        except Exception:
            self._fail()
        self._boundary_host, self._started_host = now, None
        return times

    # -- watching a module --------------------------------------------------------------------------------------------

    def watch(self, module: Any) -> StepPhases:
        """Hook ``module``: its first training forward after a step starts compute, its output starts backward.

        A forward in eval mode or without grad (evaluation) marks the gap it falls in as not input wait.
        """
        self._handles.append(module.register_forward_pre_hook(self._pre_forward, prepend=True))
        if self.measure_sync:
            self._handles.append(module.register_forward_hook(self._post_forward, prepend=True))
        return self

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _pre_forward(self, module: Any, args: Any) -> None:
        if module.training and self._torch.is_grad_enabled():
            self.compute_started()
        elif self._started_host is None:
            self.interrupt()

    def _post_forward(self, module: Any, args: Any, output: Any) -> None:
        if module.training and not self._sync_armed:
            tensor = _grad_tensor(output)
            if tensor is not None:
                self.backward_starting(tensor)

    # -- the sync at the end of backward: two autograd final callbacks around the framework's -----------------------

    def _on_backward(self, grad: Any) -> None:
        if self._sync_armed or not self.enabled:
            return
        self._sync_armed = True
        try:
            self._engine.queue_callback(self._gradients_done)
        except Exception:
            self._fail()

    def _gradients_done(self) -> None:
        """First final callback of this backward: every gradient is computed, the reduction may still run."""
        try:
            self._sync_start = self._marks.mark()
            self._engine.queue_callback(self._synced)
        except Exception:
            self._fail()

    def _synced(self) -> None:
        """Queued by `_gradients_done`, so it runs after the callbacks DDP/FSDP queued during backward."""
        self._sync_armed = False
        start, self._sync_start = self._sync_start, None
        if start is not None and self.enabled:
            try:
                self._queue(self._step, True, start, self._marks.mark())
            except Exception:
                self._fail()

    # -- results ------------------------------------------------------------------------------------------------------

    def _queue(self, step: int, sync: bool, start: Any, end: Any) -> None:
        self._pending.append((step, sync, start, end))
        if len(self._pending) > _MAX_PENDING:
            _, _, old_start, old_end = self._pending.popleft()
            self._marks.release(old_start, old_end)

    def _harvest(self, step_seconds: float | None, compute_seconds: float | None) -> StepTimes:
        wait_sum, wait_n = 0.0, 0
        syncs: dict[int, float] = {}
        pending, marks = self._pending, self._marks
        while pending:
            step, sync, start, end = pending[0]
            seconds = marks.seconds(start, end)
            if seconds is None:
                break  # later intervals were recorded later on the same stream: not done either
            pending.popleft()
            marks.release(start, end)
            if sync:
                syncs[step] = syncs.get(step, 0.0) + max(seconds, 0.0)
            else:
                wait_sum += max(seconds, 0.0)
                wait_n += 1
        comm = sum(syncs.values()) / len(syncs) if syncs else (0.0 if self.no_comm else None)
        return StepTimes(step_seconds, wait_sum / wait_n if wait_n else None, comm, compute_seconds)

    def _fail(self) -> None:
        """An error in a hook: stop measuring (logged once) rather than disturb the training step."""
        if self.enabled:
            self.enabled = False
            logger.warning("mfumon: step timing disabled after an error in its hooks", exc_info=True)


def for_module(module: Any) -> StepPhases:
    """Phases of the loop that trains ``module``, hooked to it.

    A DDP- or FSDP-wrapped module (``DistributedDataParallel``, ``FullyShardedDataParallel``, ``fully_shard``) gets
    the sync measured and its inner module hooked (inside the wrapper, so that our callbacks are queued first); a
    plain module in a job with a process group gets no sync figure (its communication is not ours to see); a single
    process without one reports none, which is exact.
    """
    torch = sys.modules["torch"]
    inner, wrapped = module, False
    ddp = torch.nn.parallel.DistributedDataParallel
    fsdp = sys.modules.get("torch.distributed.fsdp")
    fsdp1 = getattr(fsdp, "FullyShardedDataParallel", None)
    fsdp2 = getattr(fsdp, "FSDPModule", None)
    if isinstance(module, ddp) or (fsdp1 is not None and isinstance(module, fsdp1)):
        inner, wrapped = module.module, True
    elif fsdp2 is not None and isinstance(module, fsdp2):
        wrapped = True
    first = next(iter(inner.parameters()), None)
    phases = StepPhases(cuda=first is not None and first.device.type == "cuda", measure_sync=wrapped)
    phases.no_comm = not wrapped and not distributed(torch)
    return phases.watch(inner)


def distributed(torch: Any) -> bool:
    """Whether this process is one of several in a process group."""
    dist = torch.distributed
    return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)


def _grad_tensor(output: Any, depth: int = 0) -> Any:
    """The first tensor of a forward's output that backward will pass through (``loss`` first for HF outputs)."""
    if getattr(output, "requires_grad", False) and hasattr(output, "register_hook"):
        return output
    if depth > 1:
        return None
    if isinstance(output, Mapping):
        values = [output["loss"]] if output.get("loss") is not None else list(output.values())
    elif isinstance(output, (tuple, list)):
        values = list(output)
    else:
        return None
    for value in values:
        found = _grad_tensor(value, depth + 1)
        if found is not None:
            return found
    return None
