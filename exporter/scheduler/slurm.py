"""Slurm: ``squeue --json`` into a snapshot of GPU jobs; the partitions as pools from ``sinfo --json``
(:mod:`mfumon.exporter.scheduler.slurm_partitions`).

Handles the data_parser shapes of Slurm 22.05 to 24.11 (see ``tests/exporter/scheduler/fixtures/slurm/README.md``):
- numbers are plain (22.05, openapi v0.0.38) or ``{"set", "infinite", "number"}`` objects (23.02+; times too from
  23.11), where an unset or infinite value means "none";
- ``job_state`` is a string (<= 23.02) or a list whose first known entry is the base state (23.11+);
- ``exit_code`` is a raw wait status (int or number object) or ``{"status", "return_code", "signal"}`` (23.11+);
- GPU requests sit in ``tres_per_node`` (``--gres``, ``--gpus-per-node``), ``tres_per_job`` (``--gpus``) or
  ``tres_per_task`` (``--gpus-per-task``), as ``gres:gpu:4`` (22.05) or ``gres/gpu:h100:4`` / ``gres/gpu=1``
  (24.11); a running job's per-node allocation is ``gres_detail`` (``gpu:h100:4(IDX:0-3)``), one entry per node of
  ``nodes`` in order.

Job ids follow what jobs see in their environment, so reports, exporters and the scheduler name a job alike: an
array task is ``<array job id>_<task id>`` (``SLURM_ARRAY_JOB_ID``/``SLURM_ARRAY_TASK_ID``; a pending array record
is expanded into one pending job per task), a heterogeneous job is one job under its leader's id
(``SLURM_JOB_ID``) with its components' GPUs added up, and a requeued job keeps its id (``restart_cnt`` grows).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mfumon.exporter.scheduler.model import EndedJob, ScheduledJob, Snapshot
from mfumon.exporter.scheduler.slurm_partitions import SINFO, parse_partitions

__all__ = [
    "MAX_ARRAY_TASKS",
    "SlurmError",
    "expand_hostlist",
    "gpus_in_tres",
    "parse_squeue",
    "read_squeue",
]

#: Pending array tasks expanded one by one; the rest of a larger array is one pending job ``<id>_[rest]``.
MAX_ARRAY_TASKS = 1000

_RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING", "SIGNALING"})
_BASE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
#: Pending for a reason of the user's or a dependency's making, not waiting for GPUs: pending, not queued.
NOT_QUEUED_REASONS = frozenset(
    {
        "JobHeldUser",
        "JobHeldAdmin",
        "Dependency",
        "DependencyNeverSatisfied",
        "BeginTime",
        "JobArrayTaskLimit",
        "PartitionDown",
        "PartitionInactive",
        "ReqNodeNotAvail, Reserved for maintenance",
    }
)

_TRES_GPU = re.compile(r"^gres[:/]gpu(?::([^:=,]+))?[:=](\d+)$")
_DETAIL = re.compile(r"^gpu(?::[^:(]+)?(?::(\d+))?\(IDX:([^)]*)\)$")
_HOSTLIST_PART = re.compile(r"([^,\[]+)(\[[^\]]*\])?([^,\[]*)")


class SlurmError(RuntimeError):
    """squeue could not be run or gave no JSON."""


def number(value: Any) -> float | None:
    """A plain number, or the number of a ``{"set", "infinite", "number"}`` object; unset or infinite: None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, Mapping):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        inner = value.get("number")
        return inner if isinstance(inner, int | float) and not isinstance(inner, bool) else None
    return None


def _int(value: Any) -> int | None:
    n = number(value)
    return int(n) if n is not None else None


def _time(value: Any) -> float | None:
    """Epoch seconds; Slurm's 0 means "not set"."""
    n = number(value)
    return float(n) if n else None


def base_state(value: Any) -> str:
    """``"RUNNING"`` from ``"RUNNING"`` or ``["RUNNING", "COMPLETING"]``; a COMPLETING flag keeps GPUs held."""
    states = [value] if isinstance(value, str) else list(value or [])
    base = next((s for s in states if s in _BASE_STATES), states[0] if states else "UNKNOWN")
    if "COMPLETING" in states and base not in ("PENDING", "RUNNING"):
        return "COMPLETING"
    return str(base)


def exit_code(value: Any) -> int | None:
    """The exit code a shell would show: the process's code, or 128 + signal when a signal killed it."""
    if isinstance(value, Mapping) and ("return_code" in value or "signal" in value):
        signal = _int((value.get("signal") or {}).get("id"))
        if signal:
            return 128 + signal
        return _int(value.get("return_code"))
    raw = _int(value)
    if raw is None:
        return None
    return 128 + (raw & 0x7F) if raw & 0x7F else raw >> 8


def gpus_in_tres(text: str | None) -> int:
    """GPUs in a TRES request string: ``gres:gpu:4``, ``gres/gpu:h100:2``, ``gres/gpu=1``; types add up."""
    total = 0
    for part in (text or "").split(","):
        match = _TRES_GPU.match(part.strip())
        if match:
            total += int(match.group(2))
    return total


