"""What hostile clients cost ``mfumon serve``, as ratios against the same server undisturbed, in one run.

- ``slow``: ``/healthz`` latency with 2,000 slow clients connected (half silent, half stuck in a request head) vs with
  none, and how long until the server has closed them all on its own.
- ``reads``: node-push latency while 4 clients loop on the largest ``GET /v1/jobs`` page vs with no reads, A/B
  interleaved; and the server's RSS before and after.
- ``trickle`` (issue 28 #1): authorised pushes, open loop, while 64 unauthenticated clients keep sending
  ``POST /v1/jobs/x/reports`` heads with ``Content-Length: 1000`` and one byte of body (reconnecting as they are
  closed), vs undisturbed, A/B interleaved: success share and p99 of each.
- ``bodies`` (issue 28 #2): 4 and 16 concurrent unauthenticated ``PUT /v1/scheduler/x`` with a 60 MB job list each:
  the server's RSS idle, at its peak (sampled every 20 ms) and after.
- ``storm`` (issue 28 #7): rounds of 6,000 idle connections opened, held and closed: RSS before, at the peak, and
  after the trim that follows.
- ``scrapes`` (issue 28 #7, issue 33 #3): pushes of a 10,000-GPU cluster, open loop, undisturbed vs while 8 clients
  scrape ``/metrics`` back to back (the whole exposition, and 4 shards), A/B interleaved, with
  ``MFUMON_METRICS_MAX_AGE_SECONDS`` at its default and at 0 (every scrape renders).

    python -m bench.hostile_clients slow
    python -m bench.hostile_clients reads --seconds 15
    python -m bench.hostile_clients trickle --seconds 10
    python -m bench.hostile_clients bodies
    python -m bench.hostile_clients storm
    python -m bench.hostile_clients scrapes --seconds 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import resource
import select
import socket
import statistics
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Any

import httpx

from bench.loadgen import LoadResult, Target, run_load
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


def slow(clients: int, header_timeout_seconds: float) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        server = _start(Path(tmp), HEADER_TIMEOUT_SECONDS=header_timeout_seconds)
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
                f"all {clients} closed by the server {cleared:.1f} s after opening "
                f"(head deadline {header_timeout_seconds} s)"
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


TOKEN = "bench-hostile-token-0123456789abcdef"
AUTH = (("Authorization", f"Bearer {TOKEN}"),)


def _push_targets(nodes: int, gpus: int) -> list[Target]:
    """One push per node, each node's GPUs with uuids of their own (as a real cluster's: ``GPU-<node>-<index>``)."""
    template = json.dumps({**node_sample(gpus), "timestamp": 0}).replace('"timestamp": 0', '"timestamp": {ts}')
    return [
        Target("POST", f"/v1/nodes/n{i:05d}/samples", template.replace('"GPU-', f'"GPU-n{i:05d}-'), units=gpus)
        for i in range(nodes)
    ]


def _line(name: str, result: LoadResult) -> str:
    share = result.ok / max(1, result.sent)
    return (
        f"{name:<34} {result.ok:6d}/{result.sent:<6d} ok ({share:7.2%})  refused {result.refused:5d}  "
        f"errors {result.errors:4d}  p50 {result.percentile(0.5):7.1f} ms  p99 {result.percentile(0.99):7.1f} ms"
    )


def _trickle_attack(port: int, clients: int, reopen_seconds: float, stop: Any) -> None:
    """Keep ``clients`` unauthenticated requests that send a head and one byte of a 1,000-byte body; a slot whose
    connection the server closed is opened again ``reopen_s`` after it was last opened (0: at once, a flood). It
    waits in ``select`` for the server's answers, so the attacker's own CPU stays off the measurement."""
    head = b"POST /v1/jobs/x/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += b"Content-Length: 1000\r\n\r\n{"
    socks: dict[int, socket.socket] = {}
    opened = [0.0] * clients
    while not stop.is_set():
        now = time.monotonic()
        for i in range(clients):
            if i in socks or now - opened[i] < reopen_seconds:
                continue
            opened[i] = now
            with contextlib.suppress(OSError):
                fresh = socket.create_connection(("127.0.0.1", port), timeout=5)
                fresh.sendall(head)
                fresh.setblocking(False)
                socks[i] = fresh
        readable = select.select(list(socks.values()), [], [], 0.05)[0] if socks else []
        if not socks:
            time.sleep(0.05)
        for i, sock in list(socks.items()):
            if sock in readable and not _still_open(sock):  # answered and closed by the server
                sock.close()
                del socks[i]
    for sock in socks.values():
        sock.close()


def trickle(seconds: float, rate: float, rounds: int, reopen_seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = _start(Path(tmp), INGEST_TOKENS=TOKEN)
        try:
            targets = _push_targets(64, 8)
            alone, attacked = LoadResult(seconds), LoadResult(seconds)
            for _ in range(rounds):
                alone.merge(run_load(server.url, targets, seconds=seconds, rate=rate, connections=4, headers=AUTH))
                stop = multiprocessing.get_context("fork").Event()
                attacker = multiprocessing.get_context("fork").Process(
                    target=_trickle_attack, args=(server.port, 64, reopen_seconds, stop)
                )
                attacker.start()
                time.sleep(1.0)  # every slow request open before the window
                attacked.merge(run_load(server.url, targets, seconds=seconds, rate=rate, connections=4, headers=AUTH))
                stop.set()
                attacker.join()
            print(
                f"authorised pushes at {rate:g}/s, {rounds} x {seconds:g} s windows each, 8 connections; "
                f"each slow request reopened {reopen_seconds:g} s after the last"
            )
            print(_line("undisturbed", alone))
            print(_line("64 slow unauthenticated requests", attacked))
            print(f"p99 attacked / undisturbed: {attacked.percentile(0.99) / alone.percentile(0.99):.2f}x")
        finally:
            stop_process(server.process)


def _send_body(port: int, size: int) -> int:
    """An unauthenticated ``PUT /v1/scheduler/x`` of ``size`` bytes; the status the server answered (0: none)."""
    body = b'{"jobs": [' + b",".join([b'{"job_id": "j", "state": "pending", "num_gpus": 8}'] * (size // 50)) + b"]}"
    head = "PUT /v1/scheduler/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode())
        with contextlib.suppress(OSError):
            sock.sendall(body)
        with contextlib.suppress(OSError):
            answer = sock.recv(65536)
            return int(answer.split()[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return 0


def bodies(size_mb: int, concurrency: tuple[int, ...]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = _start(Path(tmp), INGEST_TOKENS=TOKEN)
        try:
            pid = server.process.pid
            for n in concurrency:
                idle = _rss_mb(pid)
                peak = idle
                done = threading.Event()

                def sample(done: threading.Event = done) -> None:
                    nonlocal peak
                    while not done.is_set():
                        peak = max(peak, _rss_mb(pid))
                        time.sleep(0.02)

                sampler = threading.Thread(target=sample)
                sampler.start()
                started = time.perf_counter()
                with ThreadPool(n) as pool:
                    statuses = pool.map(lambda _: _send_body(server.port, size_mb * 1_048_576), range(n))
                took = time.perf_counter() - started
                done.set()
                sampler.join()
                time.sleep(1.0)
                print(
                    f"{n:2d} x {size_mb} MB unauthenticated: answers {sorted(set(statuses))} in {took:.2f} s; RSS idle "
                    f"{idle:.0f} MB, peak {peak:.0f} MB (+{peak - idle:.0f}), after {_rss_mb(pid):.0f} MB"
                )
        finally:
            stop_process(server.process)


def storm(connections: int, rounds: int, hold_seconds: float) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as tmp:
        server = _start(Path(tmp), INGEST_TOKENS=TOKEN, MAX_CONNECTIONS=connections + 1024)
        try:
            pid = server.process.pid
            print(f"RSS at start {_rss_mb(pid):.0f} MB")
            for r in range(rounds):
                before = _rss_mb(pid)
                socks = []
                for _ in range(connections):
                    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    socks.append(sock)
                time.sleep(hold_seconds)
                peak = _rss_mb(pid)
                for sock in socks:
                    sock.close()
                time.sleep(12.0)  # the maintenance thread trims every 10 s once connections went away
                print(
                    f"round {r + 1}: {connections} idle connections: RSS {before:.0f} -> {peak:.0f} MB held -> "
                    f"{_rss_mb(pid):.0f} MB after they closed"
                )
        finally:
            stop_process(server.process)


def _scrape_loop(port: int, stop: Any, counts: Any, query: str = "", every: float = 0.0) -> None:
    """Scrape ``/metrics`` (gzipped, as Prometheus asks) back to back on one kept-alive connection (or one scrape
    starting ``every`` seconds), reading each answer whole without decoding it, so the scraper itself costs little
    CPU beside the server it measures."""
    request = f"GET /metrics{query} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        buffer = b""
        while not stop.is_set():
            started = time.monotonic()
            sock.sendall(request)
            while b"\r\n\r\n" not in buffer:
                buffer += sock.recv(1 << 20)
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
            )
            while len(buffer) < length:
                buffer += sock.recv(1 << 20)
            buffer = buffer[length:]
            with counts.get_lock():
                counts.value += 1
            stop.wait(max(0.0, every - (time.monotonic() - started)))


def scrapes(
    seconds: float,
    rate: float,
    nodes: int,
    shards: list[int],
    rounds: int,
    scrapers: int,
    max_ages: list[str],
    every: float = 0.0,
    connections: int = 8,
    settle: float = 0.0,
) -> None:
    """Pushes undisturbed, then beside ``scrapers`` back-to-back scrapers (of the whole exposition, or with
    ``shards`` N > 1, scraper i of shard i mod N), alternating ``rounds`` times; p99 of pushes taken, scraped over
    undisturbed, and of refusals (Retry-After), which must be fast, never seconds of waiting (issue 33 #3)."""
    for max_age in max_ages:
        with tempfile.TemporaryDirectory() as tmp:
            server = _start(Path(tmp), METRICS_MAX_AGE_SECONDS=max_age, MAX_INGEST_QUEUE_SECONDS=0.05)
            try:
                targets = _push_targets(nodes, 8)
                run_load(server.url, targets, seconds=max(5.0, nodes / rate), rate=rate, connections=connections)
                time.sleep(settle)  # the fill's renders, flushes and collections done before the first window
                print(f"{nodes * 8} GPUs, pushes at {rate:g}/s, MFUMON_METRICS_MAX_AGE_SECONDS={max_age}", flush=True)
                for count in shards:
                    for _ in range(rounds):
                        alone = run_load(server.url, targets, seconds=seconds, rate=rate, connections=connections)
                        ctx = multiprocessing.get_context("fork")
                        stop, counts = ctx.Event(), ctx.Value("i", 0)
                        queries = [f"?shard={i % count}&shards={count}" if count > 1 else "" for i in range(scrapers)]
                        loops = [
                            ctx.Process(target=_scrape_loop, args=(server.port, stop, counts, q, every))
                            for q in queries
                        ]
                        for p in loops:
                            p.start()
                        time.sleep(1.0)
                        scraped = run_load(server.url, targets, seconds=seconds, rate=rate, connections=connections)
                        stop.set()
                        for p in loops:
                            p.join()
                        time.sleep(settle)  # a scrape still rendering is done before the next window
                        what = "whole /metrics" if count == 1 else f"{count} shards"
                        ratio = scraped.percentile(0.99) / max(1e-9, alone.percentile(0.99))
                        refusals = f"{scraped.percentile(0.99, refused=True):.1f} ms" if scraped.refused else "-"
                        print(_line("  no scrapes", alone))
                        print(_line(f"  {scrapers} scrapers, {what} ({counts.value})", scraped))
                        print(f"  p99 scraped / undisturbed {ratio:.2f}; p99 of refusals {refusals}", flush=True)
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
    p = sub.add_parser("trickle")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rate", type=float, default=200.0, help="authorised pushes a second")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reopen", type=float, default=1.0, help="seconds before a closed slow request is opened again")
    p = sub.add_parser("bodies")
    p.add_argument("--size-mb", type=int, default=60)
    p = sub.add_parser("storm")
    p.add_argument("--connections", type=int, default=6000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hold", type=float, default=2.0)
    p = sub.add_parser("scrapes")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rate", type=float, default=250.0, help="node pushes a second")
    p.add_argument("--nodes", type=int, default=1250)
    p.add_argument("--shards", type=int, nargs="+", default=[1, 4], help="1: the whole exposition")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--scrapers", type=int, default=8)
    p.add_argument("--max-ages", nargs="+", default=["1", "0"], help="MFUMON_METRICS_MAX_AGE_SECONDS values")
    p.add_argument("--connections", type=int, default=8, help="the pushes' keep-alive connections")
    p.add_argument("--settle", type=float, default=0.0, help="seconds idle between the fill and the first window")
    p.add_argument("--every", type=float, default=0.0, help="from a scrape's start to the next (0: back to back)")
    args = parser.parse_args()
    if args.what == "slow":
        slow(args.clients, args.header_timeout)
    elif args.what == "reads":
        reads(args.seconds, args.jobs, args.rounds)
    elif args.what == "trickle":
        trickle(args.seconds, args.rate, args.rounds, args.reopen)
    elif args.what == "bodies":
        bodies(args.size_mb, (4, 16))
    elif args.what == "storm":
        storm(args.connections, args.rounds, args.hold)
    else:
        scrapes(
            args.seconds,
            args.rate,
            args.nodes,
            args.shards,
            args.rounds,
            args.scrapers,
            args.max_ages,
            args.every,
            args.connections,
            args.settle,
        )


if __name__ == "__main__":
    main()
