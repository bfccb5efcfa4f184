"""A Kineto (PyTorch profiler) JSON trace read into typed device activities, and its steps.

Only what the summary needs is kept: every GPU kernel, memcpy and memset with its device, interval and, for a
collective, its operation and process group; and the ``ProfilerStep#N`` windows of the host thread. A kernel belongs
to the step whose host window launched it (``correlation`` links the launch to the kernel), else to the one its own
start falls in.

A trace with no device activity (a CPU job, gloo collectives) is read on the host instead: the operators of the
thread that runs the steps are the compute, the ``gloo:*`` collectives (on gloo's own threads) the communication, and
the host stands in for the device (device ``-1``).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfumon.exporter.parallelism import group_of

_DEVICE_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memory", "gpu_memset": "memory"}
_COMM_NAME = re.compile(r"^(?:void )?(?:nccl|rccl|ncclDev|ncclKernel)", re.IGNORECASE)
_COLLECTIVE_IN_NAME = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_COLLECTIVES = {  # the name NCCL's kernel carries -> the name PyTorch records
    "allreduce": "allreduce",
    "allgather": "allgather",
    "reducescatter": "reduce_scatter",
    "reduce": "reduce",
    "broadcast": "broadcast",
    "sendrecv": "send_recv",
    "send": "send_recv",
    "recv": "send_recv",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_all",
}


@dataclass(frozen=True, slots=True)
class Activity:
    """One interval of work on a device, in microseconds of the trace clock."""

    device: int
    start_us: float
    end_us: float
    kind: str  # compute | comm | memory
    name: str
    collective: str | None = None  # comm only: allreduce, allgather, reduce_scatter, send_recv, all_to_all, ...
    group: str | None = None  # comm only: tp, pp, dp, ep, cp, other
    launched_us: float | None = None  # when the host launched it (its correlated runtime call), if known


@dataclass(frozen=True, slots=True)
class ParsedTrace:
    """The activities of one rank's trace, sorted by start, and its host step windows (step, start_us, end_us)."""

    activities: tuple[Activity, ...]
    steps: tuple[tuple[int, float, float], ...]
    rank: int | None


def load_trace(path: str | Path) -> dict[str, Any]:
    """Read a trace file as written by ``torch.profiler`` (``.json`` or ``.json.gz``)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a Kineto trace (expected a JSON object with traceEvents)")
    return data


def parse_trace(trace: Mapping[str, Any], *, group_overrides: Mapping[str, str] | None = None) -> ParsedTrace:
    """The typed activities and step windows of a Kineto trace (the parsed JSON object)."""
    events = trace.get("traceEvents") or []
    launches: dict[int, float] = {}
    steps: list[tuple[int, float, float]] = []
    device_events: list[Mapping[str, Any]] = []
    for event in _complete(events):
        category = event.get("cat")
        if category in _DEVICE_CATEGORIES:
            device_events.append(event)
        elif category in ("cuda_runtime", "cuda_driver") and "correlation" in event.get("args", {}):
            launches[int(event["args"]["correlation"])] = float(event["ts"])
        elif category == "user_annotation" and (match := _STEP.match(str(event.get("name", "")))):
            start = float(event["ts"])
            steps.append((int(match.group(1)), start, start + float(event.get("dur", 0.0))))
    activities = [_activity(e, launches, group_overrides) for e in device_events]
    if not activities:
        activities = _host_activities(trace.get("traceEvents") or [], steps)
    activities.sort(key=lambda a: (a.start_us, a.end_us))
    info = trace.get("distributedInfo") or {}
    rank = info.get("rank") if isinstance(info, Mapping) else None
    return ParsedTrace(tuple(activities), tuple(sorted(steps, key=lambda s: s[1])), rank)


HOST_DEVICE = -1
_HOST_COMM = re.compile(r"^gloo:(\w+)")
_NOT_COMPUTE = ("c10d::", "record_param_comms", "ProfilerStep#")


def _host_activities(events: Iterable[Any], steps: list[tuple[int, float, float]]) -> list[Activity]:
    """A CPU-only trace: the step thread's operators as compute, gloo's collectives as communication."""
    complete = list(_complete(events))
    step_threads = {e.get("tid") for e in complete if _STEP.match(str(e.get("name", "")))}
    activities: list[Activity] = []
    for event in complete:
        name = str(event.get("name", ""))
        start = float(event["ts"])
        end = start + max(0.0, float(event.get("dur", 0.0)))
        if match := _HOST_COMM.match(name):
            word = match.group(1).lower().replace("_", "")
            collective = _COLLECTIVES.get(word, word)
            activities.append(Activity(HOST_DEVICE, start, end, "comm", name, collective, "other"))
        elif (
            event.get("cat") == "cpu_op"
            and (not step_threads or event.get("tid") in step_threads)
            and not name.startswith(_NOT_COMPUTE)
        ):
            activities.append(Activity(HOST_DEVICE, start, end, "compute", name))
    return activities


def _complete(events: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    for event in events:
        if isinstance(event, Mapping) and event.get("ph") == "X" and "ts" in event:
            yield event


def _activity(event: Mapping[str, Any], launches: Mapping[int, float], overrides: Mapping[str, str] | None) -> Activity:
    args = event.get("args") or {}
    name = str(event.get("name", ""))
    start = float(event["ts"])
    end = start + max(0.0, float(event.get("dur", 0.0)))
    device = int(args.get("device", event.get("pid", 0)) or 0)
    correlation = args.get("correlation")
    launched = launches.get(int(correlation)) if correlation is not None else None
    if _DEVICE_CATEGORIES[str(event["cat"])] == "memory":
        return Activity(device, start, end, "memory", name, launched_us=launched)
    if not _COMM_NAME.match(name):
        return Activity(device, start, end, "compute", name, launched_us=launched)
    collective = _collective(args.get("Collective name"), name)
    group = group_of(args.get("Process Group Description"), args.get("Process Group Name"), overrides=overrides)
    return Activity(device, start, end, "comm", name, collective, group, launched)


def _collective(recorded: Any, kernel_name: str) -> str:
    """PyTorch's name for the collective where the trace records it, else the one in NCCL's kernel name."""
    if isinstance(recorded, str) and recorded:
        return _COLLECTIVES.get(recorded.lower().replace("_", ""), recorded.lower())
    match = _COLLECTIVE_IN_NAME.search(kernel_name)
    word = match.group(1).lower() if match else ""
    return _COLLECTIVES.get(word, word or "unknown")
