"""Inspector JSON lines for tests, rendered as NCCL's writer renders them (constructed, see PROVENANCE.md).

Key order of ``inspector_json.cc`` (2.30) and ``inspector.cc`` (2.28-2.29), doubles ``%lf``, bandwidths by
``inspectorComputeOpBw`` (with 64-bit wrap-around of ``size * n``).
"""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_inspector"


def fixture_lines(name: str) -> list[str]:
    return (FIXTURES / "json" / name).read_text().splitlines()


def _bandwidths(op: str, size: int, n: int, us: int, p2p: bool) -> tuple[float, float]:
    if p2p or op in ("Reduce", "Broadcast"):
        traffic, factor = size, 1.0
    elif op == "AllReduce":
        traffic, factor = size, 2 * (n - 1) / n
    elif op in ("ReduceScatter", "AllGather", "AllGatherV"):
        traffic, factor = (size * n) % 2**64, (n - 1) / n
    else:
        traffic, factor = 0, 0.0
    algbw = traffic / 1e9 / (us / 1e6) if us else 0.0
    return algbw, algbw * factor


def render(
    *,
    op: str = "AllReduce",
    sn: int = 1,
    size: int = 1 << 20,
    us: int = 100,
    comm_id: str = "0x7f8c496ae9f661",
    comm_name: str | None = None,
    rank: int = 0,
    n_ranks: int = 8,
    nnodes: int = 1,
    host: str = "node-a",
    pid: int = 1000,
    ts: int = 1748030377748202,
    timing: str = "kernel_gpu",
    p2p: bool = False,
    peer: int = 1,
) -> str:
    """One line; ``comm_name`` given renders the 2.30 header, ``p2p`` a 2.30 ``p2p_perf`` record."""
    algbw, busbw = _bandwidths(op, size, n_ranks, us, p2p)
    name = f'"comm_name":{json.dumps(comm_name)},' if comm_name is not None else ""
    header = f'"id":{json.dumps(comm_id)},{name}"rank":{rank},"n_ranks":{n_ranks},"nnodes":{nnodes}'
    metadata = (
        '"inspector_output_format_version":"v4.0","git_rev":"standalone-build",'
        f'"rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":{ts},"hostname":{json.dumps(host)},"pid":{pid}'
    )
    if p2p:
        perf = (
            f'"p2p_perf":{{"p2p":"{op}","p2p_sn":{sn},"p2p_peer":{peer},"p2p_msg_size_bytes":{size},'
            f'"p2p_exec_time_us":{us},"p2p_timing_source":"{timing}","p2p_algobw_gbs":{algbw:f},"p2p_busbw_gbs":{busbw:f}}}'
        )
    else:
        perf = (
            f'"coll_perf":{{"coll":"{op}","coll_sn":{sn},"coll_msg_size_bytes":{size},"coll_exec_time_us":{us},'
            f'"coll_timing_source":"{timing}","coll_algobw_gbs":{algbw:f},"coll_busbw_gbs":{busbw:f}}}'
        )
    return f'{{"header":{{{header}}},"metadata":{{{metadata}}},{perf}}}'
