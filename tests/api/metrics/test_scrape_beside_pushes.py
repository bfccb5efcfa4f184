"""A scrape never holds up a push (issue 33 #3): its renders take turns with requests on the event loop, and what it
renders on its worker thread it renders outside the lock every push takes.

At 100,000 GPUs an unsharded scrape rendering every node on a worker thread took 3.6 s while holding that lock, and
pushes waited up to 1.5 s behind it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from mfumon.api.metrics import store
from mfumon.api.metrics.self_metrics import SelfMetrics
from mfumon.api.metrics.store import MetricsRenderer, shard_of
from mfumon.api.state.aggregate import summarize
from mfumon.api.state.store import Snapshot
from mfumon.api.state.views import NodeView
from tests.utils.factories import metric_value, node_sample, node_view

NAMES = [f"node-{n}" for n in range(40)]


def _views(watts: float) -> dict[str, NodeView]:
    return {name: node_view(node_sample(2, power_watts=watts), name) for name in NAMES}


def _snapshot(views: dict[str, NodeView]) -> Snapshot:
    return Snapshot(now=0.0, nodes=tuple(views.values()), jobs=(), baselines={})


def test_a_scrapes_renders_take_turns_with_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stale node is rendered by ``catch_up``, yielding to the loop between turns (one node a turn here), so
    the worker thread's render finds nothing left to render and serves each node's newest view."""
    monkeypatch.setattr(store, "SCRAPE_TURN_S", 0.0)
    renderer = MetricsRenderer(SelfMetrics(), refresh_stats=lambda: (0.0, 0))
    views = _views(100.0)
    for name in NAMES:
        renderer.node_changed(name)  # no keep_rendering task: all of them wait for the scrape
    turns_beside = 0

    async def run() -> int:
        nonlocal turns_beside
        catching_up = asyncio.create_task(renderer.catch_up(views.get))
        while not catching_up.done():  # a request's worth of work per turn of the loop
            turns_beside += 1
            await asyncio.sleep(0)
        return catching_up.result()

    assert asyncio.run(run()) == len(NAMES)
    assert turns_beside >= len(NAMES) - 1  # the loop served others between the renders
    before = renderer.renders["node"]
    text = renderer.render(_snapshot(views), summarize(_snapshot(views))).decode()
    assert renderer.renders["node"] == before  # only joined
    assert all(metric_value(text, "mfumon_gpu_power_watts", node=name, gpu="0") == 100.0 for name in NAMES)


def test_catch_up_renders_only_its_shards_stale_nodes_from_their_newest_view() -> None:
    renderer = MetricsRenderer(SelfMetrics(), refresh_stats=lambda: (0.0, 0))
    views = _views(100.0)
    for name in NAMES:
        renderer.node_changed(name)
    views.update(_views(101.0))  # pushed again before the scrape: the newest view is the one rendered
    mine = [name for name in NAMES if shard_of(name, 3) == 2]
    assert asyncio.run(renderer.catch_up(views.get, (2, 3))) == len(mine)
    assert set(renderer._nodes) == set(mine)
    assert all(b"} 101\n" in renderer._nodes[name].chunk["mfumon_gpu_power_watts"] for name in mine)
    assert asyncio.run(renderer.catch_up(views.get, (2, 3))) == 0  # rendered already: not again


def test_a_push_is_not_held_up_by_a_scrape_rendering_on_its_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A push marks its node changed (``node_changed``, under the renderer's lock) while a scrape on a worker
    thread is in the middle of rendering a stale node: the push goes through at once."""
    renderer = MetricsRenderer(SelfMetrics(), refresh_stats=lambda: (0.0, 0))
    views = _views(100.0)
    rendering, release = threading.Event(), threading.Event()
    real_render = store.render_node

    def slow_render(node: NodeView, held: Any) -> Any:
        rendering.set()
        assert release.wait(30), "never released"
        return real_render(node, held)

    monkeypatch.setattr(store, "render_node", slow_render)
    scrape = threading.Thread(target=lambda: renderer.render(_snapshot(views), summarize(_snapshot(views))))
    scrape.start()
    try:
        assert rendering.wait(10), "the scrape never rendered"
        push = threading.Thread(target=renderer.node_changed, args=("node-new",))
        push.start()
        push.join(10)
        assert not push.is_alive(), "a push waited for the scrape's render"
    finally:
        release.set()
        scrape.join(30)
    assert renderer.renders["node"] == len(NAMES)
