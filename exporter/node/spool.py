"""Bounded, ordered spool for batches the aggregator has not accepted yet.

:class:`DiskSpool` keeps one file per batch in a directory: ``<sequence>.batch``, written to a hidden temporary file,
flushed, then atomically renamed, so a crash leaves either the whole batch or nothing (stray temporaries are removed
on open). Sequence numbers continue across restarts, so replay is in collection order. When a new batch would exceed
``max_bytes`` the oldest batches are dropped and counted: recent data is worth more than old data to a live
dashboard, and a bounded spool can never fill the node's disk. :class:`MemorySpool` is the same without persistence,
used when no ``--spool-dir`` is given.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

__all__ = ["DiskSpool", "MemorySpool", "Spool"]

logger = logging.getLogger(__name__)

_SUFFIX = ".batch"


class Spool:
    """The common interface (and the in-memory bookkeeping) of both spools."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.max_bytes = max_bytes
        self.dropped_total = 0
        self._sizes: OrderedDict[int, int] = OrderedDict()
        self._bytes = 0
        self._next_seq = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def put(self, data: bytes) -> int:
        """Append a batch; returns how many old batches were dropped to make room (or 1 if it alone is too big)."""
        with self._lock:
            if len(data) > self.max_bytes:
                self.dropped_total += 1
                logger.warning(
                    "batch of %d bytes exceeds the spool bound of %d bytes; dropped", len(data), self.max_bytes
                )
                return 1
            dropped = 0
            while self._sizes and self._bytes + len(data) > self.max_bytes:
                seq, size = self._sizes.popitem(last=False)
                self._bytes -= size
                self._discard(seq)
                dropped += 1
            if dropped:
                self.dropped_total += dropped
                logger.warning("spool full (%d bytes): dropped the %d oldest batch(es)", self.max_bytes, dropped)
            seq = self._next_seq
            self._next_seq += 1
            self._store(seq, data)
            self._sizes[seq] = len(data)
            self._bytes += len(data)
            return dropped

    def peek(self) -> tuple[int, bytes] | None:
        """The oldest batch as ``(key, data)``, or ``None`` when empty. Unreadable batches are dropped."""
        with self._lock:
            while self._sizes:
                seq = next(iter(self._sizes))
                data = self._load(seq)
                if data is not None:
                    return seq, data
                self._bytes -= self._sizes.pop(seq)
                self.dropped_total += 1
            return None

    def remove(self, key: int) -> None:
        """Forget a batch once the aggregator accepted (or permanently rejected) it."""
        with self._lock:
            size = self._sizes.pop(key, None)
            if size is not None:
                self._bytes -= size
                self._discard(key)

    def _store(self, seq: int, data: bytes) -> None:
        raise NotImplementedError

    def _load(self, seq: int) -> bytes | None:
        raise NotImplementedError

    def _discard(self, seq: int) -> None:
        raise NotImplementedError


class MemorySpool(Spool):
    """Spool in process memory: survives aggregator outages, not exporter restarts."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self._data: dict[int, bytes] = {}

    def _store(self, seq: int, data: bytes) -> None:
        self._data[seq] = data

    def _load(self, seq: int) -> bytes | None:
        return self._data.get(seq)

    def _discard(self, seq: int) -> None:
        self._data.pop(seq, None)


class DiskSpool(Spool):
    """Spool directory with one file per batch (atomic write + rename), replayed in sequence order."""

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int, *, fsync: bool = True) -> None:
        super().__init__(max_bytes)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        for stray in self.directory.glob(".*.tmp"):
            stray.unlink(missing_ok=True)
        found: list[tuple[int, int]] = []
        for path in self.directory.glob(f"*{_SUFFIX}"):
            try:
                found.append((int(path.stem), path.stat().st_size))
            except (ValueError, OSError):
                logger.warning("ignoring unexpected file in the spool: %s", path)
        for seq, size in sorted(found):
            self._sizes[seq] = size
            self._bytes += size
        self._next_seq = (max(self._sizes) + 1) if self._sizes else 0
        if self._sizes:
            logger.info("spool %s holds %d batch(es) from before; replaying them first", directory, len(self._sizes))

    def _path(self, seq: int) -> Path:
        return self.directory / f"{seq:020d}{_SUFFIX}"

    def _store(self, seq: int, data: bytes) -> None:
        tmp = self.directory / f".{seq:020d}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            if self._fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, self._path(seq))

    def _load(self, seq: int) -> bytes | None:
        try:
            return self._path(seq).read_bytes()
        except OSError as exc:
            logger.warning("dropping unreadable spooled batch %s: %s", self._path(seq), exc)
            return None

    def _discard(self, seq: int) -> None:
        self._path(seq).unlink(missing_ok=True)
