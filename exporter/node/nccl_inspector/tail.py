"""Follow the Inspector's per-process JSON files: only new, complete lines, within a byte budget per read.

NCCL names the file ``<gethostname()>-pid<getpid()>.log`` and opens it with ``"w"`` at the first dump, so a file
can shrink (a new process with the same pid truncates it), disappear, or be replaced (a new inode under the name).
The tailer remembers each file's inode and offset and holds no file open between reads:

- a trailing line without its newline is half-written: it waits for the next read;
- size below the offset is a truncation, a new inode a replacement: both restart at 0 and mark the file
  ``restarted`` (its sequence numbers start over);
- files present at the first read start near their end (``first_read="tail"``) so an agent started mid-job reads
  recent records, not the job's history; files that appear later are read from the start;
- a file further behind than ``max_backlog_bytes`` jumps ahead (counted in ``bytes_skipped``; what it skipped shows
  as gaps in the sequence numbers, i.e. lost records).

With ``local_host``, a directory holding files of several hosts (a shared file system) is read only for this host's
files when any are there: their pids are this node's, the others' are not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["LOG_NAME", "TailRead", "TailedFile", "Tailer", "parse_log_name"]

#: ``<host>-pid<pid>.log``; the host may itself contain "-pid", so the last one is the separator.
LOG_NAME = re.compile(r"^(?P<host>.+)-pid(?P<pid>\d+)\.log$")


def parse_log_name(name: str) -> tuple[str, int] | None:
    """``(host, pid)`` from a file name NCCL's JSON mode writes, or None for any other file."""
    match = LOG_NAME.match(name)
    return None if match is None else (match["host"], int(match["pid"]))


@dataclass(frozen=True, slots=True)
class TailedFile:
    """The complete lines read from one file in one read."""

    path: str
    host: str  # from the file name
    pid: int  # from the file name (the records carry their own, which wins)
    lines: tuple[bytes, ...]
    restarted: bool  # first read, truncated or replaced: sequence numbers seen before no longer apply


@dataclass(frozen=True, slots=True)
class TailRead:
    """One read of the directory: the lines and what happened on the way."""

    files: tuple[TailedFile, ...]
    files_seen: int  # Inspector log files in the directory
    bytes_read: int
    backlog_bytes: int  # unread bytes left in the tracked files
    files_over_limit: int = 0  # beyond max_files (the least recently written are left)
    foreign_files: int = 0  # other hosts' files in a shared directory
    truncations: int = 0
    replacements: int = 0
    vanished: int = 0
    lines_too_long: int = 0
    bytes_skipped: int = 0
    read_errors: int = 0
    directory_missing: bool = False


@dataclass(slots=True)
class _Position:
    device: int
    inode: int
    offset: int
    discarding: bool = False  # inside a line to drop (started mid-line, or too long): skip to the next newline


@dataclass(slots=True)
class _Tally:
    truncations: int = 0
    replacements: int = 0
    lines_too_long: int = 0
    bytes_skipped: int = 0
    read_errors: int = 0
    bytes_read: int = 0
    files: list[TailedFile] = field(default_factory=list)


