"""A log format declared once: what figure it reads and what that figure means, and a handler that follows from it.

Most trainers print one throughput figure per line (or per block of lines) under a fixed name. Whether the job's
tokens/s follows from it depends on three facts the trainer's code settles, not the line: is the figure the whole
job's or one device's, is it current (this step, this logging interval) or an average since the start, and what else
it needs (a sequence length, a GPU count, tokens per iteration). A `Declaration` states those facts next to a real line;
`declared_format` turns it into a `Format` whose handler applies them, and the formats table of the docs
(docs/reference/wrap-formats.md) is generated from the declarations of every built-in format.

A figure whose meaning a trainer changed between versions is declared ``scope="unsettled"``: nothing is sent from it
until ``--rate-scope job|device`` says which it is, and wrap says so once. An average since the start is never sent
as a current rate: where the line also prints the elapsed time (or a running token count) the interval's own rate
is computed from two lines, else the line is skipped with a message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from mfumon.exporter.job.wrap.patterns._core import Format, Observation, ParseContext, Result, to_number

#: Whose figure it is: the whole job's, one device's (x GPUs), or not settled by the line (the trainer changed it).
Scope = Literal["job", "device", "unsettled", "none"]
#: Over what time: this step or logging interval, an average since the start (or the epoch's), or the whole run's
#: (printed once at the end), or a running count (tokens so far); "none" for a line that only gives context.
Timing = Literal["current", "cumulative", "run", "count", "none"]
#: The figure's unit.
Figure = Literal["tokens/s", "samples/s", "it/s", "tokens", "context"]

_NEEDS_OF_FIGURE = {"samples/s": ("seq_len",), "it/s": ("tokens_per_step",)}


@dataclass(frozen=True)
class Declaration:
    """What a format reads, as its trainer's code defines it.

    ``example`` is a real line (or the first lines of a block); ``versions`` the trainer versions it was read on;
    ``sends`` how the job's tokens/s follows, in words for the docs. ``key`` is the figure's name as printed.
    """

    trainer: str
    versions: str
    example: str
    key: str
    figure: Figure
    scope: Scope
    timing: Timing
    sends: str
    needs: tuple[str, ...] = ()

    @property
    def all_needs(self) -> tuple[str, ...]:
        """What the figure needs to become the job's tokens/s: the declared needs, the unit's, a GPU count."""
        needs = [*self.needs, *_NEEDS_OF_FIGURE.get(self.figure, ())]
        if self.scope == "device":
            needs.append("num_gpus")
        return tuple(dict.fromkeys(needs))


def declared_format(
    name: str,
    marker: str,
    regex: re.Pattern[str],
    declaration: Declaration,
    *,
    skip_first: bool = False,
) -> Format:
    """A `Format` reading `regex`'s ``rate`` group (and ``step``, ``elapsed`` seconds since the start) by `declaration`.

    ``skip_first`` drops the first figure a process prints (JAX/XLA compilation, CUDA warm-up inside it).
    """

    def handler(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
        return _read(name, match, ctx, declaration, skip_first=skip_first)

    return Format(name, declaration.trainer, marker, regex, handler, (declaration,))


def _read(
    name: str, match: re.Match[str], ctx: ParseContext, declaration: Declaration, *, skip_first: bool
) -> Observation | None:
    groups = match.groupdict()
    step = int(groups["step"].replace(",", "")) if groups.get("step") else None
    if skip_first and not ctx.memory.get(f"{name}:seen"):
        ctx.memory[f"{name}:seen"] = True
        return None
    value = to_number(groups["rate"])
    if declaration.timing == "count":  # a running total: the rate between two lines, by their arrival
        previous = ctx.memory.get(f"{name}:count")
        ctx.memory[f"{name}:count"] = (value, ctx.now)
        if previous is None or ctx.now <= previous[1] or value <= previous[0]:
            return None
        value = (value - previous[0]) / (ctx.now - previous[1])
    elif declaration.timing == "cumulative":
        elapsed = to_number(groups["elapsed"]) if groups.get("elapsed") else None
        if elapsed is None:
            return Observation(name, step=step, missing=("current_rate",))
        previous = ctx.memory.get(f"{name}:cumulative")
        ctx.memory[f"{name}:cumulative"] = (value, elapsed)
        if previous is None or elapsed <= previous[1]:
            return None
        value = (value * elapsed - previous[0] * previous[1]) / (elapsed - previous[1])
        if value < 0:
            return None
    scope: str = declaration.scope
    if scope == "unsettled":
        if ctx.rate_scope is None:
            return Observation(name, step=step, missing=("rate_scope",))
        scope = ctx.rate_scope
    if declaration.figure == "samples/s":
        return ctx.samples(name, value, per_gpu=scope == "device", step=step)
    if declaration.figure == "it/s":
        observed = ctx.iterations(name, value, step=step)
        if scope == "device" and observed.tokens_per_second is not None:
            return ctx.per_gpu(name, observed.tokens_per_second, step=step)
        return observed
    if scope == "device":
        return ctx.per_gpu(name, value, step=step)
    return ctx.whole_job(name, value, step=step)


_INDENTED = re.compile(r"^\s+\S")


def declared_block_format(
    name: str,
    marker: str,
    header: re.Pattern[str],
    regex: re.Pattern[str],
    declaration: Declaration,
    *,
    body: re.Pattern[str] = _INDENTED,
    skip_first: bool = False,
) -> Format:
    """A report over several lines: a `header` line (e.g. ``[step=10/100]``), then lines matching `body` (indented
    ``key=value`` lines). The block ends at the first other line (or the end of the output); `regex` is then read
    over the header and body joined by newlines, as `declared_format` reads one line."""

    def handler(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
        lines = [line]

        def block(following: str | None, ctx: ParseContext) -> tuple[bool, list[Observation]]:
            if following is not None and body.search(following) and not header.search(following):
                lines.append(following)
                return True, []
            found = regex.search("\n".join(lines))
            if found is None:
                return False, []
            observed = _read(name, found, ctx, declaration, skip_first=skip_first)
            return False, [observed] if observed is not None else []

        ctx.open_block(block)
        return None

    return Format(name, declaration.trainer, marker, header, handler, (declaration,))
