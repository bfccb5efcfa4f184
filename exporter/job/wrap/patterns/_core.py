"""What every log format shares: the observation a line yields, the job context it is read in, number parsing.

A format turns a matching line into an `Observation` of *whole-job* throughput. A line that is recognised but cannot
be converted (samples/s without a sequence length, a per-GPU figure without a GPU count) yields an observation whose
``missing`` names what is needed, so that ``mfumon wrap`` can say which flag supplies it instead of staying silent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mfumon.exporter.job.wrap.patterns._declared import Declaration

#: A number as logs print it: ``12,345``, ``1.2e+04``, ``14.2K``, ``1.07M`` (nanotron also prints ``B`` for 1e9).
NUMBER = r"[-+]?(?:\d[\d,_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[kKMGBT]?"
_SUFFIX = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12}
_SEPARATORS = str.maketrans("", "", ",_ '\u00a0\u202f")


def to_number(text: str) -> float:
    """Parse a logged number: thousands separators (``12,345``, ``12_345``), quotes (``'3319'``), exponents
    (``1.2e+04``) and magnitude suffixes ``K``, ``M``, ``G``/``B`` (1e9) and ``T`` (``14.2K`` is 14,200).

    Raises ``ValueError`` for anything else.
    """
    cleaned = text.strip().strip("'\"").strip().translate(_SEPARATORS)
    scale = 1.0
    if cleaned and cleaned[-1] in _SUFFIX:
        scale = _SUFFIX[cleaned[-1]]
        cleaned = cleaned[:-1]
    return float(cleaned) * scale


@dataclass(frozen=True)
class Observation:
    """What one log line says about the job, as whole-job figures.

    ``tokens_per_second`` is the whole job's throughput; ``flops_per_second_per_gpu`` the achieved model FLOP/s of
    one GPU where the trainer prints it (Megatron-LM, NeMo, MaxText, nanotron). ``step_seconds``, ``comm_seconds``
    and ``data_wait_seconds`` are per step (the last two exposed, not overlapped). ``missing`` lists what the line
    needs to become a throughput (``seq_len``, ``num_gpus``, ``tokens_per_step``): nothing is reported from it.
    ``note`` is a sentence ``mfumon wrap`` says once on stderr, where the format had to choose between two figures
    the trainer printed (LitGPT's summary whose ``Tok/sec`` disagrees with its total tokens ÷ training time).
    """

    pattern: str
    tokens_per_second: float | None = None
    flops_per_second_per_gpu: float | None = None
    step_seconds: float | None = None
    comm_seconds: float | None = None
    data_wait_seconds: float | None = None
    step: int | None = None
    source: str = ""
    kind: str | None = None
    missing: tuple[str, ...] = ()
    note: str = ""

    @property
    def has_timing(self) -> bool:
        return self.comm_seconds is not None or self.data_wait_seconds is not None


Result = Observation | Sequence[Observation] | None
#: A multi-line report being read: called with each following line (None at the end of the output), it returns
#: whether the line was part of the block and, once the block ends, what it observed.
Block = Callable[[str | None, "ParseContext"], tuple[bool, Sequence[Observation]]]


@dataclass
class ParseContext:
    """What a format may need besides the line: the job's shape, the arrival time, per-format memory.

    ``num_gpus`` is None when the GPU count is unknown (per-GPU figures then cannot be scaled to the job);
    ``tokens_per_step`` is the whole job's tokens of one iteration when the user gave it; ``micro_batch_size`` the
    per-GPU micro batch when the command line states it (LitGPT's ``--train.micro_batch_size``).
    """

    seq_len: int | None = None
    num_gpus: int | None = None
    tokens_per_step: int | None = None
    micro_batch_size: int | None = None
    rate_scope: str | None = None  # --rate-scope: what an unsettled per-device/whole-job figure is ("job", "device")
    now: float = 0.0
    memory: dict[str, Any] = field(default_factory=dict)
    block: Block | None = None

    def open_block(self, block: Block) -> None:
        """Hand the following lines to ``block`` until it declines one (a multi-line report such as a table)."""
        self.block = block

    # -- turning a logged rate into whole-job tokens/s, or saying what is missing ------------------------------

    def whole_job(self, pattern: str, tokens_per_second: float, **extra: Any) -> Observation:
        return Observation(pattern, tokens_per_second=tokens_per_second, **extra)

    def per_gpu(self, pattern: str, tokens_per_second_per_gpu: float, **extra: Any) -> Observation:
        """A per-device figure times the job's GPUs (one figure per line, never summed over ranks)."""
        if not self.num_gpus:
            return Observation(pattern, missing=("num_gpus",), **extra)
        return Observation(pattern, tokens_per_second=tokens_per_second_per_gpu * self.num_gpus, **extra)

    def samples(self, pattern: str, samples_per_second: float, *, per_gpu: bool = False, **extra: Any) -> Observation:
        """Samples/s times the sequence length (and the GPUs, for a per-device figure)."""
        missing: tuple[str, ...] = ("seq_len",) if not self.seq_len else ()
        if per_gpu and not self.num_gpus:
            missing += ("num_gpus",)
        if missing:
            return Observation(pattern, missing=missing, **extra)
        rate = samples_per_second * self.seq_len * (self.num_gpus if per_gpu else 1)  # type: ignore[operator]
        return Observation(pattern, tokens_per_second=rate, **extra)

    def iterations(self, pattern: str, iterations_per_second: float, **extra: Any) -> Observation:
        """Iterations/s times the whole job's tokens per iteration (``--tokens-per-step``)."""
        if not self.tokens_per_step:
            return Observation(pattern, missing=("tokens_per_step",), **extra)
        return Observation(pattern, tokens_per_second=iterations_per_second * self.tokens_per_step, **extra)


Handler = Callable[[re.Match[str], str, ParseContext], Result]


@dataclass(frozen=True)
class Format:
    """One log format: lines containing ``marker`` (a cheap substring test) and matching ``regex`` go to ``handler``.

    ``name`` is the key observations carry; ``title`` is how messages name the trainer; ``declarations`` what the
    figures it reads mean, one per trainer or version whose lines it reads (every built-in format has at least one:
    the docs' formats table is generated from them).
    """

    name: str
    title: str
    marker: str
    regex: re.Pattern[str]
    handler: Handler
    declarations: tuple[Declaration, ...] = ()
