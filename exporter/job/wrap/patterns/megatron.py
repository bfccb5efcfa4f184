"""Megatron-LM and the trainers built on its ``training_log`` (Megatron-DeepSpeed, GPT-NeoX), and its timers.

Megatron-LM (``megatron/training/training.py``; TFLOP/s only with ``--log-throughput``)::

     [2025-04-13 23:41:12] iteration      100/    1000 | consumed samples:        51200 | elapsed time per
     iteration (ms): 1250.0 | throughput per GPU (TFLOP/s/GPU): 187.5 | learning rate: 1.000000E-04 |
     global batch size:   512 | lm loss: 2.345678E+00 | ...

Megatron-DeepSpeed adds ``actual seqlen:  4096 | ... | samples per second: 53.753 | tokens per gpu per second (tgs):
1146.733 | TFLOPs: 69.85 |``; GPT-NeoX (``megatron/logging.py``) starts with `` samples/sec: 12.345 |`` and prints
``approx flops per GPU: 123.4TFLOPS``. Neither FLOP/s figure is used: both count activation recomputation (a
hardware, not a model, figure). Tokens/s is global batch x sequence length ÷ iteration time, or samples/s x sequence
length; the sequence length comes from the line (``actual seqlen``), ``--seq-len``, the command's ``--seq-length``,
or the argument dump Megatron prints at start-up (``  seq_length ........ 4096``).

With ``--timing-log-level 1`` (or 2) Megatron prints per-iteration timers after each log line::

    (min, max) time across ranks (ms):
        forward-backward ...............................: (1190.23, 1190.45)
        batch-generator ................................: (0.45, 0.62)
        all-grads-sync .................................: (10.53, 12.10)

The collective timers (``all-grads-sync``, ``params-all-gather``, ``*-all-reduce``) are the exposed communication:
Megatron starts and stops them around the wait that ends the overlapped gradient reduction. ``batch-generator`` is
the data wait. Pipeline send/recv timers are left out: their waits mix transfer time with pipeline bubbles.
The value used per timer is the midpoint of (min, max) across ranks, the max with ``--timing-log-option max``, and
the mean of every rank with ``--timing-log-option all``.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_ITERATION = re.compile(r"\biteration\s+(?P<step>\d+)\s*/\s*\d+\s*\|.*?elapsed time per iteration \((?P<unit>ms|s)\):")
_ELAPSED = re.compile(r"elapsed time per iteration \((?P<unit>ms|s)\):\s*(?P<t>" + NUMBER + ")")
_GBS = re.compile(r"global batch size:\s*(?P<v>\d+)")
_ACTUAL_SEQ = re.compile(r"actual seqlen:\s*(?P<v>\d+)")
_SAMPLES = re.compile(r"(?:samples per second|samples/sec):\s*(?P<v>" + NUMBER + ")")
_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*(?P<v>" + NUMBER + ")")


def _training_log(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    elapsed = _ELAPSED.search(line)
    if elapsed is None:
        return None
    step_seconds = to_number(elapsed["t"]) / (1000.0 if elapsed["unit"] == "ms" else 1.0)
    step = int(match["step"])
    actual = _ACTUAL_SEQ.search(line)
    if actual is not None and ctx.seq_len is None:
        ctx.seq_len = int(actual["v"])  # Megatron-DeepSpeed states it: other lines (DeepSpeed's timer) can use it
    seq_len = int(actual["v"]) if actual else ctx.seq_len
    tflops = _TFLOPS.search(line)
    flops = to_number(tflops["v"]) * 1e12 if tflops else None
    gbs, samples = _GBS.search(line), _SAMPLES.search(line)
    rate = None
    if seq_len and gbs and step_seconds > 0:
        rate = int(gbs["v"]) * seq_len / step_seconds
    elif seq_len and samples:
        rate = to_number(samples["v"]) * seq_len
    if rate is None and flops is None:
        return Observation("megatron", step_seconds=step_seconds, step=step, missing=("seq_len",))
    return Observation("megatron", rate, flops, step_seconds=step_seconds, step=step)


# -- the argument dump at start-up: "  seq_length ...................................... 4096" -----------------
_ARG_SEQ_LEN = re.compile(r"^\s*seq_length\s\.{3,}\s*(?P<v>\d+)\s*$")


def _argument_dump(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if ctx.seq_len is None:
        ctx.seq_len = int(match["v"])
    return None


# -- timers ------------------------------------------------------------------------------------------------------
_TIMERS_HEADER = re.compile(r"(?P<mode>\(min, max\) time|max time|times) across ranks \(ms\):\s*$")
_TIMER_PAIR = re.compile(r"^\s+(?P<name>[\w-]+) \.*: \((?P<min>" + NUMBER + r"), (?P<max>" + NUMBER + r")\)\s*$")
_TIMER_ONE = re.compile(r"^\s+(?P<name>[\w-]+) \.*: (?P<v>" + NUMBER + r")\s*$")
_TIMER_NAME = re.compile(r"^\s+(?P<name>[\w-]+):\s*$")  # --timing-log-option all: a name, then one line per rank
_TIMER_RANK = re.compile(r"^\s+rank\s+\d+: (?P<v>" + NUMBER + r")\s*$")
_COMM_SUFFIXES = ("all-reduce", "all-gather", "grads-sync", "reduce-scatter")
_DATA_TIMER = "batch-generator"


class _TimersBlock:
    """Collects one timers block; emits its comm and data-wait times when a line that is not a timer arrives."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}
        self.current: str | None = None

    def __call__(self, line: str | None, ctx: ParseContext) -> tuple[bool, list[Observation]]:
        if line is not None and self._take(line):
            return True, []
        return False, self._emit()

    def _take(self, line: str) -> bool:
        pair = _TIMER_PAIR.match(line)
        if pair is not None:
            self.values[pair["name"]] = [(to_number(pair["min"]) + to_number(pair["max"])) / 2.0]
            return True
        one = _TIMER_ONE.match(line)
        if one is not None:
            self.values[one["name"]] = [to_number(one["v"])]
            return True
        name = _TIMER_NAME.match(line)
        if name is not None:
            self.current = name["name"]
            self.values[self.current] = []
            return True
        rank = _TIMER_RANK.match(line)
        if rank is not None and self.current is not None:
            self.values[self.current].append(to_number(rank["v"]))
            return True
        return False

    def _emit(self) -> list[Observation]:
        means = {name: sum(v) / len(v) / 1000.0 for name, v in self.values.items() if v}
        comm = [seconds for name, seconds in means.items() if name.endswith(_COMM_SUFFIXES)]
        data = means.get(_DATA_TIMER)
        if not comm and data is None:
            return []
        return [Observation("megatron_timers", comm_seconds=sum(comm) if comm else None, data_wait_seconds=data)]


