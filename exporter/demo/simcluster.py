"""The simulated cluster behind ``mfumon demo``: nodes, jobs with model shapes, and their throughput arithmetic.

Jobs are sized so that MFU lands on a target with the real dense peaks: a job's whole-job throughput is
``tokens/s = MFU x num_gpus x peak / flops_per_token``, with the FLOPs formula and the peak table the aggregator
uses (:mod:`mfumon.mfu`). The job's MFU at any moment is the same
curve its simulated GPUs use for tensor activity (:func:`mfumon.exporter.node.sources.sim.job_mfu_at`), so the reported
MFU and the GPUs' counters agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mfumon import mfu as engine
from mfumon.exporter.demo.siminspector import SimCollective, SimCollectives, SimTransfer
from mfumon.exporter.demo.simserving import SimServingJob
from mfumon.exporter.node.sources.sim import SimWorkload, job_mfu_at

__all__ = [
    "A100",
    "B200",
    "H100",
    "BatchJob",
    "ClusterSpec",
    "LifePhase",
    "Lifecycle",
    "ModelShape",
    "PendingJob",
    "QueuedJob",
    "SchedulerSpec",
    "SimJob",
    "SimNode",
    "default_cluster",
    "default_scheduler",
    "default_serving",
]

H100 = "NVIDIA H100 80GB HBM3"
B200 = "NVIDIA B200"
A100 = "NVIDIA A100-SXM4-80GB"
MI300X = "AMD Instinct MI300X"


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A transformer's size and shape, as a job report's ``model`` object carries it."""

    name: str
    params: float
    layers: int
    heads: int
    head_dim: int
    seq_len: int

    def flops_per_token(self, kind: engine.WorkloadKind) -> float:
        """The engine's FLOPs per token for this shape (PaLM appendix B, attention included)."""
        shape = engine.ModelShape(
            params=self.params, layers=self.layers, heads=self.heads, head_dim=self.head_dim, seq_len=self.seq_len
        )
        return engine.flops_per_token(shape, kind)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "params": self.params,
            "layers": self.layers,
            "heads": self.heads,
            "head_dim": self.head_dim,
            "seq_len": self.seq_len,
        }


@dataclass(frozen=True, slots=True)
class SimNode:
    name: str
    pool: str
    gpu_model: str
    gpu_count: int = 8
    # Fleet health: seconds after the start at which GPU ``fault_gpu`` takes an uncorrectable ECC error whose row
    # remap then waits for a reset (None: no fault); how often one InfiniBand link flaps (None: never).
    fault_gpu: int | None = None
    fault_after_seconds: float = 20.0
    flapping_link_every_seconds: float | None = None
    ib_traffic_bytes_per_second: float = 2e9
    #: how the node agent reads the GPUs: ``sim`` directly, or ``dcgm`` through a simulated dcgm-exporter 4.10 on
    #: DCGM 4.7 (canonical field names, base units, cumulative cycle counters) and the real dcgm source's parser
    reader: str = "sim"
    #: (GPU index, lanes) of a GPU whose PCIe link trained at fewer lanes than it has (None: every link at full width)
    downtrained_gpu: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """A job's life around its steps, in seconds since the simulation started: start-up, a checkpoint save closing
    every period, one failure, and a restart once the scheduler has requeued it (``down_s`` later).

    The job reports only while it steps; its events carry the seconds each phase took, as the reporter's hooks send
    them (``POST /v1/jobs/{id}/events``).
    """

    init_seconds: float = 20.0
    checkpoint_every_seconds: float = 30.0
    checkpoint_seconds: float = 10.0
    fail_at_seconds: float | None = 75.0
    down_seconds: float = 20.0

    def phase(self, elapsed: float) -> LifePhase:
        """Where the job is ``elapsed`` seconds after the simulation started."""
        start, attempt = 0.0, 0
        if self.fail_at_seconds is not None and elapsed >= self.fail_at_seconds:
            if elapsed < self.fail_at_seconds + self.down_seconds:
                return LifePhase("down", 0, 0.0, 0)
            start, attempt = self.fail_at_seconds + self.down_seconds, 1
        t = elapsed - start - self.init_seconds
        if t < 0:
            return LifePhase("init", attempt, 0.0, 0)
        stepping = self.checkpoint_every_seconds - self.checkpoint_seconds
        periods, into = divmod(t, self.checkpoint_every_seconds)
        stepped = periods * stepping + min(into, stepping)
        return LifePhase("checkpoint" if into >= stepping else "step", attempt, stepped, int(periods))


@dataclass(frozen=True, slots=True)
class LifePhase:
    name: str  # init, step, checkpoint or down
    attempt: int  # 0 until the failure, then 1
    stepped_seconds: float  # seconds spent stepping in this attempt
    saves: int  # checkpoints completed in this attempt


