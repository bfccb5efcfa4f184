"""What hostile clients cost ``mfumon serve``, as ratios against the same server undisturbed, in one run.

- ``slow``: ``/healthz`` latency with 2,000 slow clients connected (half silent, half stuck in a request head) vs with
  none, and how long until the server has closed them all on its own.
- ``reads``: node-push latency while 4 clients loop on the largest ``GET /v1/jobs`` page vs with no reads, A/B
  interleaved; and the server's RSS before and after.

    python -m bench.hostile_clients slow
    python -m bench.hostile_clients reads --seconds 15
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.conftest import LiveServer, launch_server, stop_process, wait_healthy
from tests.utils.factories import node_sample


def _start(workdir: Path, **settings: object) -> LiveServer:
    env = {"MFUMON_LOG_LEVEL": "WARNING", **{f"MFUMON_{k}": str(v) for k, v in settings.items()}}
    server = launch_server(workdir, env)
    wait_healthy(server)
    return server


def _latencies(call: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def _summary(values: list[float]) -> str:
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"p50 {statistics.median(values) * 1e3:7.1f} ms  p99 {p99 * 1e3:7.1f} ms  max {values[-1] * 1e3:7.1f} ms"


def slow(clients: int, header_timeout_s: float) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        server = _start(Path(tmp), HEADER_TIMEOUT_SECONDS=header_timeout_s)
        try:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                health = lambda: http.get("/healthz").raise_for_status()  # noqa: E731
                idle = _latencies(health, 200)
                socks = []
                opened = time.monotonic()
                for i in range(clients):
                    sock = socket.create_connection(("127.0.0.1", server.port))
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    if i % 2:
                        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                    socks.append(sock)
                loaded = _latencies(health, 200)
                for sock in socks:
                    sock.setblocking(False)
                while any(_still_open(sock) for sock in socks):
                    time.sleep(0.2)
                cleared = time.monotonic() - opened
                for sock in socks:
                    sock.close()
            print(f"/healthz, no other client:         {_summary(idle)}")
            print(f"/healthz, {clients} slow clients:     {_summary(loaded)}")
            print(f"ratio p50 {statistics.median(loaded) / statistics.median(idle):.2f}x, max {max(loaded):.3f} s")
            print(
                f"all {clients} closed by the server {cleared:.1f} s after opening (head deadline {header_timeout_s} s)"
            )
        finally:
            stop_process(server.process)


def _still_open(sock: socket.socket) -> bool:
    """False once the server has closed the connection (whatever it sent before)."""
    try:
        while chunk := sock.recv(65536):
            del chunk
    except BlockingIOError:
        return True
    except OSError:
        pass
    return False


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def reads(seconds: float, jobs: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = _start(Path(tmp))
        try:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                for i in range(jobs):
                    http.put(f"/v1/jobs/bench-{i:06d}", json={"team": f"t{i % 10}", "num_gpus": 8}).raise_for_status()
            rss_before = _rss_mb(server.process.pid)

            def push_for(duration: float) -> list[float]:
                out: list[float] = []
                with httpx.Client(base_url=server.url, timeout=60) as http:
                    deadline = time.monotonic() + duration
                    n = 0
                    while time.monotonic() < deadline:
                        n += 1
                        body = node_sample(8)
                        started = time.perf_counter()
                        http.post(f"/v1/nodes/bench-{n % 64:03d}/samples", json=body).raise_for_status()
                        out.append(time.perf_counter() - started)
                return out

            def read_loop(stop: threading.Event, served: list[int]) -> None:
                with httpx.Client(base_url=server.url, timeout=60) as http:
                    while not stop.is_set():
                        served.append(http.get("/v1/jobs", params={"limit": 1000}).status_code)

            alone: list[float] = []
            flooded: list[float] = []
            served: list[int] = []
            for _ in range(rounds):  # A/B interleaved: the machine's drift hits both alike
                alone += push_for(seconds)
                stop = threading.Event()
                readers = [threading.Thread(target=read_loop, args=(stop, served)) for _ in range(4)]
                for t in readers:
                    t.start()
                flooded += push_for(seconds)
                stop.set()
                for t in readers:
                    t.join()
            rss_after = _rss_mb(server.process.pid)
            print(f"node push, no reads:               {_summary(alone)}  ({len(alone)} pushes)")
            print(f"node push, 4 loops of 1000-job pages: {_summary(flooded)}  ({len(flooded)} pushes)")
            ratio_p99 = sorted(flooded)[int(len(flooded) * 0.99)] / sorted(alone)[int(len(alone) * 0.99)]
            print(f"ratio p50 {statistics.median(flooded) / statistics.median(alone):.2f}x, p99 {ratio_p99:.2f}x")
            print(f"reads answered: {served.count(200)} 200, {served.count(503)} 503")
            print(f"server RSS {rss_before:.0f} MB before the reads, {rss_after:.0f} MB after")
        finally:
            stop_process(server.process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("slow")
    p.add_argument("--clients", type=int, default=2000)
    p.add_argument("--header-timeout", type=float, default=10.0)
    p = sub.add_parser("reads")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.what == "slow":
        slow(args.clients, args.header_timeout)
    else:
        reads(args.seconds, args.jobs, args.rounds)


if __name__ == "__main__":
    main()