def _indexes(text: str) -> int:
    """How many GPU indexes ``0-3,6`` names."""
    count = 0
    for piece in text.split(","):
        low, _, high = piece.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            count += int(high) - int(low) + 1 if high else 1
    return count


def gpus_in_detail(entry: str) -> int:
    """GPUs of one node in ``gres_detail``: ``gpu:h100:4(IDX:0-3)``; several types on a node add up."""
    total = 0
    for part in re.split(r",(?=gpu)", entry):
        match = _DETAIL.match(part.strip())
        if match:
            total += int(match.group(1)) if match.group(1) else _indexes(match.group(2))
    return total


def expand_hostlist(text: str) -> list[str]:
    """``gpu[01-03,07],login1`` -> ``["gpu01", "gpu02", "gpu03", "gpu07", "login1"]`` (zero padding kept)."""
    names: list[str] = []
    for prefix, bracket, suffix in _HOSTLIST_PART.findall(text or ""):
        if not bracket:
            names.append(prefix + suffix)
            continue
        for piece in bracket[1:-1].split(","):
            low, _, high = piece.partition("-")
            if not high:
                names.append(f"{prefix}{low}{suffix}")
                continue
            width = len(low) if low.startswith("0") else 0
            names += [f"{prefix}{i:0{width}d}{suffix}" for i in range(int(low), int(high) + 1)]
    return names


def array_tasks(text: str) -> list[int] | None:
    """Task ids of ``0-3,7,10-20:5%2`` (step after ``:``, concurrency limit after ``%``); None if unreadable."""
    tasks: list[int] = []
    for piece in text.split("%", 1)[0].split(","):
        span, _, step = piece.partition(":")
        low, _, high = span.partition("-")
        if not low.isdigit() or (high and not high.isdigit()) or (step and not step.isdigit()):
            return None
        end = int(high) if high else int(low)
        tasks += range(int(low), end + 1, int(step) if step else 1)
    return tasks


@dataclass(frozen=True, slots=True)
class _Request:
    gpus: int
    units: list[tuple[int, int]] | None


def _request(record: Mapping[str, Any]) -> _Request:
    """GPUs a job (component) asks for, and how they must sit on nodes."""
    nodes = _int(record.get("node_count")) or 1
    per_node = gpus_in_tres(record.get("tres_per_node"))
    if per_node:
        return _Request(per_node * nodes, [(per_node, nodes)])
    per_job = gpus_in_tres(record.get("tres_per_job"))
    if per_job:
        return _Request(per_job, None)  # --gpus may spread over nodes as the scheduler likes
    per_task = gpus_in_tres(record.get("tres_per_task"))
    if per_task:
        tasks = _int(record.get("tasks")) or _int(record.get("num_tasks")) or 1
        return _Request(per_task * tasks, [(per_task, tasks)])  # a task's GPUs are on its node
    per_socket = gpus_in_tres(record.get("tres_per_socket"))
    if per_socket:
        sockets = (_int(record.get("sockets_per_node")) or 1) * nodes
        return _Request(per_socket * sockets, None)
    return _Request(0, None)


def _placement(record: Mapping[str, Any]) -> dict[str, int] | None:
    details = [str(d) for d in record.get("gres_detail") or []]
    nodes = expand_hostlist(str(record.get("nodes") or ""))
    if not details or len(details) != len(nodes):
        return None
    placement: dict[str, int] = {}
    for node, detail in zip(nodes, details, strict=True):
        gpus = gpus_in_detail(detail)
        if gpus:
            placement[node] = placement.get(node, 0) + gpus
    return placement or None


def _job_id(record: Mapping[str, Any]) -> str:
    array_job, task = _int(record.get("array_job_id")), _int(record.get("array_task_id"))
    if array_job and task is not None and not record.get("array_task_string"):
        return f"{array_job}_{task}"
    het = _int(record.get("het_job_id"))
    return str(het if het else record["job_id"])


def _queued_at(record: Mapping[str, Any], observed_at: float) -> float | None:
    """When the job became eligible; a job not evaluated yet (no eligible time, no blocking reason) since submit."""
    if record.get("state_reason") in NOT_QUEUED_REASONS:
        return None
    eligible = _time(record.get("eligible_time")) or _time(record.get("submit_time"))
    return eligible if eligible is not None and eligible <= observed_at else None


def _merge(jobs: dict[str, ScheduledJob], job: ScheduledJob) -> None:
    """Add a heterogeneous job's component to the job under the leader's id."""
    held = jobs.get(job.job_id)
    if held is None:
        jobs[job.job_id] = job
        return
    held.gpus_requested += job.gpus_requested
    if held.units is not None and job.units is not None:
        held.units = held.units + job.units
    else:
        held.units = None
    if job.gpus_allocated is not None:
        held.gpus_allocated = (held.gpus_allocated or 0) + job.gpus_allocated
    if job.placement:
        merged = dict(held.placement or {})
        for node, gpus in job.placement.items():
            merged[node] = merged.get(node, 0) + gpus
        held.placement = merged
    if job.status == "running":
        held.status = "running"


