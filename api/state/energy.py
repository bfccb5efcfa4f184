"""Energy (issue 60): each GPU's mean power since its previous view, and the fleet's draw split by job and state.

**Per GPU**, when the state takes a node's view (:func:`derive_power`): the difference of the GPU's energy counter
(NVML's total energy since the driver loaded, DCGM's ``TOTAL_ENERGY_CONSUMPTION``) over the time between its two
samples: method ``counter``. Where that cannot be taken — the counter went down (the driver reloaded: a reset), the
GPU has no counter (older GPUs, amdsmi), it is the GPU's first view, or the difference is not a
plausible power — its power sample is used instead, method ``power``. A MIG instance has neither reading in NVML: it
gets its profile's share of the GPU (compute slices / the GPU's, from the peak table) of its board's counter
difference, else of the board's power sample, method ``mig_fraction``. Everything not from the GPU's own counter is
marked *estimated*. A GPU with no reading has no draw and is counted as such.

**Per interval**, at each billing (:func:`fleet_draw`, one replica per interval): each GPU's mean power, split like
its GPU-seconds — to its reporting job (a shared GPU by each job's share), or to the unreported or idle energy of
its pools and the cluster. The billing multiplies by the interval: energy is sampled at the billing interval, as the GPU
states are, so the sums follow the counters' differences without double counting across replicas.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field

from mfumon.api.state.views import GpuView, NodeView

COUNTER = "counter"
POWER = "power"
MIG_FRACTION = "mig_fraction"
#: Above this mean power a counter difference is not believed (a wrapped or corrupt counter): the sample is used.
MAX_PLAUSIBLE_WATTS = 5000.0
#: Where a GPU's energy goes, as its GPU-seconds: a reporting job's, busy without reports (a job that does not
#: report, or no job), idle.
ENERGY_CATEGORIES: tuple[str, ...] = ("job", "unreported", "idle")


def derive_power(held: NodeView | None, view: NodeView) -> None:
    """Set ``draw_watts``/``draw_method`` on the GPUs of ``view`` from their previous views in ``held``, and the
    node's draw by job and state (``view.draw``), so that billing sums nodes, not GPUs."""
    before = {gpu.uuid: gpu for gpu in held.gpus} if held is not None else {}
    draw = NodeDraw()
    for gpu in view.gpus:
        if not gpu.up:
            continue
        _gpu_power(gpu, before.get(gpu.uuid))
        if gpu.shares is not None:
            total = sum(share.share for share in gpu.shares)
            for share in gpu.shares:
                part = share.share / total if total > 0 else 1.0 / len(gpu.shares)
                draw.jobs.setdefault(share.job_id, Draw()).add(gpu, part)
        elif gpu.job_id is not None:
            held_draw = draw.jobs.get(gpu.job_id)
            if held_draw is None:
                held_draw = draw.jobs[gpu.job_id] = Draw()
            held_draw.add(gpu)
        elif gpu.busy:
            draw.unattributed.add(gpu)
        else:
            draw.idle.add(gpu)
    view.draw = draw


def _gpu_power(gpu: GpuView, prior: GpuView | None) -> None:
    if prior is not None and prior.sample_timestamp == gpu.sample_timestamp and prior.draw_method is not None:
        gpu.draw_watts, gpu.draw_method = prior.draw_watts, prior.draw_method  # the same sample again
        return
    watts = _counter_watts(gpu, prior, "energy_joules_total")
    if watts is not None:
        gpu.draw_watts, gpu.draw_method = watts, COUNTER
        return
    if gpu.mig_profile is not None:  # a MIG instance: its share of its board's energy, else of the board's power
        if gpu.mig_fraction is None:
            return
        board = _counter_watts(gpu, prior, "board_energy_joules_total")
        if board is None:
            board = _sample_watts(gpu.counters.get("board_power_watts"))
        if board is not None:
            gpu.draw_watts, gpu.draw_method = board * gpu.mig_fraction, MIG_FRACTION
        return
    power = _sample_watts(gpu.counters.get("power_watts"))
    if power is not None:
        gpu.draw_watts, gpu.draw_method = power, POWER


