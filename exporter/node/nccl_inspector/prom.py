"""The Inspector's Prometheus textfiles (``NCCL_INSPECTOR_PROM_DUMP=1``): ``<dir>/nccl_inspector_metrics_<uuid>.prom``,
one per GPU, in two modes.

- 2.29.3-2.29.7: for each communicator with a new collective, the latest one only (a sample), as
  ``nccl_algorithm_bandwidth_gbs``, ``nccl_bus_bandwidth_gbs`` and ``nccl_collective_exec_time_microseconds`` with
  labels ``comm_id,hostname,rank,slurm_job,slurm_job_id,nranks,n_nodes,gpu_device_id,collective,coll_sn,timestamp,
  message_size`` (message size ``"2.00GB"``, 1024-based).
- 2.30.x (``version="v5.1"``): every record of the interval folded into buckets, ``nccl_bus_bandwidth_gbs``
  (geometric mean) and ``nccl_collective_exec_time_microseconds`` (mean) per ``comm_name,n_nodes,nranks,collective,
  message_size,algo_proto`` and ``nccl_p2p_bus_bandwidth_gbs``/``nccl_p2p_exec_time_microseconds`` per
  ``p2p_operation``; no counts, no timestamps. A GPU's file is rewritten only when it had data, so it keeps the
  last window's values: its modification time says how old they are.

NCCL rewrites the file in place (no temporary file and rename) with no ``# HELP``/``# TYPE`` lines and label values
unescaped. A read that raced the writer (size or mtime moved, or no final newline) keeps the file's previous read; a
line the parser refuses (a quote in a communicator name) is skipped and counted, the rest of the file kept.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from mfumon.exporter.node.nccl_inspector.records import Kind, PromFile, PromMode, PromSample

__all__ = ["PROM_NAME", "PromRead", "TextfileReader", "gpu_uuid_of", "parse_message_size", "parse_textfile"]

#: ``nccl_inspector_metrics_<uuid>.prom``: the CUDA device UUID, 36 hex characters with dashes, no "GPU-" prefix.
PROM_NAME = re.compile(r"^nccl_inspector_metrics_(?P<uuid>[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})\.prom$")
_SIZE = re.compile(r"^(?P<low>\d+(?:\.\d+)?)(?:-(?P<high>\d+(?:\.\d+)?))?(?P<unit>B|KB|MB|GB|TB)$")
_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_METRICS = {
    "nccl_algorithm_bandwidth_gbs": ("coll", "algbw"),
    "nccl_bus_bandwidth_gbs": ("coll", "busbw"),
    "nccl_collective_exec_time_microseconds": ("coll", "exec"),
    "nccl_p2p_bus_bandwidth_gbs": ("p2p", "busbw"),
    "nccl_p2p_exec_time_microseconds": ("p2p", "exec"),
}


def gpu_uuid_of(name: str) -> str | None:
    """The NVML form (``"GPU-" + uuid``) of the GPU a textfile belongs to, from its name; None for other files."""
    match = PROM_NAME.match(name)
    return None if match is None else f"GPU-{match['uuid'].lower()}"


def parse_message_size(label: str) -> int | None:
    """Bytes of NCCL's size label: ``"2.00GB"`` (2.29) or the lower bound of a bucket ``"4-5GB"`` (2.30)."""
    match = _SIZE.match(label.strip())
    return None if match is None else int(float(match["low"]) * _UNITS[match["unit"]])


@dataclass(slots=True)
class _Fold:
    """The metrics of one label set, gathered across its lines."""

    labels: dict[str, str]
    kind: str
    values: dict[str, float] = field(default_factory=dict)


def parse_textfile(text: str) -> tuple[list[PromSample], int]:
    """``(samples, lines refused)``: the file parsed whole, or line by line when the whole fails to parse."""
    try:
        parsed = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]
        refused = 0
    except Exception:  # the parser raises ValueError and others on a bad line: find which, keep the rest
        parsed, refused = [], 0
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            try:
                parsed += [
                    (s.name, s.labels, s.value) for f in text_string_to_metric_families(line + "\n") for s in f.samples
                ]
            except Exception:
                refused += 1
    return _fold(parsed), refused


def _fold(parsed: Iterable[tuple[str, dict[str, str], float]]) -> list[PromSample]:
    folds: dict[tuple[tuple[str, str], ...], _Fold] = {}
    for name, labels, value in parsed:
        known = _METRICS.get(name)
        if known is None:
            continue
        kind, what = known
        key = (("kind", kind), *sorted(labels.items()))
        fold = folds.setdefault(key, _Fold(labels, kind))
        fold.values[what] = value
    return [sample for fold in folds.values() if (sample := _sample(fold)) is not None]


