"""What NCCL Inspector's figures (issue 61) cost the aggregator, in one run, as ratios against the same work without.

    .venv/bin/python bench/inspector_ranks.py [--nodes 1250] [--rounds 5]

A fleet of ``--nodes`` 8-GPU nodes, one training job per 8 nodes (64 GPUs as 8-way tensor parallel inside a node,
8-way data parallel across, 4 pipeline stages), each node pushing what an exporter reading Inspector sends: its
``collectives`` (per group and kind: 6 rows) and ``collective_ranks`` (each GPU's tp and dp collectives, its pp
Send and Recv: 40 rows). Best of ``--rounds`` each:

- **decode**: a push with the Inspector's lists against the same push without, by the fast decoder;
- **scrape**: ``render_collectives`` over the whole fleet (shard 0 renders it on every scrape: per-group sums, the
  ranks their peers wait for, the weakest links) against the same fleet without per-rank rows, and the rest of a
  scrape for scale (``summarize``);
- **diagnosis**: a job's Inspector facts (``JobRanks``: the waited ranks and the links) over its 8 nodes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.aggregator_scale import node_sample
from mfumon.api.metrics.collective import render_collectives
from mfumon.api.schemas.nodes import PUSH_DECODER
from mfumon.api.state.aggregate import summarize
from mfumon.api.state.collective_ranks import JobRanks
from mfumon.api.state.devices import DeviceResolver
from mfumon.api.state.store import ClusterState
from mfumon.api.state.views import build_node_view, collective_rank_views, collective_views, gpu_views
from mfumon.mfu._mfu import default_peak_table

NODES_PER_JOB = 8
MIB = 2**20


def inspector_lists(node: int, job_id: str) -> dict[str, list[dict[str, Any]]]:
    """One node's Inspector figures: groups tp (inside the node), dp (across the job's nodes), pp (Send/Recv)."""
    slot = node % NODES_PER_JOB  # the node's place in its job: its dp rank, and its pipeline stage's
    totals = [
        {
            "job_id": job_id, "group": group, "collective": op, "ranks": 8, "n_ranks": n,
            "operations_total": 12_000, "seconds_total": 840.0, "traffic_bytes_total": 1.2e13,
            "bus_bytes_total": 2.1e13, "lost_total": 0, "window_seconds": 3.0, "window_bus_bytes": 7.5e10,
            "interval_seconds": 10.0,
        }
        for group, op, n in (
            ("tp", "AllGather", 8), ("tp", "ReduceScatter", 8), ("dp", "AllReduce", 8),
            ("dp", "AllGather", 8), ("pp", "Send", 2), ("pp", "Recv", 2),
        )
    ]  # fmt: skip
    ranks = []
    for gpu in range(8):
        row = {"job_id": job_id, "operations": 40, "traffic_bytes": 40 * 64 * MIB, "interval_seconds": 10.0}
        tp = f"0x{node // 1:07x}a{0:06x}"  # one tp communicator per node
        dp = f"0x{node // NODES_PER_JOB:07x}b{gpu:06x}"  # one dp communicator per GPU index across the job
        pp = f"0x{node // 2:07x}c{gpu:06x}"  # stages pair up nodes 2k, 2k+1
        seconds = 0.4 + 0.01 * gpu
        for group, comm, op, rank, n in (
            ("tp", tp, "AllGather", gpu, 8), ("tp", tp, "ReduceScatter", gpu, 8),
            ("dp", dp, "AllReduce", slot, NODES_PER_JOB), ("dp", dp, "AllGather", slot, NODES_PER_JOB),
        ):  # fmt: skip
            ranks.append({**row, "group": group, "comm_id": comm, "collective": op, "rank": rank, "n_ranks": n,
                          "peer": None, "seconds": seconds, "bus_bytes": 70 * 64 * MIB})  # fmt: skip
        stage = node % 2
        op = "Send" if stage == 0 else "Recv"
        ranks.append({**row, "group": "pp", "comm_id": pp, "collective": op, "rank": stage, "n_ranks": 2,
                      "peer": 1 - stage, "seconds": 0.08, "bus_bytes": 40 * 64 * MIB})  # fmt: skip
    return {"collectives": totals, "collective_ranks": ranks}


def best(work: Callable[[], object], rounds: int) -> float:
    fastest = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        work()
        fastest = min(fastest, time.process_time() - started)
    return fastest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1250)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    resolver = DeviceResolver(default_peak_table())
    plain_bodies, full_bodies = [], []
    for n in range(args.nodes):
        body = node_sample(n, 1.7e9)
        job_id = f"job-{n // NODES_PER_JOB}"
        for gpu in body["gpus"]:  # type: ignore[attr-defined]
            gpu["job_id"] = job_id
        plain_bodies.append(json.dumps(body).encode())
        full_bodies.append(json.dumps({**body, **inspector_lists(n, job_id)}).encode())

    def decode_all(bodies: list[bytes]) -> list[Any]:
        out = [PUSH_DECODER.decode(b) for b in bodies]
        assert all(s is not None for s in out), "a bench body was not taken"
        return out

    decode_plain = best(lambda: decode_all(plain_bodies), args.rounds) / args.nodes
    decode_full = best(lambda: decode_all(full_bodies), args.rounds) / args.nodes
    samples = decode_all(full_bodies)

    def fleet(with_ranks: bool) -> ClusterState:
        state = ClusterState(node_ttl_seconds=1e9, job_ttl_seconds=1e9, pending_job_ttl_seconds=1e9)
        for n, sample in enumerate(samples):
            name = f"n{n}"
            state.apply_node(
                build_node_view(
                    name=name,
                    pool=sample.pool,
                    last_seen_at=1.7e9,
                    last_sample_timestamp=1.7e9,
                    samples_received=1,
                    updated_at=1.7e9,
                    gpus=gpu_views(name, 1.7e9, sample.gpus, resolver),
                    collectives=collective_views(sample.collectives),
                    collective_ranks=collective_rank_views(sample.collective_ranks) if with_ranks else None,
                )
            )
        return state

    plain, full = fleet(False).snapshot(1.7e9), fleet(True).snapshot(1.7e9)
    jobs = {f"job-{j}" for j in range(args.nodes // NODES_PER_JOB + 1)}
    nvlink = lambda node: 450e9  # noqa: E731
    rendered = render_collectives(full.nodes, jobs, nvlink)
    assert "mfumon_job_link_bus_bandwidth_bytes_per_second{" in rendered and "rank_lag_seconds{" in rendered
    render_plain = best(lambda: render_collectives(plain.nodes, jobs, nvlink), args.rounds)
    render_full = best(lambda: render_collectives(full.nodes, jobs, nvlink), args.rounds)
    summary = best(lambda: summarize(full), args.rounds)
    one_job = [node for node in full.nodes if node.name in {f"n{i}" for i in range(NODES_PER_JOB)}]
    job = lambda: JobRanks(one_job, "job-0")  # noqa: E731
    diagnosis = best(lambda: (ranks := job(), ranks.waited(), ranks.links(nvlink)), args.rounds)

    gpus = args.nodes * 8
    fleet_size = f"{args.nodes:,} nodes ({gpus:,} GPUs), {len(jobs) - 1:,} jobs of {NODES_PER_JOB} nodes"
    print(f"{fleet_size}; best of {args.rounds}")
    print(
        f"decode a push: {decode_plain * 1e6:.1f} us without Inspector, {decode_full * 1e6:.1f} us with its 6 + 40 "
        f"rows: x{decode_full / decode_plain:.2f}"
    )
    print(
        f"render_collectives per scrape: {render_plain * 1e3:.1f} ms (per-group only), {render_full * 1e3:.1f} ms with "
        f"the per-rank families: x{render_full / render_plain:.2f}; beside summarize's {summary * 1e3:.1f} ms: "
        f"+{(render_full - render_plain) / summary * 100:.0f} % of it"
    )
    print(f"diagnosis facts of one 8-node job (JobRanks: waited ranks and links): {diagnosis * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
