"""One rank's profile reduced to a few numbers: where the device's time went, step by step and per process group.

A pure function of the trace (:func:`summarize_trace`); it runs on the node, beside the training process, so that
only this summary (a few kilobytes) leaves the node while the raw trace stays on local disk for Perfetto or HTA.

Definitions (per device, then added over the rank's devices; a rank normally drives one):

- **compute**: time some non-communication kernel runs (the union over streams); memcpy/memset are neither;
- **comm**: time some communication (NCCL/RCCL) kernel runs;
- **exposed comm**: comm time when no compute kernel runs on that device; ``1 - exposed/comm`` is what Holistic
  Trace Analysis calls the communication-computation overlap;
- **idle**: time within the profiled span when nothing runs on the device (it waits for the host or for data);
- **tensor-core share**: time in kernels whose names mark tensor-core code (cuBLAS/CUTLASS tensor-op GEMMs, xmma,
  wgmma, flash attention) / time in all compute kernels; a name-based estimate.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from mfumon.exporter.job.profile._intervals import Interval, clip, measure, merge, overlap
from mfumon.exporter.job.profile._trace import Activity, ParsedTrace, parse_trace
from mfumon.exporter.parallelism import GROUPS

TOP_KERNELS = 10
MAX_STEPS = 64
KERNEL_NAME_CHARS = 128  # what the aggregator keeps of a kernel name
_US = 1e-6
_TENSOR_CORE = re.compile(
    r"tensorop|xmma|hmma|wgmma|gmma|_s1688|_s16816|_h1688|_h16816|_i8816|sm80_|sm90_|sm100_|cutlass.*gemm|"
    r"flash|fmha|ampere_.*gemm|hopper_.*gemm|nvjet",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class GroupTime:
    """Communication of one parallelism (``tp``, ``pp``, ``dp``, ``ep``, ``cp``, ``other``)."""

    group: str
    comm_seconds: float
    exposed_seconds: float


@dataclass(frozen=True, slots=True)
class CollectiveTime:
    """One collective of one group: all its kernels' time, the exposed part, and how many ran."""

    collective: str
    group: str
    comm_seconds: float
    exposed_seconds: float
    count: int


@dataclass(frozen=True, slots=True)
class KernelTime:
    name: str
    seconds: float
    count: int


