"""HTTP load generator for the benchmarks: separate processes, keep-alive connections, pre-encoded requests.

Each process runs asyncio connections over raw sockets (HTTP/1.1, one request in flight per connection) so that
the client costs far less per request than the server it measures. Two modes:

- closed loop (``rate=None``): every connection sends its next request as soon as the previous answer arrived; the
  figure is the rate the server sustains at that concurrency.
- open loop (``rate=R``): requests are due at a fixed rate whatever the server does; latency is measured from the
  moment a request was *due*, so a server that falls behind is charged for the queue it builds (no coordinated
  omission), and answers that arrive after the window still count (up to 30 s; later ones count as errors).

Bodies carry a timestamp that changes on every request (``{ts}`` in a template), so the server sees new data each
time, as it would from real exporters.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_GRACE_S = 30.0  # open loop: how long after the window answers to requests due within it are still awaited
TS = "{ts}"  # placeholder in body templates, replaced by a fixed-width Unix time per request


@dataclass(frozen=True)
class Target:
    """One request the generator may send: method, path, body template (with ``{ts}``), units it carries."""

    method: str
    path: str
    body: str = ""
    units: int = 1  # e.g. GPU samples in a node push
    content_type: str = "application/json"


@dataclass
class LoadResult:
    seconds: float
    statuses: Counter[int] = field(default_factory=Counter)
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)  # of 2xx answers
    refused_latencies_ms: list[float] = field(default_factory=list)  # of 429/503 answers
    # The same from when the request was written rather than due: without the generator's own wait (for a free
    # connection, for CPU), so what the server and the network took.
    service_ms: list[float] = field(default_factory=list)
    refused_service_ms: list[float] = field(default_factory=list)
    units_ok: int = 0
    issued: int = 0  # open loop: requests that fell due within the window

    @property
    def ok(self) -> int:
        return sum(n for s, n in self.statuses.items() if 200 <= s < 300)

    @property
    def refused(self) -> int:
        return self.statuses.get(429, 0) + self.statuses.get(503, 0)

    @property
    def sent(self) -> int:
        return sum(self.statuses.values()) + self.errors

    @property
    def units_per_second(self) -> float:
        return self.units_ok / self.seconds

    def percentile(self, q: float, refused: bool = False, from_sent: bool = False) -> float:
        if from_sent:
            values = self.refused_service_ms if refused else self.service_ms
        else:
            values = self.refused_latencies_ms if refused else self.latencies_ms
        if not values:
            return float("nan")
        if len(values) == 1:
            return values[0]
        return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]

    def merge(self, other: LoadResult) -> None:
        self.statuses.update(other.statuses)
        self.errors += other.errors
        self.latencies_ms += other.latencies_ms
        self.refused_latencies_ms += other.refused_latencies_ms
        self.service_ms += other.service_ms
        self.refused_service_ms += other.refused_service_ms
        self.units_ok += other.units_ok
        self.issued += other.issued


@dataclass(frozen=True)
class _Plan:
    servers: tuple[tuple[str, int], ...]  # connection k talks to servers[k % len(servers)]
    targets: tuple[Target, ...]
    connections: int
    start_at: float
    seconds: float
    rate: float | None  # requests/s for this process, or None for closed loop
    headers: tuple[tuple[str, str], ...]


def _encode(target: Target, host: str, headers: Sequence[tuple[str, str]]) -> tuple[bytes, list[bytes]]:
    """Split a request into its head and the body's pieces between ``{ts}`` placeholders (fixed-width stamps)."""
    pieces = [p.encode() for p in target.body.split(TS)]
    length = sum(len(p) for p in pieces) + (len(pieces) - 1) * len(f"{time.time():.6f}")
    lines = [f"{target.method} {target.path} HTTP/1.1", f"Host: {host}", f"Content-Length: {length}"]
    if target.body:
        lines.append(f"Content-Type: {target.content_type}")
    lines += [f"{k}: {v}" for k, v in headers]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    return head, pieces


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one response; returns (status, server wants the connection closed)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    close = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value.strip())
        elif name == b"connection" and value.strip().lower() == b"close":
            close = True
    if length:
        await reader.readexactly(length)
    return status, close