def _timers(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    ctx.open_block(_TimersBlock())
    return None


FORMATS = (
    Format(
        "megatron",
        "Megatron-LM",
        "elapsed time per iteration",
        _ITERATION,
        _training_log,
        (
            Declaration(
                trainer="Megatron-LM",
                versions="core 0.x, main @ 00caa53",
                example=(
                    "iteration 100/ 1000 | ... elapsed time per iteration (ms): 1250.0 | throughput per GPU "
                    "(TFLOP/s/GPU): 187.5 | ... global batch size: 512 |"
                ),
                key="elapsed time per iteration (ms)",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends="global batch x seq length ÷ iteration time; the TFLOP/s stands in for a model nobody described",
                needs=("seq_len",),
            ),
            Declaration(
                trainer="Megatron-DeepSpeed",
                versions="DeepSpeed 0.13 era (2024)",
                example=(
                    "iteration 199/ 317892 | ... elapsed time per iteration (ms): 14287.5 | ... global batch size: "
                    "768 | ... actual seqlen: 4096 | ... samples per second: 53.753 |"
                ),
                key="elapsed time per iteration (ms)",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends=(
                    "global batch x `actual seqlen` ÷ iteration time (its `TFLOPs` counts recomputation and is not "
                    "used)"
                ),
            ),
            Declaration(
                trainer="GPT-NeoX",
                versions="main @ 018b8a9",
                example="samples/sec: 25.921 | iteration 10/ 320000 | elapsed time per iteration (ms): 1234.5 | ...",
                key="samples/sec",
                figure="samples/s",
                scope="job",
                timing="current",
                sends="samples/s x seq length (`approx flops per GPU` counts recomputation and is not used)",
            ),
        ),
    ),
    Format(
        "megatron_timers",
        "Megatron-LM timers",
        "across ranks (ms):",
        _TIMERS_HEADER,
        _timers,
        (
            Declaration(
                trainer="Megatron-LM timers",
                versions="main @ 00caa53, `--timing-log-level 1`",
                example=(
                    "(min, max) time across ranks (ms):\n    all-grads-sync ....: (40.00, 60.00)\n    batch-generator "
                    "....: (2.10, 3.90)"
                ),
                key="all-grads-sync, batch-generator",
                figure="context",
                scope="none",
                timing="current",
                sends=(
                    "none: the collective timers (`all-grads-sync`, `params-all-gather`, `*-all-reduce`) become "
                    "`comm_seconds`, `batch-generator` `data_wait_seconds` (midpoint of min and max; the max with "
                    "`--timing-log-option max`, the mean with `all`)"
                ),
            ),
        ),
    ),
    Format(
        "megatron_args",
        "Megatron-LM arguments",
        "seq_length",
        _ARG_SEQ_LEN,
        _argument_dump,
        (
            Declaration(
                trainer="Megatron-LM arguments",
                versions="main @ 00caa53",
                example="  seq_length ...................................... 4096",
                key="seq_length",
                figure="context",
                scope="none",
                timing="none",
                sends="none: the sequence length of the iteration lines",
            ),
        ),
    ),
)
