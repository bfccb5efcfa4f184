"""Throughput in the log lines of common trainers and servers, for ``mfumon wrap``.

Each built-in pattern quotes a line as the project prints it. A pattern turns a matching line into an
`Observation` of whole-job throughput; a line matches at most one pattern (user patterns are tried first).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # torchtitan colours its metrics line
_NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


@dataclass(frozen=True)
class Observation:
    """One measurement from one log line; either tokens/s or achieved FLOP/s per GPU (Megatron)."""

    pattern: str
    tokens_per_second: float | None = None
    flops_per_second_per_gpu: float | None = None
    step_seconds: float | None = None
    step: int | None = None
    source: str = ""
    kind: str | None = None


@dataclass
class ParseContext:
    """What a pattern may need besides the line: the job's shape, the arrival time, per-pattern memory."""

    seq_len: int | None = None
    num_gpus: int = 1
    tokens_per_step: int | None = None
    now: float = 0.0
    memory: dict[str, Any] = field(default_factory=dict)


def to_number(text: str) -> float:
    """A number as logs print it: ``12,345``, ``1.2e+04``, ``'3319'``."""
    return float(text.strip("'\" ").replace(",", ""))


# --- Megatron-LM (megatron/training/training.py, training_log) ---------------------------------------------
#  [2025-04-13 23:41:12] iteration       10/    1000 | consumed samples:          160 | elapsed time per
#  iteration (ms): 1147.6 | throughput per GPU (TFLOP/s/GPU): 123.4 | learning rate: 0.000000E+00 |
#  global batch size:    16 | loss scale: 8388608.0 | number of skipped iterations:  10 | ...
_MEGATRON = re.compile(r"iteration\s+(?P<step>\d+)/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*(?P<ms>[\d.]+)")
_MEGATRON_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*(?P<tflops>[\d.]+)")
_MEGATRON_GBS = re.compile(r"global batch size:\s*(?P<gbs>\d+)")


def _megatron(match: re.Match[str], line: str, ctx: ParseContext) -> Observation | None:
    step_seconds = float(match["ms"]) / 1000.0
    tflops = _MEGATRON_TFLOPS.search(line)
    gbs = _MEGATRON_GBS.search(line)
    tokens_per_second = None
    if gbs and ctx.seq_len and step_seconds > 0:
        tokens_per_second = int(gbs["gbs"]) * ctx.seq_len / step_seconds
    flops = float(tflops["tflops"]) * 1e12 if tflops else None
    if tokens_per_second is None and flops is None:
        return None
    return Observation("megatron", tokens_per_second, flops, step_seconds, int(match["step"]))


# --- Hugging Face Trainer (transformers ProgressCallback.on_log; floats printed with 4 significant digits) ---
# {'loss': '2.345', 'grad_norm': '1.23', 'learning_rate': '5e-05', 'epoch': '0.5',
#  'num_input_tokens_seen': 4096, 'train_runtime': '1.234', 'train_tokens_per_second': '3319'}
# {'train_runtime': '10.5', 'train_samples_per_second': '9.52', 'train_steps_per_second': '1.19', ...}
# (transformers < 4.47 printed the floats unquoted: {'train_runtime': 10.5, 'train_samples_per_second': 9.52})
_HF = re.compile(r"'train_(?:tokens|samples)_per_second':\s*'?" + _NUMBER)
_HF_FIELD = re.compile(
    r"'(?P<key>num_input_tokens_seen|train_tokens_per_second|train_samples_per_second)':\s*'?(?P<v>" + _NUMBER + ")"
)


def _hf_trainer(match: re.Match[str], line: str, ctx: ParseContext) -> Observation | None:
    values = {m["key"]: to_number(m["v"]) for m in _HF_FIELD.finditer(line)}
    seen = values.get("num_input_tokens_seen")
    if seen is not None:  # the interval rate from the token counter, timed by when the lines arrive
        # (the end-of-training summary repeats the last counter value: no new tokens, not a zero rate)
        previous = ctx.memory.get("hf_seen")
        ctx.memory["hf_seen"] = (seen, ctx.now)
        if previous is not None and ctx.now > previous[1] and seen > previous[0]:
            return Observation("hf_trainer", (seen - previous[0]) / (ctx.now - previous[1]))
    if "train_tokens_per_second" in values:
        return Observation("hf_trainer", values["train_tokens_per_second"])
    if "train_samples_per_second" in values and ctx.seq_len:
        return Observation("hf_trainer", values["train_samples_per_second"] * ctx.seq_len)
    return None


# --- torchtitan (torchtitan/components/metrics.py, MetricsProcessor.log; tps is per device) -----------------
# [rank0]:[titan] 2025-01-01 12:00:00,000 - root - INFO - step: 10  loss:  8.12345  grad_norm:  1.2345
#  memory: 12.34GiB(15.67%)  tps: 12,345  tflops: 123.45  mfu: 12.34%
_TORCHTITAN = re.compile(r"(?<!validate )\bstep:\s*(?P<step>\d+)\b.*?\btps:\s*(?P<tps>[\d,]+)")


def _torchtitan(match: re.Match[str], line: str, ctx: ParseContext) -> Observation | None:
    return Observation("torchtitan", to_number(match["tps"]) * ctx.num_gpus, step=int(match["step"]))