async def _run(plan: _Plan) -> LoadResult:
    encoded = [(_encode(t, plan.servers[0][0], plan.headers), t.units) for t in plan.targets]
    gc.freeze()  # the encoded requests (100 MB at 100,000 GPUs): out of this process's collector's way
    # Open the window once every process has encoded its requests: at 100,000 GPUs that takes longer than the
    # planned head start, and an open-loop schedule that starts late charges the server for the generator's delay.
    if _ready is not None:
        _ready.wait()
    start_at = max(plan.start_at, time.time() + 0.05)
    result = LoadResult(seconds=plan.seconds)
    stop_at = start_at + plan.seconds
    ticket = 0
    interval = 1.0 / plan.rate if plan.rate else 0.0

    async def connection(k: int) -> None:
        nonlocal ticket
        reader = writer = None
        position = k
        while True:
            if plan.rate:
                due = start_at + ticket * interval
                ticket += 1
                if due >= stop_at:
                    break
                delay = due - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                result.issued += 1
            else:
                due = time.time()
                if due >= stop_at:
                    break
            (head, pieces), units = encoded[position % len(encoded)]
            position += plan.connections
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(*plan.servers[k % len(plan.servers)])
                sent = time.time()
                writer.write(head + f"{sent:.6f}".encode().join(pieces))
                wait = max(0.1, stop_at + _GRACE_S - time.time())
                status, close = await asyncio.wait_for(_read_response(reader), wait)  # type: ignore[arg-type]
            except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.TimeoutError):
                result.errors += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
                await asyncio.sleep(0.01)
                continue
            done = time.time()
            if close:
                writer.close()
                reader = writer = None
            if done > stop_at and not plan.rate:
                break  # closed loop: an answer after the window is not part of the rate over the window
            result.statuses[status] += 1
            latency_ms = (done - due) * 1e3
            service_ms = (done - sent) * 1e3
            if 200 <= status < 300:
                result.units_ok += units
                result.latencies_ms.append(latency_ms)
                result.service_ms.append(service_ms)
            elif status in (429, 503):
                result.refused_latencies_ms.append(latency_ms)
                result.refused_service_ms.append(service_ms)
        if writer is not None:
            writer.close()

    delay = start_at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    await asyncio.gather(*(connection(k) for k in range(plan.connections)))
    return result


_ready: Any = None  # in a worker process: the barrier every worker waits at before its window opens


def _init_worker(ready: Any) -> None:
    global _ready
    _ready = ready


def _worker(plan: _Plan) -> LoadResult:
    return asyncio.run(_run(plan))


def run_load(
    url: str | Sequence[str],
    targets: Sequence[Target],
    *,
    seconds: float,
    processes: int = 2,
    connections: int = 4,
    rate: float | None = None,
    headers: Sequence[tuple[str, str]] = (),
) -> LoadResult:
    """Send ``targets`` round-robin from ``processes`` processes for ``seconds``; merged result.

    ``connections`` is per process; with several URLs (replicas) the connections are spread over them. With
    ``rate`` (requests/s, all processes together) the load is open loop.
    """
    urls = [url] if isinstance(url, str) else list(url)
    servers = []
    for u in urls:
        host, port = u.removeprefix("http://").rstrip("/").split(":")
        servers.append((host, int(port)))
    parts = [tuple(targets[k::processes]) for k in range(processes)]
    start_at = time.time() + 0.5  # let every process start before the window opens
    plans = [
        _Plan(
            tuple(servers),
            part,
            connections,
            start_at,
            seconds,
            rate / processes if rate else None,
            tuple(headers),
        )
        for part in parts
    ]
    context = multiprocessing.get_context("fork")
    with context.Pool(processes, initializer=_init_worker, initargs=(context.Barrier(processes),)) as pool:
        results = pool.map(_worker, plans, chunksize=1)
    merged = LoadResult(seconds=seconds)
    for r in results:
        merged.merge(r)
    return merged