@dataclass(frozen=True, slots=True)
class SimJob:
    """A running job: where it runs, what it trains or serves, and the MFU it should show."""

    job_id: str
    name: str
    team: str
    pool: str
    kind: engine.WorkloadKind
    profile: str
    gpu_model: str
    target_mfu: float
    model: ModelShape
    placement: tuple[tuple[str, int], ...]
    step_seconds: float = 2.0
    comm_fraction: float = 0.05
    data_wait_fraction: float = 0.01
    checkpoint_every_seconds: float | None = 900.0
    #: full activation recompute: the GPUs execute 8/6 of the model FLOPs, and the reports say so (HFU)
    recompute_activations: bool = False
    #: the model the job *reports*, when it is not the one that runs (a report that over-claims)
    claimed_model: ModelShape | None = None
    #: False for a job nobody wrapped: its GPUs are busy and attributed to it, but it never reports
    reports: bool = True
    #: start-up, checkpoints, a failure and a restart, reported as job events (None: it only steps)
    lifecycle: Lifecycle | None = None
    #: (node, GPU index) of a GPU held down for heat, at this fraction of its max clock: the job's straggler
    slow_gpu: tuple[str, int] | None = None
    slow_clock_fraction: float = 0.6
    #: its NCCL collectives per step, written as NCCL Inspector dumps them on its nodes (None: no Inspector output)
    collectives: SimCollectives | None = None

    @property
    def num_gpus(self) -> int:
        return len(self.placement)

    def workload(self) -> SimWorkload:
        """What each of the job's simulated GPUs runs."""
        return SimWorkload(
            profile=self.profile,
            target_mfu=self.target_mfu,
            job_id=self.job_id,
            step_seconds=self.step_seconds,
            checkpoint_every_seconds=self.checkpoint_every_seconds,
            tensor_scale=8 / 6 if self.recompute_activations else 1.0,
        )

    def workload_on(self, node: str, index: int) -> SimWorkload:
        """What GPU ``index`` of ``node`` runs: the job's workload, slowed down on its straggler."""
        workload = self.workload()
        if self.slow_gpu == (node, index):
            return replace(workload, clock_fraction=self.slow_clock_fraction)
        return workload

    def mfu_over(self, seed: int, start: float, end: float, points: int = 8) -> float:
        """The job's mean MFU over ``[start, end]`` (the GPUs' curve, sampled at evenly spaced points)."""
        if end <= start:
            return job_mfu_at(self.workload(), seed, end)
        times = [start + (end - start) * (i + 0.5) / points for i in range(points)]
        return sum(job_mfu_at(self.workload(), seed, t) for t in times) / points

    def tokens_per_second(self, mfu: float) -> float:
        """Whole-job throughput that gives ``mfu`` on this job's GPUs: MFU x GPUs x peak / FLOPs per token.

        The FLOPs are those of the model that runs; a job that claims a larger one reports a higher MFU than this.
        """
        peak = engine.default_peak_table().lookup(self.gpu_model, "bf16").peak_flops_per_gpu
        assert peak is not None, f"{self.gpu_model} has no bf16 peak"  # the demo runs only devices in the table
        return mfu * self.num_gpus * peak / self.model.flops_per_token(self.kind)

    def metadata(self) -> dict[str, Any]:
        """The ``PUT /v1/jobs/{id}`` body (and the metadata part of each report)."""
        body = {
            "kind": self.kind,
            "num_gpus": self.num_gpus,
            "gpus_requested": self.num_gpus,
            "gpu_model": self.gpu_model,
            "dtype": "bf16",
            "model": (self.claimed_model or self.model).as_json(),
            "name": self.name,
            "team": self.team,
            "pool": self.pool,
        }
        if self.recompute_activations:
            body["recompute_activations"] = True
        return body

    def report(self, mfu: float, interval_seconds: float, step: int) -> dict[str, Any]:
        """A ``POST /v1/jobs/{id}/reports`` body for an interval at ``mfu``."""
        step_seconds = self.step_seconds
        return {
            **self.metadata(),
            "tokens_per_second": max(self.tokens_per_second(mfu), 1e-3),
            "step_seconds": step_seconds,
            "comm_seconds": step_seconds * self.comm_fraction,
            "data_wait_seconds": step_seconds * self.data_wait_fraction,
            "step": step,
        }


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job waiting for GPUs: registered with ``gpus_requested`` and no GPUs, so its pool is unsatisfied."""

    job_id: str
    name: str
    team: str
    pool: str
    kind: str
    gpu_model: str
    gpus_requested: int
    model: ModelShape

    def metadata(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "gpus_requested": self.gpus_requested,
            "gpu_model": self.gpu_model,
            "model": self.model.as_json(),
            "name": self.name,
            "team": self.team,
            "pool": self.pool,
        }


# -- the simulated scheduler (what `mfumon scheduler` would put: queued jobs, jobs that run without reporting) ------
@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A job the simulated scheduler holds in its queue, waiting since ``waited_s`` before the demo started."""

    job_id: str
    name: str
    team: str
    pool: str
    gpus_per_unit: int
    units: int = 1
    waited_seconds: float = 600.0
    reason: str = "Resources"

    def as_json(self, started_at: float) -> dict[str, Any]:
        queued_at = started_at - self.waited_seconds
        return {
            "job_id": self.job_id,
            "status": "pending",
            "gpus_requested": self.gpus_per_unit * self.units,
            "units": [[self.gpus_per_unit, self.units]],
            "submitted_at": queued_at,
            "queued_at": queued_at,
            "pending_reason": self.reason,
            "pool": self.pool,
            "team": self.team,
            "name": self.name,
        }