def _sample(fold: _Fold) -> PromSample | None:
    labels, values = fold.labels, fold.values
    mode: PromMode = "2.30" if "version" in labels or "comm_name" in labels or fold.kind == "p2p" else "2.29"
    op = labels.get("p2p_operation" if fold.kind == "p2p" else "collective")
    if op is None:
        return None
    size = labels.get("message_size", "")
    kind: Kind = "p2p" if fold.kind == "p2p" else "coll"
    return PromSample(
        mode=mode,
        kind=kind,
        op=op,
        node=labels.get("node") or labels.get("hostname") or "",
        gpu=labels.get("gpu") or labels.get("gpu_device_id") or "",
        slurm_job_id=_known(labels.get("slurm_job_id")),
        n_ranks=_int(labels.get("nranks", labels.get("n_ranks"))),
        n_nodes=_int(labels.get("n_nodes")),
        message_size=size,
        message_size_bytes=parse_message_size(size),
        busbw_gbs=_finite(values.get("busbw")),
        exec_time_us=_finite(values.get("exec")),
        algbw_gbs=_finite(values.get("algbw")),
        comm_id=labels.get("comm_id"),
        comm_name=_known(labels.get("comm_name")),
        rank=_int(labels.get("rank")),
        coll_sn=_int(labels.get("coll_sn")),
        timestamp=labels.get("timestamp"),
        algo_proto=labels.get("algo_proto"),
        version=labels.get("version"),
    )


def _known(value: str | None) -> str | None:
    return None if not value or value == "unknown" else value


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _finite(value: float | None) -> float | None:
    return value if value is not None and value == value and abs(value) != float("inf") else None


@dataclass(frozen=True, slots=True)
class PromRead:
    """One read of the textfiles."""

    files: tuple[PromFile, ...]
    files_seen: int
    files_changed: int  # rewritten since the previous read
    files_stale: int
    files_unreadable: int  # mid-write with no earlier read to keep, too big, or an OS error
    files_over_limit: int
    lines_refused: int


@dataclass(slots=True)
class _Kept:
    mtime_ns: int
    size: int
    samples: tuple[PromSample, ...]


class TextfileReader:
    """Reads ``<dir>/nccl_inspector_metrics_<uuid>.prom``, parsing a file again only when it changed."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        stale_after_seconds: float = 90.0,
        max_files: int = 64,
        max_file_bytes: int = 4 * 1024**2,
    ) -> None:
        self.directory = Path(directory)
        self.stale_after_seconds = stale_after_seconds  # 2.30 writes at most every 30 s: three windows unchanged
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self._kept: dict[str, _Kept] = {}

    def read(self, now: float) -> PromRead:
        """Every GPU's textfile with its age at ``now`` (Unix seconds)."""
        try:
            entries = [e for e in os.scandir(self.directory) if gpu_uuid_of(e.name) is not None]
        except OSError:
            entries = []
        entries.sort(key=lambda e: e.name)
        over = max(0, len(entries) - self.max_files)
        files, changed, stale, unreadable, refused = [], 0, 0, 0, 0
        seen = set()
        for entry in entries[: self.max_files]:
            seen.add(entry.path)
            got = self._read(entry.path)
            if got is None:
                unreadable += 1
                continue
            kept, was_changed, file_refused = got
            changed += was_changed
            refused += file_refused
            mtime = kept.mtime_ns / 1e9
            age = max(0.0, now - mtime)
            is_stale = age > self.stale_after_seconds
            stale += is_stale
            uuid = gpu_uuid_of(entry.name) or ""
            files.append(PromFile(entry.path, uuid, mtime, age, is_stale, kept.samples))
        for path in [p for p in self._kept if p not in seen]:
            del self._kept[path]
        return PromRead(tuple(files), len(entries), changed, stale, unreadable, over, refused)

    def _read(self, path: str) -> tuple[_Kept, bool, int] | None:
        """``(what the file holds, whether it changed, lines refused)``; the previous read while it is mid-write."""
        previous = self._kept.get(path)
        try:
            before = os.stat(path)
            if previous is not None and (before.st_mtime_ns, before.st_size) == (previous.mtime_ns, previous.size):
                return previous, False, 0
            if before.st_size > self.max_file_bytes:
                return None
            with open(path, "rb") as handle:
                data = handle.read(self.max_file_bytes + 1)
            after = os.stat(path)
        except OSError:
            return None if previous is None else (previous, False, 0)
        racing = (before.st_mtime_ns, before.st_size) != (after.st_mtime_ns, after.st_size) or len(
            data
        ) != after.st_size
        if racing or not data.endswith(b"\n"):  # mid-write (an empty file too: NCCL truncates, then writes)
            if previous is not None:
                return previous, False, 0
            return None if data else (_Kept(after.st_mtime_ns, after.st_size, ()), True, 0)
        samples, refused = parse_textfile(data.decode("utf-8", errors="replace"))
        kept = _Kept(after.st_mtime_ns, after.st_size, tuple(samples))
        self._kept[path] = kept
        return kept, True, refused
