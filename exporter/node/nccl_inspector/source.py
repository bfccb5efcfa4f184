"""One agent cycle's read of an Inspector dump directory, per job, communicator and op.

:class:`InspectorSource` reads the JSON lines written since the last cycle (:mod:`.tail`, :mod:`.jsonl`), folds them
per communicator and op and per rank (:mod:`.window`), asks the node's attribution which job each pid belongs to,
and reads the Prometheus textfiles (:mod:`.prom`) beside them, joined to jobs through their GPU. Nothing here raises
for what is on disk: broken lines, vanished files and unknown pids are counted in :class:`InspectorCounters`.

The pid in a record is ``getpid()`` in the training process's own PID namespace: the join works where the agent sees
the same namespace (Slurm, or a container with ``hostPID`` reading a job that runs with it too); elsewhere the pid
names no local process and counts as unknown.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from mfumon.exporter.node.nccl_inspector.jsonl import Skip, SkipReason, parse_line
from mfumon.exporter.node.nccl_inspector.prom import PromRead, TextfileReader
from mfumon.exporter.node.nccl_inspector.records import CollRecord, PromSample
from mfumon.exporter.node.nccl_inspector.tail import Tailer, TailRead
from mfumon.exporter.node.nccl_inspector.window import OpFigures, RankFigures, SequenceTracker, aggregate, merge

__all__ = ["InspectorBatch", "InspectorCounters", "InspectorSource", "TextfileRow"]

logger = logging.getLogger(__name__)

#: Rows kept per batch (jobs x communicators x ops, ranks, and textfile label sets, each); beyond, the least busy go.
MAX_ROWS = 4096


@dataclass(frozen=True, slots=True)
class TextfileRow:
    """One label set of a GPU's textfile, joined to the job on that GPU."""

    job_id: str | None
    gpu_uuid: str
    stale: bool  # the file was not rewritten for longer than the stale limit: old values
    age_seconds: float
    sample: PromSample


@dataclass(frozen=True, slots=True)
class InspectorCounters:
    """What one collection read, skipped and lost (counts for this cycle, not totals)."""

    files_seen: int = 0
    files_over_limit: int = 0
    foreign_files: int = 0
    truncations: int = 0
    replacements: int = 0
    vanished: int = 0
    bytes_read: int = 0
    backlog_bytes: int = 0
    bytes_skipped: int = 0
    read_errors: int = 0
    lines: int = 0
    records: int = 0
    skipped_broken: int = 0  # half-written or interleaved lines
    skipped_shape: int = 0  # JSON of no known shape (or not an object)
    skipped_field: int = 0  # a known shape with a field missing or of the wrong type
    skipped_too_long: int = 0
    pid_mismatches: int = 0  # the record's pid differs from its file name's (the record's is used)
    lost: int = 0
    late: int = 0
    duplicates: int = 0
    wrapped_sizes: int = 0
    busbw_disagreements: int = 0
    unknown_pids: int = 0  # pids no job claims (distinct)
    rows_dropped: int = 0
    rank_rows_dropped: int = 0  # per-rank rows past the bound (the least time in kernels first)
    textfiles_seen: int = 0
    textfiles_changed: int = 0
    textfiles_stale: int = 0
    textfiles_unreadable: int = 0
    textfile_lines_refused: int = 0

    @property
    def lines_skipped(self) -> int:
        return self.skipped_broken + self.skipped_shape + self.skipped_field + self.skipped_too_long


@dataclass(frozen=True, slots=True)
class InspectorBatch:
    """One cycle: per (job, communicator, kind, op) figures from the JSON lines, the same per rank (and P2P peer),
    and the textfiles' samples."""

    timestamp: float
    interval_seconds: float | None  # since the previous collection (None for the first): the rows' window
    directory: str
    rows: tuple[OpFigures, ...]
    textfiles: tuple[TextfileRow, ...]
    counters: InspectorCounters
    ranks: tuple[RankFigures, ...] = ()  # GPU-timed records of known ops, per pid, communicator id, op, rank, peer

    def jobs(self) -> dict[str | None, dict[str, dict[str, OpFigures]]]:
        """``job -> communicator -> op -> figures`` (job None: pids no job claims)."""
        out: dict[str | None, dict[str, dict[str, OpFigures]]] = {}
        for row in self.rows:
            out.setdefault(row.job_id, {}).setdefault(row.comm_key, {})[row.op] = row
        return out

    def to_json(self) -> dict[str, Any]:
        """The batch for ``mfumon exporter --once``: jobs, their communicators and ops, textfiles, counters."""
        jobs = [
            {
                "job_id": job_id,
                "communicators": [
                    {"comm": comm, "ops": [_row_json(row) for _, row in sorted(ops.items())]}
                    for comm, ops in sorted(comms.items())
                ],
            }
            for job_id, comms in sorted(self.jobs().items(), key=lambda item: (item[0] is None, item[0] or ""))
        ]
        counters = {name: getattr(self.counters, name) for name in InspectorCounters.__dataclass_fields__}
        return {
            "directory": self.directory,
            "timestamp": self.timestamp,
            "interval_seconds": self.interval_seconds,
            "jobs": jobs,
            "ranks": [_rank_json(row) for row in self.ranks],
            "textfiles": [_textfile_json(row) for row in self.textfiles],
            "counters": {**counters, "lines_skipped": self.counters.lines_skipped},
        }