@dataclass(frozen=True, slots=True)
class BatchJob:
    """A job the scheduler runs that posts no throughput: its GPUs are busy but unreported."""

    job_id: str
    name: str
    team: str
    pool: str
    placement: tuple[tuple[str, int], ...]
    target_mfu: float = 0.3

    def workload(self) -> SimWorkload:
        return SimWorkload(
            profile="training", target_mfu=self.target_mfu, job_id=self.job_id, checkpoint_every_seconds=None
        )


@dataclass(frozen=True, slots=True)
class SchedulerSpec:
    """A simulated scheduler: its queue, its unreported jobs, and team quotas (team, pool, GPUs)."""

    source: str
    queued: tuple[QueuedJob, ...]
    batch: tuple[BatchJob, ...] = ()
    quotas: tuple[tuple[str, str, int], ...] = ()

    def snapshot(self, cluster: ClusterSpec, started_at: float, now: float) -> dict[str, Any]:
        """The ``PUT /v1/scheduler/{source}`` body: every running job placed where it runs, the queue, the quotas."""
        running: list[tuple[str, str, str, str, tuple[tuple[str, int], ...]]] = [
            (j.job_id, j.name, j.team, j.pool, j.placement) for j in cluster.jobs
        ]
        running += [(j.job_id, j.name, j.team, j.pool, j.placement) for j in self.batch]
        jobs = []
        for job_id, name, team, pool, placement in running:
            per_node: dict[str, int] = {}
            for node, _ in placement:
                per_node[node] = per_node.get(node, 0) + 1
            jobs.append(
                {
                    "job_id": job_id,
                    "status": "running",
                    "gpus_requested": len(placement),
                    "gpus_allocated": len(placement),
                    "placement": per_node,
                    "submitted_at": started_at - 900,
                    "queued_at": started_at - 900,
                    "started_at": started_at,
                    "pool": pool,
                    "team": team,
                    "name": name,
                }
            )
        jobs += [job.as_json(started_at) for job in self.queued]
        quotas = [{"team": t, "pool": p, "gpus": g} for t, p, g in self.quotas]
        return {"kind": "slurm", "observed_at": now, "jobs": jobs, "quotas": quotas}


@dataclass(frozen=True, slots=True)
class SharedGpu:
    """One GPU that several jobs time-slice, with each job's share as the exporter would measure it."""

    node: str
    index: int
    shares: tuple[tuple[str, float], ...]  # (job id, share), largest first; they add up to 1
    target_mfu: float  # of the GPU as a whole: the sum of its jobs' work


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    nodes: tuple[SimNode, ...]
    jobs: tuple[SimJob, ...]
    pending: tuple[PendingJob, ...] = ()
    serving: tuple[SimServingJob, ...] = ()  # behind simulated engines that the demo's exporter reads
    scheduler: SchedulerSpec | None = None
    #: (node, GPU index) running compute work that no job id is found for (an interactive session, say)
    unattributed: tuple[tuple[str, int], ...] = ()
    shared: tuple[SharedGpu, ...] = ()  # GPUs two or more jobs share (mfumon_gpu_jobs 2, per-job shares)


#: llama3-8b on 8 H100s of one node as 2 pipeline stages x 4-way FSDP (bf16; each stage 4 units of 4 layers): in each
#: stage's dp communicator (ranks 0-3, 4-7) every unit's parameters are gathered in the forward and the backward
#: pass, its gradients reduce-scattered, plus a small all-reduce of the loss and gradient norm; each pp communicator
#: (ranks 0+4, 1+5, 2+6, 3+7) carries 8 micro-batches' activations (8192 tokens x 4096 x bf16 = 64 MiB) forward and
#: their gradients back, as Send/Recv. Two faults for the per-rank figures (issue 61): rank 2 reaches its stage's dp
#: collectives late (its peers wait in their kernels: its time per operation is a third of theirs), and the link
#: between GPUs 1 and 5 moves the pipeline's messages at 40 GB/s where the other pairs run at 350 GB/s.
FSDP_8B_COLLECTIVES = SimCollectives(
    (
        SimCollective("dp", "AllGather", per_step=8, size_bytes=501_875_000, busbw_gbs=360.0),
        SimCollective("dp", "ReduceScatter", per_step=4, size_bytes=501_875_000, busbw_gbs=340.0),
        SimCollective("dp", "AllReduce", per_step=2, size_bytes=8 * 1024**2, busbw_gbs=180.0),
    ),
    transfers=(SimTransfer("pp", per_step=8, size_bytes=64 * 1024**2, busbw_gbs=350.0),),
    layout=(("dp", ((0, 1, 2, 3), (4, 5, 6, 7))), ("pp", ((0, 4), (1, 5), (2, 6), (3, 7)))),
    late_rank=("dp", 2),
    late_factor=3.0,
    slow_link=(1, 5),
    slow_link_gbs=40.0,
)


