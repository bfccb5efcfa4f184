"""Windowed questions over the durable counters' hourly rows: where the GPU-seconds of a window went."""

from __future__ import annotations

import re
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families

from mfumon.api.accounting import CATEGORIES, CLUSTER_CATEGORIES, STEP_CATEGORIES
from mfumon.api.context import AppContext
from mfumon.api.crud.counters import HOUR, hour_of, read_hours
from mfumon.api.errors import InputError
from mfumon.api.schemas.jobs import WaterfallEntry
from mfumon.api.schemas.usage import EndCount, UsageGroup, UsagePublic
from mfumon.api.services.accounting import SCOPES, flops_families, gpu_seconds_family
from mfumon.api.services.lifecycle import ENDS_TOTAL

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
TIME_PATTERN = r"^(?:[0-9]{1,11}(?:\.[0-9]{1,6})?|[0-9]{1,6}(?:\.[0-9]{1,6})?[smhdw])$"
"""A window bound as ``GET /v1/usage`` takes it: Unix seconds below 1e11 (at most 11 digits, 6 decimals), or a
duration back from now of at most 6 digits and a unit (``90m``, ``24h``, ``7d``, ``1.5w``)."""
TIME_RULE = (
    "Unix seconds (at most 11 digits: before 1e11; up to 6 decimals), or a duration back from now: at most 6 "
    "digits (up to 6 decimals) and one of s, m, h, d, w (90m, 24h, 7d, 1w). A duration reaching before 1970 "
    "starts at 0. Anything else is 422 naming the parameter."
)
_TIME = re.compile(TIME_PATTERN.removesuffix("$") + r"\Z")


def parse_time(value: str, *, now: float, field: str) -> float:
    """A Unix time (``1767225600``), or a duration back from now (``7d``, ``24h``, ``90m``, ``1w``), as
    :data:`TIME_PATTERN` states it; a duration further back than 1970 gives 0."""
    if not _TIME.match(value):
        raise InputError(field, f"{field} must be Unix seconds or a duration like 7d, 24h, 90m ({TIME_RULE})")
    unit = _UNIT_SECONDS.get(value[-1])
    if unit is None:
        return float(value)
    return max(0.0, now - float(value[:-1]) * unit)


def labels_of(text: str) -> dict[str, str]:
    """``{a="x",b="y"}`` -> ``{"a": "x", "b": "y"}``, with the exposition format's escapes undone."""
    families = text_string_to_metric_families(f"m{text} 0\n")
    return dict(next(iter(next(iter(families)).samples)).labels)


def read_usage(ctx: AppContext, since: float, until: float) -> UsagePublic:
    if since >= until:
        raise InputError("since", "since must be before until")
    names = [ENDS_TOTAL] + [gpu_seconds_family(s) for s in SCOPES] + [f for s in SCOPES for f in flops_families(s)]
    with ctx.sessions.begin() as session:
        rows = read_hours(session, names=names, since=since, until=until)
    values: dict[tuple[str, str | None], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    ends: list[EndCount] = []
    for name, labels_text, value in rows:
        labels = labels_of(labels_text)
        if name == ENDS_TOTAL:
            ends.append(EndCount(kind=labels.get("kind", ""), outcome=labels.get("outcome", ""), count=value))
            continue
        scope = name.removeprefix("mfumon_").split("_", 1)[0]
        key = (scope, labels.get(scope) if scope != "cluster" else None)
        metric = labels.get("category") or name.removeprefix(f"mfumon_{scope}_").removesuffix("_total")
        values[key][metric] += value

    def group(scope: str, name: str | None) -> UsageGroup:
        v = values.get((scope, name), {})
        categories = CATEGORIES if scope == "team" else CLUSTER_CATEGORIES
        jobs = sum(v.get(c, 0.0) for c in CATEGORIES)
        model, peak, compute_peak = (v.get(m, 0.0) for m in ("model_flops", "peak_flops", "compute_peak_flops"))
        return UsageGroup(
            name=name,
            total_gpu_seconds=sum(v.get(c, 0.0) for c in categories),
            jobs_gpu_seconds=jobs,
            waterfall=[WaterfallEntry(category=c, gpu_seconds=v.get(c, 0.0)) for c in categories],
            goodput_ratio=sum(v.get(c, 0.0) for c in STEP_CATEGORIES) / jobs if jobs > 0 else None,
            mfu=model / peak if peak > 0 else None,
            compute_mfu=model / compute_peak if compute_peak > 0 else None,
            model_flops=model,
            peak_flops=peak,
        )

    named = lambda scope: sorted(n for s, n in values if s == scope and n is not None)  # noqa: E731
    end = hour_of(until) + (HOUR if until % HOUR else 0)
    return UsagePublic(
        since=hour_of(since),
        until=end,
        bucket_seconds=HOUR,
        cluster=group("cluster", None),
        pools=[group("pool", n) for n in named("pool")],
        teams=[group("team", n) for n in named("team")],
        ends=sorted(ends, key=lambda e: (e.kind, e.outcome)),
    )