def _row_json(row: OpFigures) -> dict[str, Any]:
    return {
        "op": row.op,
        "kind": row.kind,
        "known_op": row.known_op,
        "comm_ids": list(row.comm_ids),
        "pids": list(row.pids),
        "ranks": list(row.ranks),
        "n_ranks": row.n_ranks,
        "nnodes": row.nnodes,
        "count": row.count,
        "gpu_count": row.gpu_count,
        "gpu_seconds": row.gpu_seconds,
        "cpu_count": row.cpu_count,
        "cpu_seconds": row.cpu_seconds,
        "traffic_bytes": row.traffic_bytes,
        "bus_bytes": row.bus_bytes,
        "algbw_gbs": row.algbw_gbs,
        "busbw_gbs": row.busbw_gbs,
        "lost": row.lost,
        "late": row.late,
        "duplicates": row.duplicates,
        "wrapped_sizes": row.wrapped_sizes,
        "busbw_disagreements": row.busbw_disagreements,
    }


def _rank_json(row: RankFigures) -> dict[str, Any]:
    return {
        "job_id": row.job_id,
        "pid": row.pid,
        "comm_id": row.comm_id,
        "comm": row.comm_key,
        "kind": row.kind,
        "op": row.op,
        "rank": row.rank,
        "n_ranks": row.n_ranks,
        "peer": row.peer,
        "operations": row.operations,
        "seconds": row.seconds,
        "traffic_bytes": row.traffic_bytes,
        "bus_bytes": row.bus_bytes,
    }


def _textfile_json(row: TextfileRow) -> dict[str, Any]:
    sample = row.sample
    return {
        "job_id": row.job_id,
        "gpu_uuid": row.gpu_uuid,
        "stale": row.stale,
        "age_seconds": round(row.age_seconds, 3),
        "mode": sample.mode,
        "comm": sample.comm_key,
        "kind": sample.kind,
        "op": sample.op,
        "n_ranks": sample.n_ranks,
        "n_nodes": sample.n_nodes,
        "message_size": sample.message_size,
        "algo_proto": sample.algo_proto,
        "busbw_gbs": sample.busbw_gbs,
        "algbw_gbs": sample.algbw_gbs,
        "exec_time_us": sample.exec_time_us,
        "coll_sn": sample.coll_sn,
    }