def _megatron_layout(tp: int, dp: int, pp: int) -> tuple[tuple[str, tuple[tuple[int, ...], ...]], ...]:
    """The tp, dp and pp communicators of Megatron-LM's default rank order (tensor parallel fastest, then data
    parallel, then pipeline): global rank ``t + tp x (d + dp x p)``."""

    def rank(t: int, d: int, p: int) -> int:
        return t + tp * (d + dp * p)

    return (
        ("tp", tuple(tuple(rank(t, d, p) for t in range(tp)) for p in range(pp) for d in range(dp))),
        ("dp", tuple(tuple(rank(t, d, p) for d in range(dp)) for p in range(pp) for t in range(tp))),
        ("pp", tuple(tuple(rank(t, d, p) for p in range(pp)) for d in range(dp) for t in range(tp))),
    )


#: llama3-70b on 24 H100s of three nodes as Megatron-LM lays it out: 4-way tensor parallel (sequence parallel) inside
#: a node, 3-way data parallel and 2 pipeline stages of 40 layers (rank = tp + 4 x (dp + 3 x pp): gpu-h100-07 holds
#: ranks 0-7, gpu-h100-08 8-15, gpu-h100-09 16-23), so every dp communicator (0+4+8, ..., 15+19+23) and every pp
#: communicator (0+12, ..., 11+23) crosses nodes while the tp ones (0-3, 4-7, ...) stay inside one. Per step of 4
#: micro-batches per replica (12 sequences of 8192 tokens, ~5 s at 40 % MFU):
#:
#: - dp: the distributed optimizer reduce-scatters each rank's bf16 gradients (70.6e9 / 8 parameters) in 8 buckets
#:   and all-gathers the updated parameters back, 735 MB per rank each, at 40 GB/s of bus bandwidth;
#: - tp: each layer's activations (8192 tokens / 4 x 8192 x bf16 = 32 MiB per rank), all-gathered and
#:   reduce-scattered twice in the forward and twice in the backward pass: 640 of each per step, written as 16 of
#:   each 40 times the size (the same bytes and bandwidth, fewer lines), at 360 GB/s over NVLink;
#: - pp: each micro-batch's activations (32 MiB per rank) forward and their gradients back, at 11 GB/s: 88 % of what
#:   one GPU's share of its node's two 400 Gb/s ports carries (100 GB/s / 8 GPUs = 12.5 GB/s), the figure a link
#:   across nodes is judged against.
#:
#: One fault for the per-node figures (issue 61): the network path of gpu-h100-08 is degraded, so its collectives and
#: transfers across nodes take 3x longer: its dp bus bandwidth (~13 GB/s) is a third of the other two nodes', which
#: ``slow_collective_node`` names. Its pipeline links read ~5.5 GB/s (the two ends' records together, one end slow),
#: 44 % of the 12.5 GB/s, above the quarter below which ``slow_link`` fires; the links between the other two nodes
#: read ~88 %. gpu-h100-08 holds one rank of three in every dp communicator, so no peer of its ranks reads as
#: waiting for a late rank (a slow node holding two of three would make the third look late).
MEGATRON_70B_COLLECTIVES = SimCollectives(
    (
        SimCollective("dp", "ReduceScatter", per_step=8, size_bytes=735_416_666, busbw_gbs=40.0),
        SimCollective("dp", "AllGather", per_step=8, size_bytes=735_416_666, busbw_gbs=40.0),
        SimCollective("tp", "AllGather", per_step=16, size_bytes=40 * 32 * 1024**2, busbw_gbs=360.0),
        SimCollective("tp", "ReduceScatter", per_step=16, size_bytes=40 * 32 * 1024**2, busbw_gbs=360.0),
    ),
    transfers=(SimTransfer("pp", per_step=4, size_bytes=32 * 1024**2, busbw_gbs=11.0),),
    layout=_megatron_layout(tp=4, dp=3, pp=2),
    slow_node="gpu-h100-08",
    slow_factor=3.0,
)


def _on(node: str, gpus: range) -> tuple[tuple[str, int], ...]:
    return tuple((node, i) for i in gpus)


