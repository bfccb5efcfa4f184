"""NCCL's bandwidth definitions, as the Inspector computes them (``inspectorComputeOpBw``, after nccl-tests'
``doc/PERFORMANCE.md``), so our sums agree with the figures on each line.

``algbw = traffic / 1e9 / seconds`` (GB/s, 1 GB = 1e9 B) and ``busbw = algbw * factor``, with ``S`` the record's
message size and ``n`` the communicator's ranks:

============================================  ===========  ============
op                                            traffic      factor
============================================  ===========  ============
AllReduce                                     S            2(n-1)/n
ReduceScatter, AllGather, AllGatherV          S * n        (n-1)/n
Broadcast, Reduce, every P2P op               S            1
anything else (``Invalid``, All2All)          --           --
============================================  ===========  ============

``S`` is per rank for AllGather and ReduceScatter (the API's sendcount/recvcount), hence ``S * n``. NCCL has no
definition for the rest (it writes 0); here they have None, so their time counts and their bandwidth is unknown.
"""

from __future__ import annotations

import math

from mfumon.exporter.node.nccl_inspector.records import UINT64, CollRecord, Kind

__all__ = ["algbw_gbs", "bus_factor", "busbw_agrees", "busbw_gbs", "traffic_bytes"]

_PER_RANK = frozenset({"ReduceScatter", "AllGather", "AllGatherV"})
_ONE = frozenset({"Broadcast", "Reduce"})


def traffic_bytes(op: str, size: int, n_ranks: int, kind: Kind = "coll") -> int | None:
    """Bytes an operation moves by NCCL's definition (``S`` or ``S * n``), or None for an op it does not define."""
    if kind == "p2p" or op in _ONE or op == "AllReduce":
        return size
    if op in _PER_RANK:
        return size * n_ranks
    return None


def bus_factor(op: str, n_ranks: int, kind: Kind = "coll") -> float | None:
    """Bus bytes per traffic byte: what makes bus bandwidth comparable across communicator sizes."""
    if kind == "p2p" or op in _ONE:
        return 1.0
    if n_ranks <= 0:
        return None
    if op == "AllReduce":
        return 2 * (n_ranks - 1) / n_ranks
    if op in _PER_RANK:
        return (n_ranks - 1) / n_ranks
    return None


def algbw_gbs(op: str, size: int, exec_time_us: float, n_ranks: int, kind: Kind = "coll") -> float | None:
    """Algorithm bandwidth in GB/s; 0 for a zero time (as NCCL writes it), None for an undefined op."""
    traffic = traffic_bytes(op, size, n_ranks, kind)
    if traffic is None:
        return None
    return traffic / 1e9 / (exec_time_us / 1e6) if exec_time_us > 0 else 0.0


def busbw_gbs(op: str, size: int, exec_time_us: float, n_ranks: int, kind: Kind = "coll") -> float | None:
    """Bus bandwidth in GB/s: algorithm bandwidth times the op's factor."""
    algbw, factor = algbw_gbs(op, size, exec_time_us, n_ranks, kind), bus_factor(op, n_ranks, kind)
    return None if algbw is None or factor is None else algbw * factor


def busbw_agrees(record: CollRecord, rel_tol: float = 1e-4) -> bool | None:
    """Whether the record's own bus bandwidth is NCCL's definition applied to its own size and time (a check that
    we read the fields as NCCL meant them). None when either side is unknown. NCCL computed from the size as written
    (the ncclUint8 bug included) with 64-bit wrap-around, so the check does too."""
    if record.busbw_gbs is None:
        return None
    raw = record.raw_msg_size_bytes
    traffic = traffic_bytes(record.op, raw, record.n_ranks, record.kind)
    factor = bus_factor(record.op, record.n_ranks, record.kind)
    if traffic is None or factor is None:
        return record.busbw_gbs == 0.0  # NCCL writes 0 for what it does not define
    traffic %= UINT64
    seconds = record.exec_time_us / 1e6
    expected = traffic / 1e9 / seconds * factor if seconds > 0 else 0.0
    return math.isclose(record.busbw_gbs, expected, rel_tol=rel_tol, abs_tol=1e-5)