class Tailer:
    """Reads the new complete lines of ``<directory>/<host>-pid<pid>.log`` files, bounded per read."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_bytes_per_read: int = 16 * 1024**2,
        max_files: int = 256,
        max_line_bytes: int = 64 * 1024,
        max_backlog_bytes: int = 256 * 1024**2,
        min_file_chunk: int = 256 * 1024,
        first_read: Literal["tail", "all"] = "tail",
        local_host: str | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.max_bytes_per_read = max_bytes_per_read
        self.max_files = max_files
        self.max_line_bytes = max_line_bytes
        self.max_backlog_bytes = max_backlog_bytes
        self.min_file_chunk = max(min_file_chunk, max_line_bytes)
        if max_bytes_per_read < self.min_file_chunk:
            raise ValueError("max_bytes_per_read must hold at least one chunk of max(min_file_chunk, max_line_bytes)")
        self.first_read = first_read
        self.local_host = local_host
        self._positions: dict[str, _Position] = {}
        self._first = True
        self._turn = 0  # which file goes first: rotates, so a budget spent early never starves the same file

    def read(self) -> TailRead:
        """The new complete lines of every tracked file (never raises for what is on disk)."""
        listing = self._list()
        if listing is None:
            forgotten = len(self._positions)
            self._positions.clear()
            self._first = False
            return TailRead((), 0, 0, 0, vanished=forgotten, directory_missing=True)
        found, foreign = self._local(listing)
        found.sort(key=lambda item: -item[3].st_mtime)  # most recently written first
        over = max(0, len(found) - self.max_files)
        found = found[: self.max_files]
        kept = {path for path, _, _, _ in found}
        vanished = [path for path in self._positions if path not in kept]
        for path in vanished:
            del self._positions[path]
        tally = _Tally()
        budget = self.max_bytes_per_read
        ordered = sorted(found, key=lambda item: item[0])
        if ordered:
            self._turn = (self._turn + 1) % len(ordered)
            ordered = ordered[self._turn :] + ordered[: self._turn]
        for n, (path, host, pid, stat) in enumerate(ordered):
            if budget < self.max_line_bytes:  # the rest wait for their turn first
                break
            cap = min(max(self.min_file_chunk, budget // (len(ordered) - n)), budget)
            budget -= self._read_file(path, host, pid, stat, cap, tally)
        self._first = False
        backlog = 0
        for path, _, _, stat in found:
            position = self._positions.get(path)
            if position is not None:
                backlog += max(0, stat.st_size - position.offset)
        return TailRead(
            files=tuple(tally.files),
            files_seen=len(listing),
            bytes_read=tally.bytes_read,
            backlog_bytes=backlog,
            files_over_limit=over,
            foreign_files=foreign,
            truncations=tally.truncations,
            replacements=tally.replacements,
            vanished=len(vanished),
            lines_too_long=tally.lines_too_long,
            bytes_skipped=tally.bytes_skipped,
            read_errors=tally.read_errors,
        )

    def _list(self) -> list[tuple[str, str, int, os.stat_result]] | None:
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return None
        listing = []
        for entry in entries:
            parsed = parse_log_name(entry.name)
            if parsed is None:
                continue
            try:
                stat = entry.stat()
            except OSError:  # removed between the listing and the stat
                continue
            if os.path.isfile(entry.path):
                listing.append((entry.path, parsed[0], parsed[1], stat))
        return listing

    def _local(
        self, listing: list[tuple[str, str, int, os.stat_result]]
    ) -> tuple[list[tuple[str, str, int, os.stat_result]], int]:
        """This host's files when the directory has any (a shared directory), else all of them."""
        if not self.local_host:
            return list(listing), 0
        mine = {self.local_host.lower(), self.local_host.split(".")[0].lower()}
        local = [item for item in listing if item[1].lower() in mine or item[1].split(".")[0].lower() in mine]
        if not local:
            return list(listing), 0
        return local, len(listing) - len(local)

    def _read_file(self, path: str, host: str, pid: int, stat: os.stat_result, cap: int, tally: _Tally) -> int:
        """Read up to ``cap`` bytes of one file from its offset; returns the bytes read."""
        position = self._positions.get(path)
        restarted = False
        if position is None:
            restarted = True
            start = max(0, stat.st_size - cap) if self._first and self.first_read == "tail" else 0
            position = _Position(stat.st_dev, stat.st_ino, start, discarding=start > 0)
            self._positions[path] = position
        elif (position.device, position.inode) != (stat.st_dev, stat.st_ino):
            tally.replacements += 1
            restarted = True
            position.device, position.inode, position.offset, position.discarding = stat.st_dev, stat.st_ino, 0, False
        elif stat.st_size < position.offset:
            tally.truncations += 1
            restarted = True
            position.offset, position.discarding = 0, False
        if stat.st_size - position.offset > self.max_backlog_bytes:
            jump = max(position.offset, stat.st_size - cap)
            tally.bytes_skipped += jump - position.offset
            position.offset, position.discarding = jump, True
        if stat.st_size <= position.offset:
            if restarted:
                tally.files.append(TailedFile(path, host, pid, (), True))
            return 0
        try:
            with open(path, "rb") as handle:
                handle.seek(position.offset)
                chunk = handle.read(min(cap, stat.st_size - position.offset))
        except OSError:
            tally.read_errors += 1
            return 0
        tally.bytes_read += len(chunk)
        lines = self._complete_lines(position, chunk, tally)
        tally.files.append(TailedFile(path, host, pid, lines, restarted))
        return len(chunk)

    def _complete_lines(self, position: _Position, chunk: bytes, tally: _Tally) -> tuple[bytes, ...]:
        """Advance past the complete lines of ``chunk``; a trailing partial line stays unread."""
        start = 0
        if position.discarding:
            newline = chunk.find(b"\n")
            if newline < 0:
                position.offset += len(chunk)
                return ()
            start, position.discarding = newline + 1, False
        end = chunk.rfind(b"\n", start) + 1
        if end == 0:  # no complete line in the chunk
            end = start
        lines = []
        for line in chunk[start:end].split(b"\n")[:-1] if end > start else ():
            if len(line) > self.max_line_bytes:
                tally.lines_too_long += 1
            elif line.strip():
                lines.append(line)
        rest = len(chunk) - end
        if rest >= self.max_line_bytes:  # a partial line already too long to keep waiting for
            tally.lines_too_long += 1
            position.offset += len(chunk)
            position.discarding = True
        else:
            position.offset += end
        return tuple(lines)
