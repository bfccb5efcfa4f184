"""``mfumon wrap --explain [LOG]``: what wrap would make of a log, line by line, without running or reporting anything.

Each line gets a verdict: the format that read it and what it matched, then what wrap would send (the job's tokens/s,
and how it followed) or why nothing (what is missing and the flag that supplies it). The same parser and relay as a
wrapped run, with a sink that keeps what would have been sent instead of a reporter: a user checks a log, and the
flags it needs, before wrapping a run.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from mfumon.exporter.job.models import ModelSpec
from mfumon.exporter.job.wrap.patterns import Declaration, Format, LogParser, Observation, ParseContext
from mfumon.exporter.job.wrap.relay import MISSING_HELP, Relay

_SECONDS_PER_LINE = 1.0  # a log read from a file has no arrival times: one second per line stands in for them
_SHOWN = 100  # characters of a matched text shown


@dataclass
class _Kept:
    """Where the relay's figures go under --explain: kept, never sent."""

    kind: str
    sent: list[float] = field(default_factory=list)

    def update(self, **fields: Any) -> None:
        self.kind = fields.get("kind") or self.kind

    def record_throughput(self, tokens_per_second: float, **fields: Any) -> None:
        self.sent.append(tokens_per_second)

    def record_times(self, **fields: Any) -> None:
        pass


def would_send(
    lines: Iterable[str],
    context: ParseContext,
    *,
    model: ModelSpec | None = None,
    kind: str = "training",
    seconds_per_line: float = _SECONDS_PER_LINE,
) -> list[float]:
    """The whole-job tokens/s a wrapped run would report from `lines` (built-in formats), in order, one per line
    read; the fixture tests check every declared trainer's real lines through it."""
    kept = _Kept(kind)
    relay = Relay(kept, model, context, kind_given=False)
    parser = LogParser(context)
    quiet = logging.getLogger("mfumon.exporter.job.wrap")
    was_disabled, quiet.disabled = quiet.disabled, True
    try:
        for number, line in enumerate(lines, start=1):
            for observation in parser.feed(line, number * seconds_per_line):
                relay.observe(observation)
        for observation in parser.close():
            relay.observe(observation)
    finally:
        quiet.disabled = was_disabled
    return kept.sent


def _why_not(observed: list[Observation]) -> str:
    missing = dict.fromkeys(key for o in observed for key in o.missing)
    if missing:
        return "; ".join(f"needs {MISSING_HELP.get(key, key)}" for key in missing)
    if any(o.flops_per_second_per_gpu is not None for o in observed):
        return "a FLOP/s figure, kept to describe the model"
    if any(o.has_timing for o in observed):
        return "communication or data-wait times (sent with the next rate)"
    return "context for later lines (or a figure another format reads instead)"


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.3g}"


def explain(
    lines: Iterable[str],
    context: ParseContext,
    parser: LogParser,
    *,
    model: ModelSpec | None,
    kind: str = "training",
    out: TextIO | None = None,
) -> int:
    """Print a verdict for each of `lines`; returns how many figures wrap would have sent."""
    out = out or sys.stdout
    kept = _Kept(kind)
    relay = Relay(kept, model, context, kind_given=False)
    # The relay says once on stderr what is missing; here each line says it.
    quiet = logging.getLogger("mfumon.exporter.job.wrap")
    was_disabled, quiet.disabled = quiet.disabled, True
    count = 0
    try:
        for number, line in enumerate(lines, start=1):
            count = number
            observed = parser.feed(line.rstrip("\r\n"), number * _SECONDS_PER_LINE)
            _verdict(out, number, parser, observed, relay, kept)
        observed = parser.close()
        if observed:
            _verdict(out, count + 1, parser, observed, relay, kept, end=True)
    finally:
        quiet.disabled = was_disabled
    sent = kept.sent
    summary = f"{count} line(s); wrap would send {len(sent)} figure(s)"
    if sent:
        summary += f", {_figure(min(sent))} to {_figure(max(sent))} tokens/s of the whole job ({kept.kind})"
    print(summary, file=out)
    return len(sent)


def _verdict(
    out: TextIO,
    number: int,
    parser: LogParser,
    observed: list[Observation],
    relay: Relay,
    kept: _Kept,
    *,
    end: bool = False,
) -> None:
    before = len(kept.sent)
    for observation in observed:
        relay.observe(observation)
    sent = kept.sent[before:]
    where = "end" if end else f"{number:>5}"
    fmt = parser.matched
    if fmt is None and not observed:
        print(f"{where}  -", file=out)
        return
    name = fmt.name if fmt is not None else observed[0].pattern
    read = parser.matched_text if fmt is not None and not end else "(the block above)"
    if len(read) > _SHOWN:
        read = read[: _SHOWN - 3] + "..."
    head = f"{where}  {name}: read {read!r}"
    if sent:
        how = _how(_declaration_of(fmt, parser.matched_text), context=relay.context)
        print(f"{head}\n       -> sends {', '.join(_figure(s) for s in sent)} tokens/s{how}", file=out)
    elif observed:
        print(f"{head}\n       -> nothing: {_why_not(observed)}", file=out)
    else:
        print(f"{head}\n       -> nothing yet: {'a block begins' if parser.context.block else 'context'}", file=out)


def _declaration_of(fmt: Format | None, text: str) -> Declaration | None:
    """The declaration of what `fmt` read in `text`: the one whose figure's name the text shows, else its first."""
    if fmt is None or not fmt.declarations:
        return None
    named = [d for d in fmt.declarations if d.key and d.key.split(" ")[0].split(",")[0] in text]
    return (named or list(fmt.declarations))[0]


def _how(declaration: Declaration | None, *, context: ParseContext) -> str:
    if declaration is None:
        return ""
    scope = declaration.scope if declaration.scope != "unsettled" else context.rate_scope
    parts = [f"{declaration.key} is {'one GPU' if scope == 'device' else 'the whole job'}'s"]
    if scope == "device":
        parts.append(f"x {context.num_gpus} GPUs")
    if declaration.timing == "cumulative":
        parts.append("an average since the start, turned into this interval's rate")
    if declaration.timing == "count":
        parts.append("a running count: the rate between two lines")
    return " (" + ", ".join(parts) + ")"
