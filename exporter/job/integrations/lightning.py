"""Lightning integration: ``Trainer(callbacks=[MfumonLightningCallback(seq_len=2048)])``.

Each training batch counts as a step. Its tokens are the positions of the batch's token-id tensor (the
``input_ids``/``tokens`` entry of a dict, else the first integer tensor) times the world size, or what
``tokens_per_batch`` says. Works with ``lightning`` (2.x) or the older ``pytorch_lightning`` package.

Job events come from Lightning's hooks: ``checkpoint_load`` (``on_load_checkpoint``, the step resumed from),
``eval`` (validation start to end) and ``checkpoint_save`` (from ``on_save_checkpoint``, called as a save begins,
to the next hook: Lightning has none after the write), and a ``failure`` on ``on_exception``.

Step times (`mfumon.exporter.job.reporter._phases`): the input wait runs from ``on_train_batch_end`` to the next
``on_train_batch_start`` (Lightning has then fetched the batch and moved it to the device); gaps with validation or a
checkpoint save are dropped. The exposed gradient sync is timed from the loss (``on_before_backward``) under the DDP
and FSDP strategies; under DeepSpeed it is not reported; a single device reports no communication (0).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import perf_counter
from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:  # the standalone package name used before Lightning 2.0
    from pytorch_lightning import Callback  # type: ignore[assignment]

from mfumon.exporter.job.integrations._common import dtype_from_precision, find_token_tensor, seq_len_of, tokens_in
from mfumon.exporter.job.reporter import JobReporter, describe_model
from mfumon.exporter.job.reporter._phases import StepPhases

logger = logging.getLogger(__name__)

# Strategies that finish the gradient reduction in an autograd final callback (so its exposed part can be timed).
_SYNC_STRATEGIES = ("DDPStrategy", "DDPSpawnStrategy", "FSDPStrategy", "ModelParallelStrategy")


class MfumonLightningCallback(Callback):  # type: ignore[misc]
    """Reports a Lightning ``Trainer`` run's throughput to the mfumon aggregator (global rank 0 only).

    Args:
        reporter: a ready `JobReporter`; by default one is built when training starts.
        model: what is reported as the model; defaults to the LightningModule itself (parameter count, and
            the shape from its ``config`` attribute if it has one).
        seq_len: the sequence length; defaults to the width of the first batch's token ids.
        tokens_per_batch: tokens of one batch on one rank, as a number or a function of the batch.
        **reporter_kwargs: passed to `JobReporter` (``job_id``, ``url``, ``name``, ``team``, ...).
    """

    def __init__(
        self,
        reporter: JobReporter | None = None,
        *,
        model: Any = None,
        seq_len: int | None = None,
        tokens_per_batch: int | Callable[[Any], int] | None = None,
        **reporter_kwargs: Any,
    ) -> None:
        self.reporter = reporter
        self._owns_reporter = reporter is None
        self._model = model
        self._seq_len = seq_len
        self._tokens_per_batch = tokens_per_batch
        self._kwargs = reporter_kwargs
        self._batch_started = 0.0
        self._warned = False
        self._save_started: float | None = None
        self._eval_started: float | None = None
        self._pending_events: list[dict[str, Any]] = []  # events before the reporter exists (first batch)
        self._phases: StepPhases | None = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if trainer.is_global_zero:
            several = int(trainer.world_size) > 1
            strategy = type(trainer.strategy).__name__
            self._phases = StepPhases(
                cuda=getattr(pl_module.device, "type", "cpu") == "cuda",
                measure_sync=several and strategy in _SYNC_STRATEGIES,
            )
            self._phases.no_comm = not several

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._save_done(trainer)
        self._batch_started = perf_counter()
        if self._phases is not None:
            self._phases.compute_started()

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        if self._phases is not None:
            self._phases.backward_starting(loss)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        step_seconds = perf_counter() - self._batch_started
        if not trainer.is_global_zero:
            self._peer_step(trainer)
            return
        times = self._phases.step_ended() if self._phases is not None else None
        local_tokens = self._count(batch)
        first = self.reporter is None
        if self.reporter is None:
            self.reporter = self._build_reporter(trainer, pl_module)
            for event in self._pending_events:
                self.reporter.event(**event)
            self._pending_events.clear()
        tokens = local_tokens * max(int(trainer.world_size), 1)
        if times is None:
            self.reporter.step(tokens, step_seconds=step_seconds)
        else:
            # The first batch has no input-wait figure: its own time keeps its tokens out of the warm-up rule.
            step = times.step_seconds if times.step_seconds is not None else step_seconds if first else None
            self.reporter.step(tokens, step, times.comm_seconds, times.data_wait_seconds)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._save_done(trainer)
        self._eval_started = perf_counter()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._interrupt()  # the time since the last batch went to validation, not to waiting for data
        if self._eval_started is not None and trainer.is_global_zero:
            self._event("eval", seconds=perf_counter() - self._eval_started, step=int(trainer.global_step))
        self._eval_started = None

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self._interrupt()
        self._save_started = perf_counter()

    def on_load_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        if trainer.is_global_zero:
            step = checkpoint.get("global_step")
            self._event("checkpoint_load", step=int(step) if isinstance(step, int) else None)

    def _save_done(self, trainer: Any) -> None:
        if self._save_started is not None and trainer.is_global_zero:
            self._event("checkpoint_save", seconds=perf_counter() - self._save_started, step=int(trainer.global_step))
        self._save_started = None

    def _event(self, event_type: str, **fields: Any) -> None:
        if self.reporter is None:
            self._pending_events.append({"type": event_type, **fields})
        else:
            self.reporter.event(event_type, **fields)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._save_done(trainer)
        self._close(0)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._close(1)

    def _interrupt(self) -> None:
        if self._phases is not None:
            self._phases.interrupt()

    def _close(self, exit_code: int) -> None:
        self._phases = None
        if self.reporter is not None and self._owns_reporter:
            self.reporter.close(exit_code=exit_code)

    def _count(self, batch: Any) -> int:
        if callable(self._tokens_per_batch):
            return int(self._tokens_per_batch(batch))
        if self._tokens_per_batch is not None:
            return int(self._tokens_per_batch)
        ids = find_token_tensor(batch)
        if ids is None:
            if not self._warned:
                logger.warning("mfumon: no token ids found in the batch; pass tokens_per_batch= to count tokens")
                self._warned = True
            return 0
        self._seq_len = self._seq_len or seq_len_of(ids)
        return tokens_in(ids)

    def _peer_step(self, trainer: Any) -> None:
        """Another rank: a reporter that reports nothing but profiles this rank when a profile names it."""
        if self.reporter is None and self._owns_reporter:
            options = {**self._kwargs, "rank": int(trainer.global_rank), "num_gpus": max(int(trainer.world_size), 1)}
            self.reporter = JobReporter(**options)
        if self.reporter is not None:
            self.reporter.step(0)

    def _build_reporter(self, trainer: Any, pl_module: Any) -> JobReporter:
        options: dict[str, Any] = {
            "num_gpus": max(int(trainer.world_size), 1),
            "dtype": dtype_from_precision(trainer.precision),
            "rank": int(trainer.global_rank),
            **self._kwargs,
        }
        described = self._model if self._model is not None else pl_module
        options["model"] = describe_model(described, seq_len=self._seq_len)
        return JobReporter(**options)