def default_cluster(*, checkpoints: bool = True) -> ClusterSpec:
    """15 nodes x 8 GPUs, four GPU models (an AMD node and a B200 node among them), six pools, and jobs that exercise
    every panel and alert.

    A healthy training job that recomputes activations (HFU), a comm-bound one, an inference job, a pending one, a
    job whose reports over-claim (it reports llama2-13b while a 7B model runs), a job nobody wrapped (busy GPUs, no
    reports), one GPU running work with no job id, and six serving jobs behind simulated engines
    (:func:`default_serving`). For the waste waterfall: a job that checkpoints synchronously, fails once and
    restarts (:class:`Lifecycle`), a data-bound job and a job with a straggler GPU.

    Fleet health: the comm-bound job's node has an InfiniBand link that flaps every minute (its exposed
    communication has a cause), ``gpu-a100-02`` takes an uncorrectable ECC error 20 s in and waits for a reset
    (pending row remap: the drain list), and pool ``reserve-h100`` sits idle, drawing idle power.

    Plus a simulated scheduler (:func:`default_scheduler`): a pool of two H100 nodes that two unreported
    sweeps leave fragmented (3 GPUs free on each while a 4-GPU job waits), a queue, and team quotas.

    A mixed cluster (issue 35): an MI300X node in its own pool, read as the amdsmi source reads it (no tensor
    activity, so its job's MFU stands alone against the MI300X's dense peak); and one A100 that two evaluation
    harnesses time-slice.

    Today's telemetry (issue 53): ``gpu-h100-06`` is read through a simulated dcgm-exporter 4.10 on DCGM 4.7
    (canonical names, base units, cumulative cycle counters, so its hardware estimate comes from cycle counters);
    ``gpu-b200-01`` runs a 70B pretraining job on B200s; GPU 2 of the idle ``gpu-h100-03`` has a PCIe link trained
    at x8 of x16.

    NCCL Inspector (issue 61): two jobs' nodes write NCCL 2.30 Inspector dumps. The llama3-8b job on ``gpu-h100-01``
    has a rank its peers wait for and a slow NVLink between two GPUs (:data:`FSDP_8B_COLLECTIVES`); a llama3-70b job
    over ``gpu-h100-07``-``09`` (24 GPUs, healthy MFU) has a node whose collectives across nodes run at a third of
    the others' bandwidth, and pipeline links across nodes judged against the ports (:data:`MEGATRON_70B_COLLECTIVES`).

    ``checkpoints=False`` removes the periodic checkpoint dips (tests compare MFU with targets at any moment).
    """
    every = 900.0 if checkpoints else None
    nodes = (
        SimNode("gpu-h100-01", "train-h100", H100, ib_traffic_bytes_per_second=6e9),
        SimNode("gpu-h100-02", "train-h100", H100, flapping_link_every_seconds=60.0, ib_traffic_bytes_per_second=20e9),
        SimNode("gpu-a100-01", "infer-a100", A100, ib_traffic_bytes_per_second=1e8),
        SimNode("gpu-a100-02", "infer-a100", A100, fault_gpu=5, ib_traffic_bytes_per_second=1e6),
        SimNode("gpu-h100-03", "reserve-h100", H100, ib_traffic_bytes_per_second=1e6, downtrained_gpu=(2, 8)),
        SimNode("gpu-h100-04", "train-h100", H100, ib_traffic_bytes_per_second=6e9),
        SimNode("gpu-h100-05", "train-h100", H100, ib_traffic_bytes_per_second=6e9),
        SimNode("gpu-h100-06", "train-h100", H100, ib_traffic_bytes_per_second=6e9, reader="dcgm"),
        SimNode("gpu-mi300x-01", "train-mi300x", MI300X, ib_traffic_bytes_per_second=6e9),
        SimNode("gpu-b200-01", "train-b200", B200, ib_traffic_bytes_per_second=12e9),
        SimNode("gpu-h100-07", "train-h100", H100, ib_traffic_bytes_per_second=12e9),
        SimNode("gpu-h100-08", "train-h100", H100, ib_traffic_bytes_per_second=12e9),
        SimNode("gpu-h100-09", "train-h100", H100, ib_traffic_bytes_per_second=12e9),
    )
    llama3_70b = ModelShape("llama3-70b", 70.6e9, layers=80, heads=64, head_dim=128, seq_len=8192)
    llama2_13b = ModelShape("llama2-13b", 13.0e9, layers=40, heads=40, head_dim=128, seq_len=4096)
    jobs = (
        SimJob(
            job_id="pretrain-llama3-8b",
            name="llama3-8b pretraining",
            team="foundation",
            pool="train-h100",
            kind="training",
            profile="training",
            gpu_model=H100,
            target_mfu=0.45,
            model=ModelShape("llama3-8b", 8.03e9, layers=32, heads=32, head_dim=128, seq_len=8192),
            placement=_on("gpu-h100-01", range(8)),
            step_seconds=2.5,
            comm_fraction=0.06,
            checkpoint_every_seconds=every,
            recompute_activations=True,
            collectives=FSDP_8B_COLLECTIVES,
        ),
        SimJob(
            job_id="finetune-13b-commbound",
            name="13b finetune (slow interconnect)",
            team="research",
            pool="train-h100",
            kind="training",
            profile="comm_bound",
            gpu_model=H100,
            target_mfu=0.20,
            model=llama2_13b,
            placement=_on("gpu-h100-02", range(4)),
            step_seconds=4.0,
            comm_fraction=0.45,
            data_wait_fraction=0.02,
            checkpoint_every_seconds=every,
        ),
        SimJob(
            job_id="serve-llama3-70b",
            name="llama3-70b chat serving",
            team="product",
            pool="infer-a100",
            kind="inference",
            profile="inference",
            gpu_model=A100,
            target_mfu=0.07,
            model=ModelShape("llama3-70b", 70.6e9, layers=80, heads=64, head_dim=128, seq_len=2048),
            placement=_on("gpu-a100-01", range(4)),  # GPUs 4-7 of the node run serving jobs behind engines
            step_seconds=0.05,
            comm_fraction=0.1,
            data_wait_fraction=0.0,
        ),
        SimJob(
            job_id="finetune-7b-overclaim",
            name="7b finetune (reports the 13b model)",
            team="research",
            pool="train-h100",
            kind="training",
            profile="training",
            gpu_model=H100,
            target_mfu=0.30,
            model=ModelShape("llama2-7b", 6.74e9, layers=32, heads=32, head_dim=128, seq_len=4096),
            claimed_model=llama2_13b,  # reported MFU ~0.56 on tensor pipes that show ~0.35: agreement ~1.6
            placement=_on("gpu-h100-04", range(4)),
            step_seconds=2.0,
            checkpoint_every_seconds=every,
        ),
        SimJob(
            job_id="sweep-unwrapped-17",
            name="hyperparameter sweep (not wrapped)",
            team="research",
            pool="train-h100",
            kind="training",
            profile="training",
            gpu_model=H100,
            target_mfu=0.35,
            model=ModelShape("gpt2-xl", 1.56e9, layers=48, heads=25, head_dim=64, seq_len=1024),
            placement=_on("gpu-h100-04", range(4, 8)),
            checkpoint_every_seconds=every,
            reports=False,
        ),
        SimJob(
            job_id="pretrain-llama3-8b-mi300x",
            name="llama3-8b pretraining on MI300X",
            team="foundation",
            pool="train-mi300x",
            kind="training",
            profile="training",
            gpu_model=MI300X,
            target_mfu=0.38,  # above the 30 % alert bar with room for the simulated jitter
            model=ModelShape("llama3-8b", 8.03e9, layers=32, heads=32, head_dim=128, seq_len=8192),
            placement=_on("gpu-mi300x-01", range(8)),
            step_seconds=2.5,
            comm_fraction=0.08,
            checkpoint_every_seconds=every,
        ),
        # Where the GPU-hours go: a job that saves synchronously (a third of its time), fails once and restarts; a
        # data-bound job; and a job with a straggler (one GPU at 60% of its clock, hot).
        SimJob(
            job_id="pretrain-3b-resilient",
            name="3b pretraining (synchronous checkpoints, one failure)",
            team="foundation",
            pool="train-h100",
            kind="training",
            profile="training",
            gpu_model=H100,
            target_mfu=0.42,
            model=ModelShape("llama3.2-3b", 3.21e9, layers=28, heads=24, head_dim=128, seq_len=8192),
            placement=_on("gpu-h100-05", range(4)),
            step_seconds=1.5,
            checkpoint_every_seconds=None,  # the checkpoints are its lifecycle's: it does not report while it saves
            lifecycle=Lifecycle(),
        ),
        SimJob(
            job_id="finetune-8b-databound",
            name="8b finetune (input-bound)",
            team="research",
            pool="train-h100",
            kind="training",
            profile="training",
            gpu_model=H100,
            target_mfu=0.34,
            model=ModelShape("llama3-8b", 8.03e9, layers=32, heads=32, head_dim=128, seq_len=8192),
            placement=_on("gpu-h100-05", range(4, 8)),
            step_seconds=3.0,
            data_wait_fraction=0.35,
            checkpoint_every_seconds=every,
        ),
        SimJob(
            job_id="pretrain-13b-straggler",
            name="13b pretraining (one hot GPU)",
            team="foundation",
            pool="train-h100",
            kind="training",
            profile="training",
            gpu_model=H100,
            target_mfu=0.38,
            model=llama2_13b,
            placement=_on("gpu-h100-06", range(8)),
            step_seconds=2.0,
            checkpoint_every_seconds=every,
            slow_gpu=("gpu-h100-06", 5),
        ),
        SimJob(
            job_id="pretrain-llama3-70b-b200",
            name="llama3-70b pretraining (B200)",
            team="foundation",
            pool="train-b200",
            kind="training",
            profile="training",
            gpu_model=B200,
            target_mfu=0.36,
            model=llama3_70b,
            placement=_on("gpu-b200-01", range(8)),
            step_seconds=6.0,
            comm_fraction=0.07,
            checkpoint_every_seconds=every,
        ),
        SimJob(
            job_id="pretrain-llama3-70b-3node",
            name="llama3-70b pretraining over 3 nodes (one slow network)",
            team="foundation",
            pool="train-h100",
            kind="training",
            profile="training",
            gpu_model=H100,
            target_mfu=0.40,
            model=llama3_70b,
            placement=_on("gpu-h100-07", range(8)) + _on("gpu-h100-08", range(8)) + _on("gpu-h100-09", range(8)),
            step_seconds=5.0,
            comm_fraction=0.06,
            checkpoint_every_seconds=every,
            collectives=MEGATRON_70B_COLLECTIVES,
        ),
    )
    pending = (
        PendingJob(
            job_id="pretrain-llama3-70b",
            name="llama3-70b pretraining (queued)",
            team="foundation",
            pool="train-h100",
            kind="training",
            gpu_model=H100,
            gpus_requested=8,
            model=llama3_70b,
        ),
    )
    research = (SimNode("gpu-h100-r01", "research-h100", H100), SimNode("gpu-h100-r02", "research-h100", H100))
    return ClusterSpec(
        nodes=nodes + research,
        jobs=jobs,
        pending=pending,
        serving=default_serving(),
        scheduler=default_scheduler(),
        unattributed=(("gpu-h100-02", 7),),
        # Two evaluation harnesses time-slice one A100 (device-plugin replicas): each gets its share.
        shared=(SharedGpu("gpu-a100-02", 7, (("eval-harness-a", 0.65), ("eval-harness-b", 0.35)), 0.12),),
    )


