"""From log observations to reporter calls, and the messages that keep ``mfumon wrap`` from ever being silent.

A line that is recognised but cannot become a report (samples/s without a sequence length, a per-GPU figure without
the GPU count, FLOP/s without a model) is said once, on stderr, with the flag that supplies what is missing; so is
an observation's note (which of two figures the trainer printed was reported). At the end of the command, a run that
produced no report says why.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from mfumon.exporter.job.models import ModelSpec
from mfumon.exporter.job.wrap.patterns import FALLBACK_PATTERNS, Observation, ParseContext, title_of

logger = logging.getLogger("mfumon.exporter.job.wrap")

#: What each kind of missing input is, and the flag that supplies it.
MISSING_HELP = {
    "seq_len": "the sequence length: pass --seq-len N (or run the command with its --seq-length/--max_seq_length N)",
    "num_gpus": "the number of GPUs (its figures are per GPU): pass --num-gpus N",
    "tokens_per_step": "the tokens one iteration processes on all GPUs together: pass --tokens-per-step N",
    "hf_token_counter": (
        "a token count: run the Trainer with include_num_input_tokens_seen=True, or report from inside it with "
        "mfumon.exporter.integrations.MfumonTrainerCallback"
    ),
    "model": "the model, to turn its FLOP/s into tokens/s: pass --model config.json, --params N or --flops-per-token",
    "rate_scope": (
        "to know whether its figure is one GPU's or the whole job's (the trainer changed that between versions; "
        "see docs/reference/wrap-formats.md): pass --rate-scope device or --rate-scope job"
    ),
    "current_rate": (
        "a current rate: its figure is an average since the start, and the line prints no elapsed time or token "
        "count to turn it into the interval's rate. Describe a current figure of the log with --pattern"
    ),
}


class ReportSink(Protocol):
    """What the relay hands its figures to: the job's `JobReporter`, or ``--explain``'s record of what it would send."""

    kind: str

    def update(self, **fields: Any) -> None: ...

    def record_throughput(
        self,
        tokens_per_second: float,
        *,
        step_seconds: float | None = None,
        comm_seconds: float | None = None,
        data_wait_seconds: float | None = None,
        source: str = "",
        step: int | None = None,
    ) -> None: ...

    def record_times(
        self,
        *,
        step_seconds: float | None = None,
        comm_seconds: float | None = None,
        data_wait_seconds: float | None = None,
    ) -> None: ...


class Relay:
    """Turns observations into `JobReporter` calls, filling in what a line alone cannot say."""

    def __init__(
        self,
        reporter: ReportSink,
        model: ModelSpec | None,
        context: ParseContext,
        *,
        kind_given: bool,
    ) -> None:
        self.reporter = reporter
        self.model = model
        self.context = context
        self.kind = reporter.kind
        self._kind_given = kind_given
        self._said: set[tuple[str, str]] = set()
        self._pending: set[tuple[str, str]] = set()  # missing once: said at the second time, or at the end
        self._notes: set[str] = set()  # what a format chose between two printed figures, said once each
        self._primary = False  # a format other than a fallback has given a rate
        self.recognised = 0  # observations from lines some format understood
        self.recorded = 0  # throughputs handed to the reporter

    def observe(self, obs: Observation) -> None:
        self.recognised += 1
        if obs.kind and obs.kind != self.kind and not self._kind_given:
            self.kind = obs.kind
            self.reporter.update(kind=obs.kind)
        self._learn_seq_len()
        for key in obs.missing:
            self._say_missing(obs.pattern, key)
        if obs.note and obs.note not in self._notes:
            self._notes.add(obs.note)
            logger.warning("mfumon wrap: %s", obs.note)
        rate = self._rate(obs)
        fallback = obs.pattern in FALLBACK_PATTERNS
        if rate is not None and fallback and self._primary:
            rate = None  # the trainer's own lines are read: a fallback format would only blur them
        if rate is not None and rate >= 0:
            self._primary = self._primary or not fallback
            self.recorded += 1
            self.reporter.record_throughput(
                rate,
                step_seconds=obs.step_seconds,
                comm_seconds=obs.comm_seconds,
                data_wait_seconds=obs.data_wait_seconds,
                source=obs.source,
                step=obs.step,
            )
        elif obs.has_timing:
            self.reporter.record_times(comm_seconds=obs.comm_seconds, data_wait_seconds=obs.data_wait_seconds)

    def finish(self, lines: int) -> None:
        """At the command's end: say so if nothing was ever reported."""
        if self.recorded:
            return
        for pattern, key in sorted(self._pending):
            self._say_missing(pattern, key, now=True)
        if not self.recognised:
            logger.warning(
                "mfumon wrap: no throughput line recognised in %d line(s) of output, so nothing was reported; "
                "see the formats mfumon wrap reads in the README, or describe your trainer's line with --pattern",
                lines,
            )
        elif not self._said:
            logger.warning("mfumon wrap: throughput lines were recognised but none gave a rate; nothing was reported")

    def _rate(self, obs: Observation) -> float | None:
        rate, flops = obs.tokens_per_second, obs.flops_per_second_per_gpu
        num_gpus = self.context.num_gpus
        if rate is None and flops is not None:
            per_token = self.model.flops_per_token_for(self.kind) if self.model else None
            if not per_token:
                self._say_missing(obs.pattern, "model")
                return None
            if not num_gpus:
                self._say_missing(obs.pattern, "num_gpus")
                return None
            return flops * num_gpus / per_token
        if rate and flops and self.model is None and num_gpus:
            # The trainer printed both: its own FLOPs per token stands in for a model nobody described.
            self.model = ModelSpec(flops_per_token=flops * num_gpus / rate)
            self.reporter.update(model=self.model)
        return rate

    def _learn_seq_len(self) -> None:
        """A sequence length read from the log (Megatron's argument dump, torchtitan) completes the model."""
        seq_len = self.context.seq_len
        if seq_len and self.model is not None and self.model.seq_len is None and self.model.params is not None:
            self.model = self.model.replace(seq_len=seq_len)
            self.reporter.update(model=self.model)

    def _say_missing(self, pattern: str, key: str, *, now: bool = False) -> None:
        """Say once what a format needs, while nothing is reported; a first occurrence may resolve itself (a
        sequence length printed later), so it is said at the second one or at the end."""
        title = title_of(pattern)
        if self.recorded or (title, key) in self._said:
            return
        if not now and (pattern, key) not in self._pending:
            self._pending.add((pattern, key))
            return
        self._said.add((title, key))
        logger.warning(
            "mfumon wrap: %s lines seen, but they need %s. Nothing is reported from them until then.",
            title,
            MISSING_HELP.get(key, key),
        )
