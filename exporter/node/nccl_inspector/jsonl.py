"""The Inspector's JSON lines: one line -> a record or the reason it was skipped.

NCCL writes one compact JSON object per line (``json.cc``: keys in a fixed order, doubles ``%lf``, NaN as the string
``"nan"``). A line can be broken: the writer returns mid-record on an error (a string over 2047 bytes, a control
character) and the next record is appended to the same line, and the last line of a live file may be half-written.
So :func:`parse_line` never raises: it returns a :class:`Skip` with a reason that the caller counts.

Shapes (by keys, since ``inspector_output_format_version`` is ``"v4.0"`` everywhere):

- 2.28.3-2.29.7: ``{"header":{id,rank,n_ranks,nnodes},"metadata":{...,dump_timestamp_us,hostname,pid},
  "coll_perf":{coll,coll_sn,coll_msg_size_bytes,coll_exec_time_us,coll_timing_source,coll_algobw_gbs,
  coll_busbw_gbs[,event_trace_sn,event_trace_ts]}}``
- 2.30.x: the header gains ``comm_name``; a second type has ``p2p_perf`` with ``p2p``, ``p2p_sn``, ``p2p_peer`` and
  the ``p2p_*`` counterparts.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from mfumon.exporter.node.nccl_inspector.records import CollRecord, Family, Kind, unwrap_size

__all__ = ["Skip", "SkipReason", "parse_line"]

SkipReason = Literal["empty", "broken_json", "not_object", "unknown_shape", "bad_field"]


@dataclass(frozen=True, slots=True)
class Skip:
    """A line that gave no record, and why (``broken_json`` covers half-written and interleaved lines)."""

    reason: SkipReason
    detail: str = ""


class _BadField(ValueError):
    pass


def parse_line(line: bytes | str) -> CollRecord | Skip:
    """The record on ``line`` (key order free, verbose ``event_trace_*`` ignored), or a :class:`Skip`."""
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not text:
        return Skip("empty")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Skip("broken_json", str(exc)[:120])
    if not isinstance(data, dict):
        return Skip("not_object")
    header, metadata = data.get("header"), data.get("metadata")
    kind: Kind = "p2p" if "p2p_perf" in data else "coll"
    perf = data.get(f"{kind}_perf")
    if not (isinstance(header, dict) and isinstance(metadata, dict) and isinstance(perf, dict)):
        return Skip("unknown_shape", ",".join(sorted(map(str, data)))[:120])
    try:
        return _record(header, metadata, perf, kind)
    except (_BadField, OverflowError) as exc:  # OverflowError: an integer beyond a float (exec time, bandwidth)
        return Skip("bad_field", str(exc)[:120])


def _record(header: dict[str, Any], metadata: dict[str, Any], perf: dict[str, Any], kind: Kind) -> CollRecord:
    family: Family = "2.30" if kind == "p2p" or "comm_name" in header else "2.28"
    name = header.get("comm_name")
    if name is not None and not isinstance(name, str):
        raise _BadField("header.comm_name")
    raw_size = _int(perf, f"{kind}_msg_size_bytes")
    size, wrapped = unwrap_size(raw_size)
    timing = perf.get(f"{kind}_timing_source")
    if timing is not None and not isinstance(timing, str):
        raise _BadField(f"{kind}_timing_source")
    return CollRecord(
        family=family,
        kind=kind,
        comm_id=_str(header, "id"),
        comm_name=None if not name or name == "unknown" else name,
        rank=_int(header, "rank"),
        n_ranks=_int(header, "n_ranks"),
        nnodes=_int(header, "nnodes"),
        hostname=_str(metadata, "hostname"),
        pid=_int(metadata, "pid"),
        dump_timestamp_us=_int(metadata, "dump_timestamp_us"),
        op=_str(perf, kind),
        sn=_int(perf, f"{kind}_sn"),
        peer=_int(perf, "p2p_peer") if kind == "p2p" else None,
        msg_size_bytes=size,
        raw_msg_size_bytes=raw_size,
        size_wrapped=wrapped,
        exec_time_us=float(_int(perf, f"{kind}_exec_time_us")),
        timing_source=timing,
        algbw_gbs=_double(perf, f"{kind}_algobw_gbs"),
        busbw_gbs=_double(perf, f"{kind}_busbw_gbs"),
        verbose="event_trace_sn" in perf or "event_trace_ts" in perf,
    )


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise _BadField(key)
    return value


def _int(obj: dict[str, Any], key: str) -> int:
    """An unsigned integer field; a whole float (``5663.0``, as one third-party copy has it) is accepted."""
    value = obj.get(key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _BadField(key)
    return value


def _double(obj: dict[str, Any], key: str) -> float | None:
    """A ``%lf`` double; ``"nan"`` (how ``json.cc`` writes NaN) and a missing key are None."""
    value = obj.get(key)
    if value is None or value == "nan":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _BadField(key)
    return float(value) if math.isfinite(value) else None
