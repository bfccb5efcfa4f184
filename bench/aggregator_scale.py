"""Aggregator scale benchmark: scrape cost and ingest rate at 1,000 and 10,000 simulated GPUs (8 per node).

Runs a real ``mfumon serve`` process on a loopback port (SQLite by default, or ``--database-url``), fills it with
node samples over HTTP, then measures:
- ``/metrics`` time and size, warm (nothing changed since the last scrape) and after every node pushed again;
- the ingest rate in GPU-samples/s that the one server process sustains over real HTTP, from client processes
  (stdlib keep-alive connections, pre-encoded bodies) that share the machine with the server.
Figures are reported per size and as a ratio of 10,000 GPUs against 1,000 GPUs measured in the same run: a ratio
near 1.0 for ingest means one push costs the same whatever the cluster size.

    .venv/bin/python bench/aggregator_scale.py [--sizes 1000 10000] [--seconds 10] [--threads 4]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import launch_server, stop_process, wait_healthy

GPUS_PER_NODE = 8


def _sample(node: int, ts: float) -> dict[str, object]:
    gpus = [
        {
            "uuid": f"GPU-{node:05d}-{i}",
            "index": i,
            "name": "NVIDIA H100 80GB HBM3",
            "job_id": f"job-{node // 4}",
            "utilization": 0.9,
            "sm_active": 0.7,
            "tensor_active": 0.4 + (node % 10) / 100,
            "memory_used_bytes": 6.1e10,
            "memory_total_bytes": 8.5e10,
            "power_watts": 600.0 + i,
            "temperature_celsius": 60.0,
            "sm_clock_hz": 1.98e9,
            "max_sm_clock_hz": 1.98e9,
            "xid_errors_total": 0,
        }
        for i in range(GPUS_PER_NODE)
    ]
    return {"timestamp": ts, "pool": f"pool-{node % 2}", "gpus": gpus}


def _start(database_url: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    server = launch_server(workdir, {"MFUMON_LOG_LEVEL": "WARNING"}, database_url=database_url)  # port 0, read back
    wait_healthy(server)
    return server.process, server.url


def _push_all(url: str, nodes: int, threads: int) -> None:
    def worker(part: range) -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            for node in part:
                http.post(f"/v1/nodes/node-{node:05d}/samples", json=_sample(node, time.time())).raise_for_status()

    parts = [range(i, nodes, threads) for i in range(threads)]
    pool = [threading.Thread(target=worker, args=(p,)) for p in parts]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def _scrape(url: str, repeats: int, encoding: str = "identity") -> tuple[float, int]:
    """Median wall time of ``GET /metrics`` and the bytes on the wire, as Prometheus would fetch it."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    times, size = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        conn.request("GET", "/metrics", headers={"Accept-Encoding": encoding})
        size = len(conn.getresponse().read())
        times.append(time.perf_counter() - started)
    conn.close()
    return statistics.median(times), size


def _ingest_worker(args: tuple[str, int, int, int, float]) -> int:
    """One load-generator process: keep-alive stdlib HTTP and pre-encoded bodies, so the client stays cheap."""
    url, first, step, nodes, stop_at = args
    host, port = url.removeprefix("http://").split(":")
    templates = {}
    for node in range(first, nodes, step):
        body = json.dumps(_sample(node, 0.0)).replace('"timestamp": 0.0', '"timestamp": %r')
        templates[node] = body
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"content-type": "application/json"}
    pushed = 0
    node = first
    while time.time() < stop_at:
        conn.request("POST", f"/v1/nodes/node-{node:05d}/samples", (templates[node] % time.time()).encode(), headers)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"push failed: {response.status}")
        pushed += 1
        node = node + step if node + step < nodes else first
    conn.close()
    return pushed


def _ingest_rate(url: str, nodes: int, seconds: float, processes: int) -> float:
    started = time.time()
    stop_at = started + seconds
    with multiprocessing.Pool(processes) as pool:
        pushed = pool.map(_ingest_worker, [(url, k, processes, nodes, stop_at) for k in range(processes)])
    return sum(pushed) * GPUS_PER_NODE / (time.time() - started)


def measure(size: int, database_url: str | None, seconds: float, threads: int) -> dict[str, float]:
    nodes = size // GPUS_PER_NODE
    with tempfile.TemporaryDirectory() as tmp:
        url_db = database_url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        proc, url = _start(url_db, Path(tmp))
        try:
            _push_all(url, nodes, threads)
            with httpx.Client(base_url=url, timeout=60) as http:
                for job in range(nodes // 4 + 1):
                    http.post(
                        f"/v1/jobs/job-{job}/reports",
                        json={
                            "tokens_per_second": 1e5,
                            "num_gpus": 32,
                            "gpu_model": "h100-sxm",
                            "model": {"params": 7e9},
                        },
                    ).raise_for_status()
            _scrape(url, 1)  # render every chunk once
            warm_s, size_bytes = _scrape(url, 10)
            gzip_s, gzip_bytes = _scrape(url, 10, "gzip")
            _push_all(url, nodes, threads)  # every node changed
            cold_s, _ = _scrape(url, 1)
            rate = _ingest_rate(url, nodes, seconds, threads)
        finally:
            stop_process(proc)
    return {
        "gpus": size,
        "scrape_warm_s": warm_s,
        "scrape_all_changed_s": cold_s,
        "bytes": size_bytes,
        "scrape_gzip_s": gzip_s,
        "gzip_bytes": gzip_bytes,
        "ingest": rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=2, help="client processes generating load (default 2)")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file per size")
    args = parser.parse_args()
    results = [measure(size, args.database_url, args.seconds, args.threads) for size in args.sizes]
    print(
        f"{'GPUs':>7} {'scrape warm':>12} {'all-changed':>12} {'size':>9} "
        f"{'gzip scrape':>12} {'gzip size':>10} {'ingest GPU-samples/s':>21}"
    )
    for r in results:
        print(
            f"{r['gpus']:>7} {r['scrape_warm_s'] * 1e3:>9.1f} ms {r['scrape_all_changed_s'] * 1e3:>9.1f} ms "
            f"{r['bytes'] / 1e6:>6.2f} MB {r['scrape_gzip_s'] * 1e3:>9.1f} ms {r['gzip_bytes'] / 1e6:>7.2f} MB "
            f"{r['ingest']:>21,.0f}"
        )
    if len(results) >= 2:
        base, big = results[0], results[-1]
        print(
            f"ratio {big['gpus']}/{base['gpus']} GPUs: ingest rate x{big['ingest'] / base['ingest']:.2f}, "
            f"warm scrape x{big['scrape_warm_s'] / base['scrape_warm_s']:.1f}, size x{big['bytes'] / base['bytes']:.1f}"
        )
        print(f"at {big['gpus']} GPUs / 10 s push interval the cluster sends {big['gpus'] / 10:,.0f} GPU-samples/s")


if __name__ == "__main__":
    main()