def _counter_watts(gpu: GpuView, prior: GpuView | None, name: str) -> float | None:
    """The mean power over the gap between two samples of the counter ``name``, where it can be believed."""
    now_j = gpu.counters.get(name)
    if prior is None or now_j is None:
        return None
    then_j = prior.counters.get(name)
    gap = gpu.sample_timestamp - prior.sample_timestamp
    if then_j is None or gap <= 0 or now_j < then_j:
        return None
    watts = (now_j - then_j) / gap
    return watts if watts <= MAX_PLAUSIBLE_WATTS else None


def _sample_watts(power: float | None) -> float | None:
    return float(power) if power is not None and 0 <= power <= MAX_PLAUSIBLE_WATTS else None


@dataclass(slots=True)
class Draw:
    """Power drawn now (watts), what part of it is estimated from power samples, and GPU-equivalents with none."""

    watts: float = 0.0
    estimated_watts: float = 0.0
    gpus_without: float = 0.0

    def add(self, gpu: GpuView, share: float = 1.0) -> None:
        if gpu.draw_watts is None:
            self.gpus_without += share
            return
        self.watts += gpu.draw_watts * share
        if gpu.draw_method != COUNTER:
            self.estimated_watts += gpu.draw_watts * share

    def merge(self, other: Draw) -> None:
        self.watts += other.watts
        self.estimated_watts += other.estimated_watts
        self.gpus_without += other.gpus_without


@dataclass(slots=True)
class NodeDraw:
    """One node's power now by job (a shared GPU split by its jobs' shares, scaled to add up to the GPU), and of its
    busy GPUs with no job and its idle ones: built once per push, summed by the billing."""

    jobs: dict[str, Draw] = field(default_factory=dict)
    unattributed: Draw = field(default_factory=Draw)
    idle: Draw = field(default_factory=Draw)


@dataclass(slots=True)
class FleetDraw:
    """The fleet's power now: per job (``(job_id, kind)``), and per scope (pool, None for the cluster) and category
    (:data:`ENERGY_CATEGORIES`)."""

    jobs: dict[tuple[str, str], Draw] = field(default_factory=dict)
    # Nodes' draw summed per set of pools first (few), spread to each pool and the cluster by :meth:`settle`.
    pending: dict[tuple[str, ...], dict[str, Draw]] = field(default_factory=dict)
    scopes: dict[tuple[str | None, str], Draw] = field(default_factory=dict)

    def settle(self) -> FleetDraw:
        for pools, totals in self.pending.items():
            for category, part in totals.items():
                for pool in (None, *pools):
                    self.scope(pool, category).merge(part)
        self.pending.clear()
        return self

    def scope(self, pool: str | None, category: str) -> Draw:
        return self.scopes.setdefault((pool, category), Draw())

    def job(self, job_id: str, kind: str) -> Draw:
        return self.jobs.setdefault((job_id, kind), Draw())


def node_draw(
    out: FleetDraw, node: NodeView, pools: tuple[str, ...], jobs: Mapping[str, str], reporting: Container[str]
) -> None:
    """Add one node's draw to ``out`` in the cluster and each of ``pools``, split as GPU-seconds are billed: a
    reporting job's share (``jobs``: id -> kind) is that job's energy; the share of a job that does not report is
    ``unreported``, like busy GPUs with no job; idle GPUs ``idle``."""
    draw = node.draw
    if draw is None:  # a view the state has not taken (tests): its GPUs' power is the samples'
        derive_power(None, node)
        draw = node.draw
        assert draw is not None
    totals = out.pending.setdefault(pools, {})
    for job_id, part in draw.jobs.items():
        if job_id in reporting:
            out.job(job_id, jobs.get(job_id, "")).merge(part)
            category = "job"
        else:
            category = "unreported"
        _merge(totals, category, part)
    if draw.unattributed.watts or draw.unattributed.gpus_without:
        _merge(totals, "unreported", draw.unattributed)
    if draw.idle.watts or draw.idle.gpus_without:
        _merge(totals, "idle", draw.idle)


def _merge(totals: dict[str, Draw], category: str, part: Draw) -> None:
    held = totals.get(category)
    if held is None:
        held = totals[category] = Draw()
    held.merge(part)
