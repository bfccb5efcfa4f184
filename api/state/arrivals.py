"""A node's newest push, held as it came until someone reads the node: ingest decodes and stores, reads digest.

A push is a gauge sample: only a node's newest one matters to ``/metrics`` and the API, and Prometheus reads it once
per scrape interval however often the node pushes. So a push is *held* (:class:`Arrival`, O(1)), and its views
(:mod:`mfumon.api.state.views`) and health (:func:`mfumon.api.state.health.advance`) are built when the node is first
read after it: by the renderer just before a scrape, by the scrape, or by an API read (:class:`ClusterState` digests
an arrival before any read that could see the node). This is Prometheus' remote-write receiver's way: a request
appends decoded samples; nothing is derived per request.

**Nothing is lost by skipping a push.** A held push is replaced by a later one only when the two agree on
everything the node's history reads (:func:`steady_key`): its GPUs and ports, which jobs run on which GPU, which GPUs
are idle, and the fields whose every value counts (``GPU_HISTORY_FIELDS``, ``PORT_HISTORY_FIELDS``: error counters,
drain-check inputs). Then the later push alone leaves the history as both in turn would: no error counter grew, no
GPU started failing a drain check, and idle time and energy telescope (the idle seconds between the held sample and
the newest are the sum of those between each pair). The other checks (throttling, port states) read only the newest
push, as a scrape would. A push that says anything else is digested at once, with the one it follows. So is a push
more than ``MAX_IDLE_GAP_S`` after the digested sample (idle time is not counted across a longer silence), one whose
energy counter went back (a reset: the idle energy across it is not counted either), and a node's first.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from mfumon.api.state.health import GPU_HISTORY_FIELDS, MAX_IDLE_GAP_S, PORT_HISTORY_FIELDS
from mfumon.api.state.views import NodeView, build_node_view, gpu_busy, gpu_views, port_views

if TYPE_CHECKING:
    from mfumon.api.schemas.nodes import GpuSample, NodeSampleCreate
    from mfumon.api.state.devices import DeviceResolver


class Steady(NamedTuple):
    """What a push says that a node's history reads (:func:`steady_key`)."""

    key: tuple[Any, ...]  # compared for equality only
    energy: tuple[float | None, ...]  # each GPU's energy counter, in the push's order: a reset must not be skipped


# Read from the models' field dicts, in C: a key costs about 2 us a push of 8 GPUs.
_FIELDS = attrgetter("__dict__")
_GPU_READ = itemgetter("job_id", *GPU_HISTORY_FIELDS)
_PORT_READ = itemgetter(*PORT_HISTORY_FIELDS)
_ENERGY = itemgetter("energy_joules_total")


@dataclass(slots=True)
class Arrival:
    """A node's newest push not yet digested, and how many pushes it stands for.

    ``sample`` is None for pushes that brought nothing newer than the view held (a spool replay): they only count
    as received and keep the node alive.
    """

    sample: NodeSampleCreate | None
    stamp: float  # the sample's timestamp, never ahead of its arrival
    received_at: float  # when the newest push arrived: the view's ``updated_at``
    last_seen_at: float
    pushes: int = 1
    steady: Steady | None = None

    def absorb(self, earlier: Arrival) -> None:
        """Stand for ``earlier`` too: its pushes count as received."""
        self.pushes += earlier.pushes
        self.last_seen_at = max(self.last_seen_at, earlier.last_seen_at)


def steady_key(sample: NodeSampleCreate) -> Steady:
    """What ``sample`` says that the node's history reads: per GPU its job (or the jobs sharing it), whether it is
    idle, its history fields and its energy counter; per port its history fields; and the pool."""
    gpus = sample.gpus
    dicts = tuple(map(_FIELDS, gpus))
    placed = tuple(_jobs_or_idle(gpu) for gpu in gpus if gpu.job_id is None or gpu.shares is not None)
    ports = None if sample.ib_ports is None else tuple(map(_PORT_READ, map(_FIELDS, sample.ib_ports)))
    return Steady((sample.pool, tuple(map(_GPU_READ, dicts)), placed, ports), tuple(map(_ENERGY, dicts)))


def _jobs_or_idle(gpu: GpuSample) -> tuple[str, ...] | bool:
    """For a GPU with no job id or shared: the jobs sharing it, else whether it runs compute work. With its job id
    (in the fields), that is what puts it in a job's share, the unattributed busy share or idle."""
    if gpu.shares is not None:
        return tuple(share.job_id for share in gpu.shares)
    return bool(gpu.up) and gpu_busy(gpu.counters())


def waits(arrival: Arrival, held: NodeView | None, pending: Arrival | None) -> bool:
    """Whether ``arrival`` may wait, undigested, for the node's next read: it says the same as the view held about
    everything the node's history reads, within ``MAX_IDLE_GAP_S`` of it, and no GPU's energy counter went back
    (a reset: the idle energy across it is not counted) since the push before (``pending``, else the view's)."""
    if held is None or held.steady is None or arrival.steady is None or arrival.steady.key != held.steady.key:
        return False
    before = pending.steady if pending is not None and pending.steady is not None else held.steady
    return arrival.stamp - held.last_sample_timestamp <= MAX_IDLE_GAP_S and not any(
        now < then
        for now, then in zip(arrival.steady.energy, before.energy, strict=True)  # the same GPUs: the keys agree
        if now is not None and then is not None
    )


def digest(name: str, arrival: Arrival, held: NodeView | None, resolver: DeviceResolver) -> NodeView:
    """The node's view after ``arrival`` (its health not yet advanced: the state does that when it holds it)."""
    seen = arrival.last_seen_at if held is None else max(arrival.last_seen_at, held.last_seen_at)
    received = arrival.pushes + (held.samples_received if held is not None else 0)
    sample = arrival.sample
    if sample is None:  # nothing newer: the view held, seen again
        assert held is not None, "an arrival without a sample follows a view"
        pool, stamp, gpus, ports, steady = held.pool, held.last_sample_timestamp, held.gpus, held.ib_ports, held.steady
    else:
        pool, stamp = sample.pool, arrival.stamp
        gpus, ports = gpu_views(name, stamp, sample.gpus, resolver), port_views(sample.ib_ports)
        steady = arrival.steady if arrival.steady is not None else steady_key(sample)
    return build_node_view(
        name=name,
        pool=pool,
        last_seen_at=seen,
        last_sample_timestamp=stamp,
        samples_received=received,
        updated_at=arrival.received_at,
        gpus=gpus,
        ib_ports=ports,
        steady=steady,
    )
