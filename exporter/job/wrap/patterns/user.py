"""``--pattern REGEX``: the user's own log line, read through named groups that say what each number is.

=============================== ===================================================================================
named group                     tokens/s of the whole job
=============================== ===================================================================================
``tokens_per_second``           the number itself
``tokens_per_second_per_gpu``   x GPUs (``--num-gpus``)
``tokens`` and ``seconds``      tokens ÷ seconds
``samples_per_second``          x sequence length (``--seq-len``)
``samples_per_second_per_gpu``  x sequence length x GPUs
``iterations_per_second``       x tokens per iteration (``--tokens-per-step``), e.g. tqdm's ``12.3it/s``
``seconds_per_iteration``       tokens per iteration ÷ the number, e.g. tqdm's ``1.23s/it``
``milliseconds_per_iteration``  tokens per iteration ÷ (the number / 1000)
=============================== ===================================================================================

Numbers may carry thousands separators (``12,345``, ``12_345``) and the suffixes ``K``, ``M``, ``G``/``B``, ``T``
(``14.2K``). An optional group ``step`` gives the step number. ``\\N`` in a pattern stands for such a number
(``tok/s: (?P<tokens_per_second>\\N)``).
"""

from __future__ import annotations

import re
from typing import Any

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number

#: Rate groups in the order they are preferred when a pattern has several.
RATE_GROUPS = (
    "tokens_per_second",
    "tokens_per_second_per_gpu",
    "tokens",
    "samples_per_second",
    "samples_per_second_per_gpu",
    "iterations_per_second",
    "seconds_per_iteration",
    "milliseconds_per_iteration",
)
_NUMBER_SHORTHAND = re.compile(r"(?<!\\)\\N(?!\{)")


def compile_user_pattern(regex: str) -> re.Pattern[str]:
    """Compile a ``--pattern``; raises ``ValueError`` saying what is wrong in the user's terms."""
    expanded = _NUMBER_SHORTHAND.sub(lambda _: f"(?:{NUMBER})", regex)
    try:
        pattern = re.compile(expanded)
    except re.error as exc:
        raise ValueError(f"--pattern {regex!r} is not a valid regular expression: {exc}") from None
    groups = set(pattern.groupindex)
    if "tokens" in groups and "seconds" not in groups:
        raise ValueError(f"--pattern {regex!r} has a group 'tokens' but no group 'seconds' to divide it by")
    if not groups & (set(RATE_GROUPS) - {"tokens"}) and "tokens" not in groups:
        names = ", ".join(g for g in RATE_GROUPS if g != "tokens")
        raise ValueError(
            f"--pattern {regex!r} needs a named group that says what its number is: one of {names}, "
            "or both tokens and seconds; e.g. 'tok/s: (?P<tokens_per_second>\\N)'"
        )
    return pattern


def _user(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    groups = {k: v for k, v in match.groupdict().items() if v is not None}
    extra: dict[str, Any] = {"step": int(to_number(groups["step"]))} if "step" in groups else {}
    value = {k: to_number(v) for k, v in groups.items() if k in RATE_GROUPS or k == "seconds"}
    if "tokens_per_second" in value:
        return ctx.whole_job("custom", value["tokens_per_second"], **extra)
    if "tokens_per_second_per_gpu" in value:
        return ctx.per_gpu("custom", value["tokens_per_second_per_gpu"], **extra)
    if "tokens" in value and value.get("seconds", 0) > 0:
        return ctx.whole_job("custom", value["tokens"] / value["seconds"], step_seconds=value["seconds"], **extra)
    if "samples_per_second" in value:
        return ctx.samples("custom", value["samples_per_second"], **extra)
    if "samples_per_second_per_gpu" in value:
        return ctx.samples("custom", value["samples_per_second_per_gpu"], per_gpu=True, **extra)
    if "iterations_per_second" in value:
        return ctx.iterations("custom", value["iterations_per_second"], **extra)
    seconds = value.get("seconds_per_iteration")
    if seconds is None and "milliseconds_per_iteration" in value:
        seconds = value["milliseconds_per_iteration"] / 1000.0
    if seconds is not None and seconds > 0:
        return ctx.iterations("custom", 1.0 / seconds, step_seconds=seconds, **extra)
    return None


def user_format(pattern: re.Pattern[str]) -> Format:
    return Format("custom", "--pattern", "", pattern, _user)