class InspectorSource:
    """Reads ``directory`` each cycle and joins what it finds to jobs.

    Args:
        job_of_pid: the node's attribution of a process (``JobResolver.process_job``); None when no job claims it.
        job_of_gpu: the job on a GPU by NVML UUID (``"GPU-..."``), for the textfiles, which carry no pid; their
            ``slurm_job_id`` label is the fallback.
        local_host: this node's hostname, to read only its own files from a shared directory (see :mod:`.tail`).
        first_read: ``"tail"`` starts files already there near their end; ``"all"`` reads them from the start.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        job_of_pid: Callable[[int], str | None],
        job_of_gpu: Callable[[str], str | None] | None = None,
        local_host: str | None = None,
        max_rows: int = MAX_ROWS,
        max_bytes_per_read: int = 16 * 1024**2,
        max_files: int = 256,
        stale_after_seconds: float = 90.0,
        first_read: Literal["tail", "all"] = "tail",
    ) -> None:
        self.directory = os.fspath(directory)
        self.job_of_pid = job_of_pid
        self.job_of_gpu = job_of_gpu
        self.max_rows = max_rows
        self.tailer = Tailer(
            directory,
            max_bytes_per_read=max_bytes_per_read,
            max_files=max_files,
            first_read=first_read,
            local_host=local_host,
        )
        self.textfiles = TextfileReader(directory, stale_after_seconds=stale_after_seconds)
        self.sequences = SequenceTracker()
        self._last_collect: float | None = None

    def collect(self, now: float) -> InspectorBatch:
        """Everything written since the last call, per job, communicator and op (``now``: Unix seconds)."""
        tail = self.tailer.read()
        records, skips, mismatches = self._parse(tail)
        window = aggregate(records, self.sequences)
        jobs = self._jobs({pid for row in window.rows for pid in row.pids})
        rows, dropped = _bounded(_join(window.rows, jobs), self.max_rows)
        ranks, ranks_dropped = _bounded_ranks([replace(r, job_id=jobs.get(r.pid)) for r in window.ranks], self.max_rows)
        prom = self.textfiles.read(now)
        textfile_rows, textfiles_dropped = _bounded_textfiles(self._textfile_rows(prom), self.max_rows)
        counters = InspectorCounters(
            files_seen=tail.files_seen,
            files_over_limit=tail.files_over_limit,
            foreign_files=tail.foreign_files,
            truncations=tail.truncations,
            replacements=tail.replacements,
            vanished=tail.vanished,
            bytes_read=tail.bytes_read,
            backlog_bytes=tail.backlog_bytes,
            bytes_skipped=tail.bytes_skipped,
            read_errors=tail.read_errors,
            lines=sum(len(f.lines) for f in tail.files) + tail.lines_too_long,
            records=len(records),
            skipped_broken=skips.get("broken_json", 0),
            skipped_shape=skips.get("unknown_shape", 0) + skips.get("not_object", 0),
            skipped_field=skips.get("bad_field", 0),
            skipped_too_long=tail.lines_too_long,
            pid_mismatches=mismatches,
            lost=window.lost,
            late=window.late,
            duplicates=window.duplicates,
            wrapped_sizes=sum(r.size_wrapped for r in records),
            busbw_disagreements=sum(row.busbw_disagreements for row in window.rows),
            unknown_pids=sum(1 for job in jobs.values() if job is None),
            rows_dropped=dropped + textfiles_dropped,
            rank_rows_dropped=ranks_dropped,
            textfiles_seen=prom.files_seen,
            textfiles_changed=prom.files_changed,
            textfiles_stale=prom.files_stale,
            textfiles_unreadable=prom.files_unreadable,
            textfile_lines_refused=prom.lines_refused,
        )
        interval = None if self._last_collect is None else max(0.0, now - self._last_collect)
        self._last_collect = now
        return InspectorBatch(now, interval, self.directory, rows, textfile_rows, counters, ranks)

    def _parse(self, tail: TailRead) -> tuple[list[CollRecord], dict[SkipReason, int], int]:
        records: list[CollRecord] = []
        skips: dict[SkipReason, int] = {}
        mismatches = 0
        for tailed in tail.files:
            if tailed.restarted:
                self.sequences.forget_pid(tailed.pid)
            for line in tailed.lines:
                parsed = parse_line(line)
                if isinstance(parsed, Skip):
                    if parsed.reason != "empty":
                        skips[parsed.reason] = skips.get(parsed.reason, 0) + 1
                    continue
                if parsed.pid != tailed.pid:
                    mismatches += 1
                    if tailed.restarted:
                        self.sequences.forget_pid(parsed.pid)
                records.append(parsed)
        return records, skips, mismatches

    def _jobs(self, pids: Iterable[int]) -> dict[int, str | None]:
        jobs: dict[int, str | None] = {}
        for pid in sorted(pids):
            try:
                jobs[pid] = self.job_of_pid(pid)
            except Exception as exc:  # attribution is best effort: the rows stay, unattributed
                logger.debug("attributing pid %d failed: %s", pid, exc)
                jobs[pid] = None
        return jobs

    def _textfile_rows(self, prom: PromRead) -> list[TextfileRow]:
        rows = []
        for file in prom.files:
            on_gpu = None
            if self.job_of_gpu is not None:
                try:
                    on_gpu = self.job_of_gpu(file.gpu_uuid)
                except Exception as exc:  # best effort, as for pids
                    logger.debug("attributing GPU %s failed: %s", file.gpu_uuid, exc)
            for sample in file.samples:
                job = on_gpu or sample.slurm_job_id
                rows.append(TextfileRow(job, file.gpu_uuid, file.stale, file.age_seconds, sample))
        return rows


def _join(rows: Iterable[OpFigures], jobs: dict[int, str | None]) -> list[OpFigures]:
    """Per-pid rows merged per (job, communicator, kind, op); a pid no job claims keeps job None."""
    grouped: dict[tuple[str | None, str, str, str], list[OpFigures]] = {}
    for row in rows:
        job = jobs.get(row.pids[0]) if row.pids else None
        grouped.setdefault((job, row.comm_key, row.kind, row.op), []).append(row)
    return [merge(key[0], group) for key, group in grouped.items()]


def _bounded(rows: list[OpFigures], limit: int) -> tuple[tuple[OpFigures, ...], int]:
    """The ``limit`` rows with the most time in collectives (then the most records); the count of the rest."""
    rows.sort(key=lambda r: (-(r.gpu_seconds + r.cpu_seconds), -r.count, -r.lost, r.job_id or "", r.comm_key, r.op))
    return tuple(rows[:limit]), max(0, len(rows) - limit)


def _bounded_ranks(rows: list[RankFigures], limit: int) -> tuple[tuple[RankFigures, ...], int]:
    """The ``limit`` per-rank rows with the most kernel time (then the most operations); the count of the rest."""
    rows.sort(key=lambda r: (-r.seconds, -r.operations, r.job_id or "", r.comm_id, r.op, r.rank, r.peer or 0, r.pid))
    return tuple(rows[:limit]), max(0, len(rows) - limit)


def _bounded_textfiles(rows: list[TextfileRow], limit: int) -> tuple[tuple[TextfileRow, ...], int]:
    return tuple(rows[:limit]), max(0, len(rows) - limit)