def parse_squeue(document: Mapping[str, Any], observed_at: float | None = None) -> Snapshot:
    """Turn ``squeue --json`` output into a snapshot: GPU jobs pending and running, finished ones with exit state."""
    now = time.time() if observed_at is None else observed_at
    jobs: dict[str, ScheduledJob] = {}
    ended: list[EndedJob] = []
    leaders: set[str] = set()
    for record in document.get("jobs") or []:
        request = _request(record)
        if request.gpus <= 0:
            continue
        state = base_state(record.get("job_state"))
        job_id = _job_id(record)
        het_offset = _int(record.get("het_job_offset")) or 0
        if state not in _RUNNING_STATES and state != "PENDING":
            if het_offset == 0:
                ended.append(EndedJob(job_id, state, exit_code(record.get("exit_code"))))
            continue
        running = state in _RUNNING_STATES
        account = str(record.get("account") or "").strip()
        job = ScheduledJob(
            job_id=job_id,
            status="running" if running else "pending",
            gpus_requested=request.gpus,
            units=request.units,
            gpus_allocated=(sum((_placement(record) or {}).values()) or request.gpus) if running else None,
            placement=_placement(record) if running else None,
            submitted_at=_time(record.get("submit_time")),
            queued_at=_queued_at(record, now) if not running else _time(record.get("eligible_time")),
            started_at=_time(record.get("start_time")) if running else None,
            pending_reason=None if running else str(record.get("state_reason") or "") or None,
            restarts=_int(record.get("restart_cnt")) or 0,
            pool=str(record.get("partition") or "").split(",")[0] or None,
            team=account if account and account != "(null)" else None,
            name=str(record.get("name") or "") or None,
        )
        if het_offset == 0 and _int(record.get("het_job_id")):
            leaders.add(job_id)
        task_string = str(record.get("array_task_string") or "")
        if task_string and not running:
            _expand_array(jobs, job, _int(record.get("array_job_id")) or int(record["job_id"]), task_string, request)
        else:
            _merge(jobs, job)
    return Snapshot(kind="slurm", observed_at=now, jobs=list(jobs.values()), ended=ended)


def _expand_array(
    jobs: dict[str, ScheduledJob], job: ScheduledJob, array_id: int, task_string: str, request: _Request
) -> None:
    """One pending job per array task, so each task keeps its id from pending to running."""
    tasks = array_tasks(task_string)
    if tasks is None:
        jobs[f"{array_id}_[{task_string}]"[:128]] = job
        job.job_id = f"{array_id}_[{task_string}]"[:128]
        return
    for task in tasks[:MAX_ARRAY_TASKS]:
        jobs[f"{array_id}_{task}"] = _copy(job, f"{array_id}_{task}", request.gpus, request.units)
    rest = len(tasks) - MAX_ARRAY_TASKS
    if rest > 0:
        units = [(g, n * rest) for g, n in request.units] if request.units else None
        job_id = f"{array_id}_[{tasks[MAX_ARRAY_TASKS]}-{tasks[-1]}]"
        jobs[job_id] = _copy(job, job_id, request.gpus * rest, units)


def _copy(job: ScheduledJob, job_id: str, gpus: int, units: list[tuple[int, int]] | None) -> ScheduledJob:
    return ScheduledJob(
        job_id=job_id,
        status=job.status,
        gpus_requested=gpus,
        units=units,
        submitted_at=job.submitted_at,
        queued_at=job.queued_at,
        pending_reason=job.pending_reason,
        restarts=job.restarts,
        pool=job.pool,
        team=job.team,
        name=job.name,
    )


def read_squeue(
    command: Sequence[str] = ("squeue", "--all", "--json"),
    *,
    env: Mapping[str, str] | None = None,
    timeout_seconds: float = 60.0,
) -> dict[str, Any]:
    """Run squeue (or another Slurm command printing JSON: ``sinfo --json``) and return its JSON document."""
    try:
        done = subprocess.run(
            list(command), capture_output=True, timeout=timeout_seconds, check=False, env=dict(env) if env else None
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{command[0]} failed: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise SlurmError(f"{' '.join(command)} exited {done.returncode}: {message[-1] if message else ''}")
    try:
        document = json.loads(done.stdout)
    except ValueError as exc:
        raise SlurmError(f"{command[0]} printed no JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise SlurmError(f"{command[0]} printed JSON that is not an object")
    return document


def snapshot(
    command: Iterable[str] = ("squeue", "--all", "--json"),
    env: Mapping[str, str] | None = None,
    *,
    sinfo: Iterable[str] | None = SINFO,
) -> Snapshot:
    """Read Slurm now: the queue, and (unless ``sinfo`` is None) the partitions as pools. Either read failing fails
    the snapshot, so a sync never drops the pools for one round."""
    observed_at = time.time()
    snap = parse_squeue(read_squeue(tuple(command), env=env), observed_at)
    if sinfo is not None:
        snap.pools = parse_partitions(read_squeue(tuple(sinfo), env=env))
    return snap
