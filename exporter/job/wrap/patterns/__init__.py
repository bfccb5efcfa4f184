"""Throughput in the log lines of common trainers and servers, for ``mfumon wrap``.

One module per project; each quotes the lines it reads, the project version they were taken from and how the
whole job's tokens/s follows. `LogParser` tries the user's ``--pattern`` formats first, then the built-in ones in
`BUILTIN_FORMATS` order; a line yields the observations of the first format that matches it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mfumon.exporter.job.wrap.patterns import (
    axolotl,
    colossalai,
    composer,
    deepspeed,
    fairseq,
    fairseq2,
    hf,
    levanter,
    liger,
    lightning,
    litgpt,
    llama_factory,
    maxtext,
    megatron,
    mlx_lm,
    nanochat,
    nanogpt,
    nanotron,
    nemo,
    nemo_automodel,
    olmo,
    olmo_core,
    paddlenlp,
    prime_rl,
    torchtitan,
    torchtune,
    trl,
    unsloth,
    vllm,
)
from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration
from mfumon.exporter.job.wrap.patterns.user import RATE_GROUPS, compile_user_pattern, user_format

__all__ = [
    "BUILTIN_FORMATS",
    "FALLBACK_PATTERNS",
    "NUMBER",
    "RATE_GROUPS",
    "Declaration",
    "Format",
    "LogParser",
    "Observation",
    "ParseContext",
    "compile_user_pattern",
    "title_of",
    "to_number",
]

BUILTIN_FORMATS: tuple[Format, ...] = (
    *megatron.FORMATS,  # first: its lines also contain "iteration ... |", "samples per second", "TFLOPs"
    *nemo.FORMATS,
    *nemo_automodel.FORMATS,
    *nanotron.FORMATS,
    *hf.FORMATS,
    *deepspeed.FORMATS,
    *nanogpt.FORMATS,
    *litgpt.FORMATS,
    *torchtitan.FORMATS,
    *maxtext.FORMATS,
    *composer.FORMATS,
    # read on the lines of issue 57's trainers (sources in tests/exporter/job/fixtures/logs/<trainer>.yml)
    *olmo.FORMATS,
    *olmo_core.FORMATS,
    *torchtune.FORMATS,
    *levanter.FORMATS,
    *nanochat.FORMATS,
    *prime_rl.FORMATS,
    *trl.FORMATS,
    *axolotl.FORMATS,
    *llama_factory.FORMATS,
    *liger.FORMATS,
    *unsloth.FORMATS,
    *lightning.FORMATS,
    *paddlenlp.FORMATS,
    *fairseq.FORMATS,
    *fairseq2.FORMATS,
    *mlx_lm.FORMATS,
    *colossalai.FORMATS,
    *vllm.FORMATS,
)

#: Formats that only stand in while no other format gives a rate: DeepSpeed's timer also prints under Megatron-DeepSpeed
#: and the HF Trainer, whose own lines measure the whole step.
FALLBACK_PATTERNS = frozenset({"deepspeed"})

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # torchtitan and nanotron colour their lines
_MAX_LINE = 8192


def title_of(pattern: str) -> str:
    """How messages name the trainer behind an observation's ``pattern``."""
    for fmt in BUILTIN_FORMATS:
        if fmt.name == pattern:
            return fmt.title
    return "--pattern" if pattern == "custom" else pattern


class LogParser:
    """Feeds lines through the formats; returns what the first matching format observed."""

    def __init__(
        self,
        context: ParseContext,
        user_patterns: Sequence[re.Pattern[str]] = (),
        builtin: bool = True,
    ) -> None:
        self.context = context
        self.formats: list[Format] = [user_format(p) for p in user_patterns]
        if builtin:
            self.formats.extend(BUILTIN_FORMATS)
        self.matched: Format | None = None  # the format that read the last line fed (None: no format did)
        self.matched_text = ""  # what of that line it matched
        self._block_owner: Format | None = None  # the format whose multi-line block is being read

    def feed(self, line: str, now: float) -> list[Observation]:
        """Parse one line (without its newline) that arrived at ``now`` (monotonic seconds)."""
        if len(line) > _MAX_LINE:
            line = line[:_MAX_LINE]  # a pathological line must not cost the wrapper much time
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        ctx = self.context
        ctx.now = now
        observed: list[Observation] = []
        self.matched, self.matched_text = None, ""
        if ctx.block is not None:
            block, ctx.block = ctx.block, None
            taken, done = self._guard(lambda: block(line, ctx))
            observed.extend(done)
            if taken:
                ctx.block = block
                self.matched, self.matched_text = self._block_owner, line.strip()
                return observed
        for fmt in self.formats:
            if fmt.marker not in line:
                continue
            match = fmt.regex.search(line)
            if match is not None:
                self.matched, self.matched_text = fmt, match.group(0)
                observed.extend(self._run(fmt, match, line))
                if ctx.block is not None:
                    self._block_owner = fmt
                break
        return observed

    def close(self) -> list[Observation]:
        """End of the output: what a block still being read (a table at the very end) observed."""
        block, self.context.block = self.context.block, None
        if block is None:
            return []
        return list(self._guard(lambda: block(None, self.context))[1])

    def _run(self, fmt: Format, match: re.Match[str], line: str) -> list[Observation]:
        try:
            result = fmt.handler(match, line, self.context)
        except (ValueError, ZeroDivisionError, OverflowError, IndexError, KeyError):
            return []
        if result is None:
            return []
        return [result] if isinstance(result, Observation) else list(result)

    @staticmethod
    def _guard(call: object) -> tuple[bool, Sequence[Observation]]:
        try:
            return call()  # type: ignore[operator, no-any-return]
        except (ValueError, ZeroDivisionError, OverflowError, IndexError, KeyError):
            return False, []
