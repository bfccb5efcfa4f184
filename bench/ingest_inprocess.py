"""CPU per node push inside the app, without sockets: ``mfumon serve``'s ASGI app against the bare app's.

    .venv/bin/python bench/ingest_inprocess.py [--nodes 1250] [--pushes 20000] [--rounds 3] [--profile out.prof]

Both apps get the bench's pushes (``bench/aggregator_scale.py``: 8 GPUs, new timestamp each) as ASGI calls on one
event loop, alternating rounds of ``--pushes``; CPU time (``time.process_time``) per push, and the ratio bare ÷
mfumon (above 1: a push costs mfumon less than the bare app spends parsing it): the median of the rounds' ratios,
and the ratio of each one's fastest round (on a shared machine, the least disturbed). The HTTP server's own per-request
work (the same for both, or more for ``mfumon serve``'s door) is not in it: ``bench/aggregator_scale.py`` measures
that end to end. ``--profile`` writes a cProfile of the mfumon rounds. Renders per push come from the renderer's
counter, with no scrape in between (a scrape every ``--scrape-every`` pushes otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aggregator_scale import node_name, node_sample
from bare_app import bare_app
from fastapi import FastAPI

from mfumon.api.core.config import Settings
from mfumon.api.main import create_app


def bodies(nodes: int, variants: int = 4) -> list[tuple[str, bytes]]:
    out = []
    for variant in range(variants):
        for n in range(nodes):
            out.append((node_name(n), json.dumps(node_sample(n, 0.0, variant)).encode()))
    return out


class Caller:
    """One ASGI app driven by hand: a POST with a body, the answer's status checked."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def post(self, path: str, body: bytes) -> int:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        sent = False
        status = 0

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await self.app(scope, receive, send)
        return status

    async def get(self, path: str, query: bytes = b"") -> int:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1")],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        status = 0

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await self.app(scope, receive, send)
        return status


def renders_and_pushes(app: FastAPI) -> tuple[int, int]:
    ctx = app.state.ctx
    return ctx.renderer.renders["node"], ctx.state.snapshot(ctx.clock()).nodes.__len__()


async def rounds(args: argparse.Namespace) -> None:
    work = bodies(args.nodes)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(DATABASE_URL=f"sqlite:///{tmp}/bench.db", LOG_LEVEL="WARNING", METRICS_MAX_AGE_SECONDS=0)
        real = create_app(settings)
        bare = bare_app(validate=False)
        async with real.router.lifespan_context(real):
            real_caller, bare_caller = Caller(real), Caller(bare)
            cursor = 0

            async def drive(caller: Caller, n: int, scrape_every: int = 0) -> float:
                nonlocal cursor
                started = time.process_time()
                for k in range(n):
                    name, body = work[cursor % len(work)]
                    cursor += 1
                    stamp = f"{time.time():.6f}".encode()
                    status = await caller.post(f"/v1/nodes/{name}/samples", body.replace(b"0.0", stamp, 1))
                    if status != 200:
                        raise RuntimeError(f"push answered {status}")
                    if scrape_every and k % scrape_every == scrape_every - 1:
                        await caller.get("/metrics")
                    if k % 64 == 0:
                        await asyncio.sleep(0)  # the renderer's turn, as between requests
                await asyncio.sleep(0.05)
                return (time.process_time() - started) / n

            await drive(real_caller, args.nodes)  # every node once: filled
            await drive(bare_caller, args.nodes)
            await real_caller.get("/metrics")
            profile = cProfile.Profile() if args.profile else None
            ratios, bares, reals = [], [], []
            for r in range(args.rounds):
                b = await drive(bare_caller, args.pushes)
                renders_before = real.state.ctx.renderer.renders["node"]
                if profile:
                    profile.enable()
                m = await drive(real_caller, args.pushes, args.scrape_every)
                if profile:
                    profile.disable()
                renders = real.state.ctx.renderer.renders["node"] - renders_before
                ratios.append(b / m)
                bares.append(b)
                reals.append(m)
                print(
                    f"round {r + 1}: bare {b * 1e6:.0f} us, mfumon {m * 1e6:.0f} us a push "
                    f"(ratio bare/mfumon {b / m:.2f}); node renders per push {renders / args.pushes:.3f}",
                    flush=True,
                )
            print(f"median ratio {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
            # The fastest round of each: what each costs when nothing else took the CPU meanwhile (a shared machine)
            best = min(bares) / min(reals)
            print(f"best rounds: bare {min(bares) * 1e6:.0f} us, mfumon {min(reals) * 1e6:.0f} us, ratio {best:.2f}")
            if profile:
                profile.dump_stats(args.profile)
            await scrape_after_every_node_pushed(real, real_caller, work[: args.nodes], args.nodes)


async def scrape_after_every_node_pushed(
    app: FastAPI, caller: Caller, once: list[tuple[str, bytes]], nodes: int
) -> None:
    """``/metrics`` warm (best of 3), then after every node pushed once with the event loop otherwise idle between
    pushes (a cluster pushing on its interval), the first scrape: its time, and how many nodes it rendered itself."""
    renderer = app.state.ctx.renderer

    async def timed_scrape() -> float:
        started = time.perf_counter()
        await caller.get("/metrics")
        return time.perf_counter() - started

    warm = min([await timed_scrape() for _ in range(3)])
    for name, body in once:
        stamp = f"{time.time():.6f}".encode()
        await caller.post(f"/v1/nodes/{name}/samples", body.replace(b"0.0", stamp, 1))
        await asyncio.sleep(0.0005)
    await asyncio.sleep(0.2)
    ahead = renderer.renders["node"]
    changed = await timed_scrape()
    by_scrape = renderer.renders["node"] - ahead
    print(
        f"scrape at {nodes * 8:,} GPUs: warm {warm * 1e3:.0f} ms; after every node pushed {changed * 1e3:.0f} ms "
        f"({changed / warm:.2f}x warm), {by_scrape} of {nodes} nodes rendered by that scrape"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1250)
    parser.add_argument("--pushes", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scrape-every", type=int, default=0)
    parser.add_argument("--profile", type=Path)
    asyncio.run(rounds(parser.parse_args()))


if __name__ == "__main__":
    main()