# --- nanoGPT (karpathy/nanoGPT train.py; time is one iteration on the master process) -----------------------
# tokens per iteration will be: 491,520
# iter 100: loss 2.3000, time 123.45ms, mfu 35.20%
_NANOGPT_TOKENS = re.compile(r"tokens per iteration will be:\s*(?P<tokens>[\d,]+)")
_NANOGPT = re.compile(r"\biter (?P<step>\d+): loss [^,]+, time (?P<ms>[\d.]+)ms(?:, mfu (?P<mfu>-?[\d.]+)%)?")


def _nanogpt_tokens(match: re.Match[str], line: str, ctx: ParseContext) -> Observation | None:
    ctx.memory["nanogpt_tokens_per_iter"] = int(to_number(match["tokens"]))
    return None


def _nanogpt(match: re.Match[str], line: str, ctx: ParseContext) -> Observation | None:
    if match["mfu"] is not None and float(match["mfu"]) == -100.0:
        return None  # nanoGPT's own marker for its first (compile/warm-up) iterations
    tokens = ctx.tokens_per_step or ctx.memory.get("nanogpt_tokens_per_iter")
    step_seconds = float(match["ms"]) / 1000.0
    if not tokens or step_seconds <= 0:
        return None
    return Observation("nanogpt", tokens / step_seconds, step_seconds=step_seconds, step=int(match["step"]))


# --- vLLM (vllm/v1/metrics/loggers.py LoggingStatLogger; older: vllm/engine/metrics.py) -------------------
# INFO 05-01 12:00:00 [loggers.py:116] Engine 000: Avg prompt throughput: 1024.3 tokens/s, Avg generation
#  throughput: 512.7 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.2%,
#  Prefix cache hit rate: 0.0%
_VLLM = re.compile(
    r"(?:Engine (?P<engine>\d+): )?Avg prompt throughput:\s*(?P<prompt>[\d.]+) tokens/s, "
    r"Avg generation throughput:\s*(?P<gen>[\d.]+) tokens/s"
)


def _vllm(match: re.Match[str], line: str, ctx: ParseContext) -> Observation | None:
    rate = float(match["prompt"]) + float(match["gen"])
    return Observation("vllm", rate, source=f"engine{match['engine'] or ''}", kind="inference")


Handler = Callable[[re.Match[str], str, ParseContext], "Observation | None"]

BUILTIN_PATTERNS: tuple[tuple[str, re.Pattern[str], Handler], ...] = (
    ("megatron", _MEGATRON, _megatron),
    ("hf_trainer", _HF, _hf_trainer),
    ("nanogpt_tokens", _NANOGPT_TOKENS, _nanogpt_tokens),
    ("nanogpt", _NANOGPT, _nanogpt),
    ("torchtitan", _TORCHTITAN, _torchtitan),
    ("vllm", _VLLM, _vllm),
)
"""(name, regex, handler), tried in order; Megatron first since its lines also contain 'iteration ... |'."""


def compile_user_pattern(regex: str) -> re.Pattern[str]:
    """Compile a ``--pattern``; it needs a group tokens_per_second, tokens_per_second_per_gpu or tokens+seconds."""
    pattern = re.compile(regex)
    groups = set(pattern.groupindex)
    if not ({"tokens_per_second", "tokens_per_second_per_gpu"} & groups or {"tokens", "seconds"} <= groups):
        raise ValueError(
            f"--pattern {regex!r} needs a named group tokens_per_second, tokens_per_second_per_gpu, "
            "or both tokens and seconds"
        )
    return pattern


def _user(match: re.Match[str], line: str, ctx: ParseContext) -> Observation | None:
    groups = {k: v for k, v in match.groupdict().items() if v is not None}
    if "tokens_per_second" in groups:
        return Observation("custom", to_number(groups["tokens_per_second"]))
    if "tokens_per_second_per_gpu" in groups:
        return Observation("custom", to_number(groups["tokens_per_second_per_gpu"]) * ctx.num_gpus)
    seconds = to_number(groups.get("seconds", "0"))
    if "tokens" in groups and seconds > 0:
        return Observation("custom", to_number(groups["tokens"]) / seconds, step_seconds=seconds)
    return None


class LogParser:
    """Feeds lines through user patterns, then the built-in ones; returns what the first match observed."""

    def __init__(
        self,
        context: ParseContext,
        user_patterns: tuple[re.Pattern[str], ...] = (),
        builtin: bool = True,
    ) -> None:
        self.context = context
        self._patterns: list[tuple[str, re.Pattern[str], Handler]] = [("custom", p, _user) for p in user_patterns]
        if builtin:
            self._patterns.extend(BUILTIN_PATTERNS)

    def feed(self, line: str, now: float) -> Observation | None:
        """Parse one line (without its newline) that arrived at ``now`` (monotonic seconds)."""
        if len(line) > 8192:
            line = line[:8192]  # a pathological line must not cost the wrapper much time
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        self.context.now = now
        for _name, regex, handler in self._patterns:
            match = regex.search(line)
            if match is not None:
                try:
                    return handler(match, line, self.context)
                except (ValueError, ZeroDivisionError, OverflowError):
                    return None
        return None
