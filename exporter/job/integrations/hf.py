"""Hugging Face Transformers integration: ``Trainer(..., callbacks=[MfumonTrainerCallback()])``.

Tokens per optimizer step come from ``state.num_input_tokens_seen`` (already summed over ranks by the Trainer)
when ``include_num_input_tokens_seen`` is on; otherwise from the shape of the ``input_ids`` the model receives
in training mode (a forward pre-hook on rank 0, multiplied by the world size). The sequence length for the
FLOPs formula is taken from the first batch unless given.

Job events come from the Trainer's own hooks: ``checkpoint_load`` when training resumes from a checkpoint
(``global_step > 0`` at ``on_train_begin``), ``eval`` (``on_evaluate``) and ``checkpoint_save`` (``on_save``), each
timed from the end of the step before it; start-up, restarts and failures come from the reporter itself.

Step times (`mfumon.exporter.job.reporter._phases`): the input wait runs from ``on_step_end`` to the next
``on_step_begin``, where the Trainer has fetched the step's batches (transformers >= 4.46 fetches all micro-batches
of a step there); gaps with an evaluation or a checkpoint save are dropped. The exposed gradient sync is measured
under DDP and FSDP; under DeepSpeed, which reduces after ``backward()`` returns, it is not reported. A single process
reports no communication (0).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from transformers import TrainerCallback

from mfumon.exporter.job.integrations._common import dtype_of_module, seq_len_of, tokens_in
from mfumon.exporter.job.reporter import JobReporter, describe_model
from mfumon.exporter.job.reporter._phases import StepPhases, distributed


class MfumonTrainerCallback(TrainerCallback):  # type: ignore[misc]
    """Reports a ``transformers.Trainer`` run's throughput to the mfumon aggregator (world process zero only).

    Args:
        reporter: a ready `JobReporter`; by default one is built at the first step from the Trainer's
            arguments (world size, bf16/fp16) and the model (parameters, config shape).
        model: overrides what is reported as the model (a `ModelSpec`, dict, HF config or module).
        seq_len: the sequence length; defaults to the width of the first training batch.
        **reporter_kwargs: passed to `JobReporter` (``job_id``, ``url``, ``name``, ``team``, ``tags``, ...).
    """

    def __init__(
        self,
        reporter: JobReporter | None = None,
        *,
        model: Any = None,
        seq_len: int | None = None,
        **reporter_kwargs: Any,
    ) -> None:
        self.reporter = reporter
        self._owns_reporter = reporter is None
        self._model_override = model
        self._seq_len = seq_len
        self._kwargs = reporter_kwargs
        self._hook: Any = None
        self._local_tokens = 0
        self._tokens_seen = 0
        self._step_started = 0.0
        self._phase_mark: float | None = None  # end of the last step, or of the eval/save after it
        self._init_ended: float | None = None
        self._pending_events: list[dict[str, Any]] = []  # events before the reporter exists (first step)
        self._phases: StepPhases | None = None

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._init_ended = perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if state.is_world_process_zero and int(state.global_step or 0) > 0:  # resumed from a checkpoint
            seconds = perf_counter() - self._init_ended if self._init_ended is not None else None
            self._event("checkpoint_load", seconds=seconds, step=int(state.global_step))
        self._tokens_seen = int(state.num_input_tokens_seen or 0)
        if state.is_world_process_zero and model is not None and self._hook is None:
            self._hook = model.register_forward_pre_hook(self._count_inputs, with_kwargs=True)
            self._phases = _phases(args, model)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step_started = perf_counter()
        self._phase_mark = None
        if self._phases is not None:
            self._phases.compute_started()

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._phase_mark = perf_counter()
        step_seconds = self._phase_mark - self._step_started
        if not state.is_world_process_zero:
            self._peer_step(args)
            return
        times = self._phases.step_ended() if self._phases is not None else None
        seen = int(state.num_input_tokens_seen or 0)
        if seen > self._tokens_seen:
            tokens = seen - self._tokens_seen  # gathered over all ranks by the Trainer
        else:
            tokens = self._local_tokens * max(int(args.world_size), 1)
        self._tokens_seen, self._local_tokens = seen, 0
        first = self.reporter is None
        if self.reporter is None:
            self.reporter = self._build_reporter(args, model)
            for event in self._pending_events:
                self.reporter.event(**event)
            self._pending_events.clear()
        if times is None:
            self.reporter.step(tokens, step_seconds=step_seconds)
        else:
            # The first step has no input-wait figure: its own time keeps its tokens out of the warm-up rule.
            step = times.step_seconds if times.step_seconds is not None else step_seconds if first else None
            self.reporter.step(tokens, step, times.comm_seconds, times.data_wait_seconds)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._timed_event("eval", int(state.global_step or 0))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._timed_event("checkpoint_save", int(state.global_step or 0))

    def _timed_event(self, event_type: str, step: int) -> None:
        """An eval or save that ran after a training step: its time is from that step's end (or the last one's)."""
        if self._phases is not None:
            self._phases.interrupt()  # the time since the last step went to this, not to waiting for data
        now = perf_counter()
        seconds = now - self._phase_mark if self._phase_mark is not None else None
        self._phase_mark = now if self._phase_mark is not None else None
        self._event(event_type, seconds=seconds, step=step)

    def _event(self, event_type: str, **fields: Any) -> None:
        if self.reporter is None:
            self._pending_events.append({"type": event_type, **fields})
        else:
            self.reporter.event(event_type, **fields)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._phases is not None:
            self._phases.close()
            self._phases = None
        if self.reporter is not None and self._owns_reporter:
            self.reporter.close(exit_code=0)

    def _count_inputs(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Forward pre-hook: count the token positions of each training micro-batch."""
        if not module.training:
            return
        ids = kwargs.get("input_ids")
        if ids is None and args:
            ids = args[0]
        if ids is None:
            embeds = kwargs.get("inputs_embeds")
            if embeds is not None:
                self._local_tokens += int(embeds.shape[0] * embeds.shape[1])
                self._seq_len = self._seq_len or int(embeds.shape[1])
            return
        if hasattr(ids, "numel"):
            self._local_tokens += tokens_in(ids)
            self._seq_len = self._seq_len or seq_len_of(ids)

    def _peer_step(self, args: Any) -> None:
        """Another rank: a reporter that reports nothing but profiles this rank when a profile names it."""
        if self.reporter is None and self._owns_reporter:
            options = {**self._kwargs, "rank": int(args.process_index), "num_gpus": max(int(args.world_size), 1)}
            self.reporter = JobReporter(**options)
        if self.reporter is not None:
            self.reporter.step(0)

    def _build_reporter(self, args: Any, model: Any) -> JobReporter:
        described = self._model_override if self._model_override is not None else model
        options: dict[str, Any] = {
            "num_gpus": max(int(args.world_size), 1),
            "dtype": _dtype(args, model),
            "recompute_activations": bool(args.gradient_checkpointing) or None,
            "rank": 0,
            **self._kwargs,
        }
        if described is not None:
            options.setdefault("model", describe_model(described, seq_len=self._seq_len))
        return JobReporter(**options)


def _phases(args: Any, model: Any) -> StepPhases:
    """Step timing for this Trainer: device events on a GPU; the sync measured where it is the exposed one."""
    import torch

    first = next(iter(model.parameters()), None)
    several = distributed(torch) or int(getattr(args, "world_size", 1) or 1) > 1
    phases = StepPhases(
        cuda=first is not None and first.device.type == "cuda",
        measure_sync=several and not getattr(args, "deepspeed", None),
    )
    phases.no_comm = not several
    return phases.watch(model)


def _dtype(args: Any, model: Any) -> str | None:
    """The Trainer's mixed-precision flag, else the dtype the model's weights are in."""
    if args.bf16:
        return "bf16"
    if args.fp16:
        return "fp16"
    if args.tf32:
        return "tf32"
    return dtype_of_module(model) if model is not None else None