def default_serving() -> tuple[SimServingJob, ...]:
    """Six serving jobs behind simulated engines (vLLM, SGLang and TGI), on gpu-a100-02 and half of gpu-a100-01.

    Judged by the default SLO targets (TTFT 1.0 s, TPOT 0.1 s, 90 % of requests) unless a job sets its own:

    - ``serve-chat-70b`` (vLLM, 4 GPUs): batch 32 at 55% MBU with one request waiting: healthy, ~97 % of requests
      within both targets (TTFT ~0.6 s: ~0.4 s in the queue and its prompt; TPOT ~35 ms).
    - ``serve-code-8b`` (vLLM, 1 GPU): batch 2 at 12% MBU while a dozen requests wait: badly batched; ~2 minutes
      in the queue (12 waiting at 0.1 request/s), so TTFT misses for every request while TPOT is fast (~70 ms).
    - ``serve-rag-32b`` (TGI, 2 GPUs): KV cache 97% full with a queue (~6 s), prompts computed at 15% MFU; TGI has
      no time-to-first-token histogram (no SLO goodput); its mean time per token (prompt included) is ~85 ms.
    - ``serve-agent-32b`` (vLLM, 2 GPUs): long multi-turn contexts keep the KV cache 97-99% full with a queue:
      0.15 preemptions/s, each preempted request queued again and its context recomputed; ~3 s in the queue, so
      TTFT misses for nearly every request (goodput ~0), TPOT ~60 ms.
    - ``serve-docs-8b`` (vLLM, 1 GPU, its own targets TTFT 2.5 s and TPOT 0.05 s): prefill interfering with decode.
      For the last 40 s of every 120 s, 32k-token documents are prefilled in 2048-token chunks that ride 20% of the
      steps (~0.55 s each): the mean step goes from 18 ms to ~0.18 s, inter-token latency of everyone decoding
      spikes, and TPOT climbs past 0.1 s by the burst's end; ~13 % of requests miss the TPOT target over a period
      (goodput below its 90 % objective), none in the calm 70 s.
    - ``serve-eval-8b`` (SGLang, 1 GPU): an evaluation endpoint busy for 90 s of every 150 s and idle (no request,
      no token; its GPUs quiet) for the other 60 s. SGLang 0.5 prints no per-request TPOT histogram (no SLO
      goodput); TTFT ~70 ms.
    """
    return (
        SimServingJob(
            job_id="serve-chat-70b",
            name="llama3-70b chat (vLLM)",
            team="product",
            pool="infer-a100",
            engine="vllm",
            gpu_model=A100,
            served_model="meta-llama/Llama-3.1-70B-Instruct",
            params=70.6e9,
            layers=80,
            heads=64,
            kv_heads=8,
            head_dim=128,
            placement=_on("gpu-a100-02", range(4)),
            batch=32,
            prompt_tokens=800,
            output_tokens=400,
            target_mbu=0.55,
            waiting=1,
            kv_cache_usage=0.55,
            prefix_cache_hit_ratio=0.25,
        ),
        SimServingJob(
            job_id="serve-code-8b",
            name="llama3-8b code completion (vLLM)",
            team="devtools",
            pool="infer-a100",
            engine="vllm",
            gpu_model=A100,
            served_model="meta-llama/Llama-3.1-8B-Instruct",
            params=8.03e9,
            layers=32,
            heads=32,
            kv_heads=8,
            head_dim=128,
            placement=_on("gpu-a100-02", range(4, 5)),
            batch=2,
            prompt_tokens=1200,
            output_tokens=300,
            target_mbu=0.12,
            waiting=12,
            kv_cache_usage=0.08,
        ),
        SimServingJob(
            job_id="serve-rag-32b",
            name="qwen2.5-32b RAG answers (TGI)",
            team="search",
            pool="infer-a100",
            engine="tgi",
            gpu_model=A100,
            served_model="Qwen/Qwen2.5-32B-Instruct",
            params=32.8e9,
            layers=64,
            heads=40,
            kv_heads=8,
            head_dim=128,
            placement=_on("gpu-a100-02", range(5, 7)),
            batch=24,
            prompt_tokens=400,
            output_tokens=200,
            target_mbu=0.20,
            waiting=9,
            kv_cache_usage=0.97,
            prefill_active_mfu=0.15,
            max_model_len=32768,
        ),
        SimServingJob(
            job_id="serve-agent-32b",
            name="qwen2.5-32b agents with long contexts (vLLM)",
            team="product",
            pool="infer-a100",
            engine="vllm",
            gpu_model=A100,
            served_model="Qwen/Qwen2.5-32B-Instruct",
            params=32.8e9,
            layers=64,
            heads=40,
            kv_heads=8,
            head_dim=128,
            placement=_on("gpu-a100-01", range(4, 6)),
            batch=40,
            prompt_tokens=6000,
            output_tokens=500,
            target_mbu=0.55,
            waiting=4,
            kv_cache_usage=0.98,
            prefix_cache_hit_ratio=0.85,  # each turn resends the conversation so far
            max_model_len=32768,
            preemptions_per_second=0.15,
        ),
        SimServingJob(
            job_id="serve-docs-8b",
            name="llama3-8b document Q&A on long prompts (vLLM)",
            team="search",
            pool="infer-a100",
            engine="vllm",
            gpu_model=A100,
            served_model="meta-llama/Llama-3.1-8B-Instruct",
            params=8.03e9,
            layers=32,
            heads=32,
            kv_heads=8,
            head_dim=128,
            placement=_on("gpu-a100-01", range(6, 7)),
            batch=16,
            prompt_tokens=1000,
            output_tokens=300,
            target_mbu=0.5,
            waiting=0,  # chunked prefill admits requests at once: they wait inside the batch, not in the queue
            kv_cache_usage=0.35,
            prefix_cache_hit_ratio=0.1,
            long_prompt_tokens=32000,
            long_prompt_every_seconds=120.0,
            long_prompt_burst_seconds=40.0,
            long_prompt_step_share=0.2,
            long_prompt_running_growth=2.5,
            slo=(("ttft_seconds", 2.5), ("tpot_seconds", 0.05)),
        ),
        SimServingJob(
            job_id="serve-eval-8b",
            name="llama3-8b evaluation endpoint (SGLang)",
            team="research",
            pool="infer-a100",
            engine="sglang",
            gpu_model=A100,
            served_model="meta-llama/Llama-3.1-8B-Instruct",
            params=8.03e9,
            layers=32,
            heads=32,
            kv_heads=8,
            head_dim=128,
            placement=_on("gpu-a100-01", range(7, 8)),
            batch=32,
            prompt_tokens=1500,
            output_tokens=200,
            target_mbu=0.45,
            waiting=0,
            kv_cache_usage=0.5,
            prefix_cache_hit_ratio=0.8,  # the few-shot examples every prompt starts with
            idle_every_seconds=150.0,
            idle_seconds=60.0,
        ),
    )


def default_scheduler() -> SchedulerSpec:
    """The demo's scheduler: a long-waiting 8-GPU job, a 4-GPU job that fits nowhere whole, two sweeps, quotas."""
    return SchedulerSpec(
        source="demo-slurm",
        queued=(
            QueuedJob(
                "pretrain-llama3-70b", "llama3-70b pretraining (queued)", "foundation", "train-h100", 8, 1, 5 * 3600
            ),
            QueuedJob("ablation-4gpu", "attention ablation", "research", "research-h100", 4, 1, 1800),
        ),
        batch=(
            BatchJob("sweep-lr-a", "lr sweep a", "research", "research-h100", _on("gpu-h100-r01", range(5))),
            BatchJob("sweep-lr-b", "lr sweep b", "research", "research-h100", _on("gpu-h100-r02", range(5))),
        ),
        quotas=(("foundation", "train-h100", 48), ("research", "research-h100", 8), ("product", "infer-a100", 8)),
    )