@dataclass(frozen=True, slots=True)
class StepTime:
    """One profiled step on the device: from the end of the step before (or its own first kernel) to its last."""

    step: int
    span_seconds: float
    compute_seconds: float
    comm_seconds: float
    exposed_comm_seconds: float
    idle_seconds: float


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What one rank's profile says; `to_json` is the body of ``POST /v1/jobs/{job_id}/profiles``."""

    rank: int | None
    span_seconds: float
    compute_seconds: float
    comm_seconds: float
    exposed_comm_seconds: float
    idle_seconds: float
    tensor_core_ratio: float | None
    groups: tuple[GroupTime, ...]
    collectives: tuple[CollectiveTime, ...]
    steps: tuple[StepTime, ...]
    top_kernels: tuple[KernelTime, ...]

    def group(self, name: str) -> GroupTime | None:
        return next((g for g in self.groups if g.group == name), None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize_trace(trace: Mapping[str, Any], *, group_overrides: Mapping[str, str] | None = None) -> TraceSummary:
    """Reduce a Kineto trace (the parsed JSON object) to a `TraceSummary`."""
    return summarize(parse_trace(trace, group_overrides=group_overrides))


def summarize(parsed: ParsedTrace) -> TraceSummary:
    """Reduce a parsed trace to a `TraceSummary`."""
    by_device: dict[int, list[Activity]] = defaultdict(list)
    for activity in parsed.activities:
        by_device[activity.device].append(activity)
    span = compute = comm = exposed = idle = 0.0
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    collectives: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for activities in by_device.values():
        busy = merge(_spans(activities))
        compute_union = merge(_spans(a for a in activities if a.kind == "compute"))
        comm_union = merge(_spans(a for a in activities if a.kind == "comm"))
        span += busy[-1][1] - busy[0][0] if busy else 0.0
        idle += (busy[-1][1] - busy[0][0] - measure(busy)) if busy else 0.0
        compute += measure(compute_union)
        comm += measure(comm_union)
        exposed += measure(comm_union) - overlap(comm_union, compute_union)
        for name in GROUPS:
            union = merge(_spans(a for a in activities if a.group == name))
            if union:
                groups[name][0] += measure(union)
                groups[name][1] += measure(union) - overlap(union, compute_union)
        for key in {(a.collective or "unknown", a.group or "other") for a in activities if a.kind == "comm"}:
            members = [a for a in activities if a.kind == "comm" and (a.collective, a.group) == key]
            union = merge(_spans(members))
            totals = collectives[key]
            totals[0] += measure(union)
            totals[1] += measure(union) - overlap(union, compute_union)
            totals[2] += len(members)
    return TraceSummary(
        rank=parsed.rank,
        span_seconds=span * _US,
        compute_seconds=compute * _US,
        comm_seconds=comm * _US,
        exposed_comm_seconds=exposed * _US,
        idle_seconds=idle * _US,
        tensor_core_ratio=_tensor_core_ratio(parsed.activities),
        groups=tuple(GroupTime(g, t[0] * _US, t[1] * _US) for g, t in sorted(groups.items(), key=_group_order)),
        collectives=tuple(
            CollectiveTime(c, g, t[0] * _US, t[1] * _US, int(t[2]))
            for (c, g), t in sorted(collectives.items(), key=lambda item: -item[1][0])
        ),
        steps=_steps(parsed),
        top_kernels=_top_kernels(parsed.activities),
    )


def _spans(activities: Iterable[Activity]) -> list[Interval]:
    return [(a.start_us, a.end_us) for a in activities]


def _group_order(item: tuple[str, list[float]]) -> int:
    return GROUPS.index(item[0])


def _tensor_core_ratio(activities: Iterable[Activity]) -> float | None:
    compute = [a for a in activities if a.kind == "compute"]
    total = sum(a.end_us - a.start_us for a in compute)
    if total <= 0:
        return None
    tensor = sum(a.end_us - a.start_us for a in compute if _TENSOR_CORE.search(a.name))
    return tensor / total


def _top_kernels(activities: Iterable[Activity]) -> tuple[KernelTime, ...]:
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for a in activities:
        if a.kind != "memory":
            seconds[a.name] += (a.end_us - a.start_us) * _US
            counts[a.name] += 1
    ranked = sorted(seconds.items(), key=lambda item: -item[1])[:TOP_KERNELS]
    return tuple(KernelTime(name[:KERNEL_NAME_CHARS], s, counts[name]) for name, s in ranked)


def _steps(parsed: ParsedTrace) -> tuple[StepTime, ...]:
    """Per host step: the device time from the previous step's last kernel to this step's last kernel."""
    if not parsed.steps:
        return ()
    members: dict[int, list[Activity]] = defaultdict(list)
    starts = [s[1] for s in parsed.steps]
    for activity in parsed.activities:
        at = activity.launched_us if activity.launched_us is not None else activity.start_us
        index = _step_index(starts, parsed.steps, at)
        if index is not None:
            members[index].append(activity)
    result: list[StepTime] = []
    previous_end: float | None = None
    for index, (number, _start, _end) in enumerate(parsed.steps[:MAX_STEPS]):
        activities = members.get(index, [])
        if not activities:
            continue
        busy = merge(_spans(activities))
        begin = previous_end if previous_end is not None and previous_end < busy[0][0] else busy[0][0]
        finish = busy[-1][1]
        compute_union = merge(_spans(a for a in activities if a.kind == "compute"))
        comm_union = merge(_spans(a for a in activities if a.kind == "comm"))
        busy_in = measure(clip(busy, begin, finish))
        result.append(
            StepTime(
                step=number,
                span_seconds=(finish - begin) * _US,
                compute_seconds=measure(compute_union) * _US,
                comm_seconds=measure(comm_union) * _US,
                exposed_comm_seconds=(measure(comm_union) - overlap(comm_union, compute_union)) * _US,
                idle_seconds=(finish - begin - busy_in) * _US,
            )
        )
        previous_end = finish
    return tuple(result)


def _step_index(starts: list[float], steps: tuple[tuple[int, float, float], ...], at: float) -> int | None:
    import bisect

    index = bisect.bisect_right(starts, at) - 1
    if index < 0 or at > steps[index][2]:
        return None
    return index
