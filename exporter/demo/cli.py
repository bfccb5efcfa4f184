"""``mfumon demo``: the aggregator plus a simulated cluster and jobs, for a machine without GPUs.

Starts ``mfumon serve`` as a subprocess (SQLite in a temporary or given directory) and, in this process, a simulated
cluster (:func:`mfumon.exporter.demo.simcluster.default_cluster`: 15 nodes x 8 GPUs, H100, B200, A100 and MI300X,
six pools, one node read through a simulated current dcgm-exporter) whose nodes push samples through the real
exporter pipeline while its jobs post reports over HTTP, simulated serving engines (vLLM-, SGLang- and TGI-style
``/metrics`` on loopback ports) that the real inference collector reads and reports, and a simulated scheduler that
puts its queue as ``mfumon scheduler`` would. The aggregator bills with the demo's price list
(:mod:`mfumon.exporter.demo.prices`, unless ``MFUMON_PRICES_FILE`` is set). Runs until Ctrl-C or ``--duration``.
With ``--prometheus`` a Prometheus runs beside it (:mod:`mfumon.exporter.demo.prometheus`).

On an idle machine the demo prints nothing of its own after its banner: its clients resend a request that met a
kept-alive connection the server was closing (:mod:`mfumon.exporter.transport`), the server keeps idle connections
longer than the demo's interval, the simulated nodes push at staggered times within the interval, and the demo's
server lets ingest queue for ``DEMO_INGEST_QUEUE_SECONDS`` (a shared laptop is slower than a server) before it
answers 503.

Other code reuses the simulation against any aggregator with :func:`run_simulation`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from mfumon.cli import LISTENING_PREFIX
from mfumon.exporter.auth import read_token
from mfumon.exporter.cliopts import add_token_file_option
from mfumon.exporter.demo.history import seed_history
from mfumon.exporter.demo.prices import write_demo_prices
from mfumon.exporter.demo.prometheus import DemoPrometheus, PrometheusUnavailable, shortened_note, start_prometheus
from mfumon.exporter.demo.simcluster import ClusterSpec, SimJob, SimNode, default_cluster
from mfumon.exporter.demo.simdcgm import SimDcgmExporter, SimDcgmSource
from mfumon.exporter.demo.siminspector import SimInspector
from mfumon.exporter.demo.simprofile import PROFILED_JOBS, DemoProfiler
from mfumon.exporter.demo.simremediate import dry_run_remediator
from mfumon.exporter.demo.simserving import SimServingJob, SimulatedEngine
from mfumon.exporter.node.inference.collector import InferenceCollector
from mfumon.exporter.node.inference.endpoints import parse_endpoint
from mfumon.exporter.node.nccl_inspector.cycle import InspectingAgent
from mfumon.exporter.node.pipeline import Agent
from mfumon.exporter.node.push import RetryPolicy, Sender
from mfumon.exporter.node.sources import Source
from mfumon.exporter.node.sources.sim import SimIbPorts, SimPort, SimSource, SimWorkload
from mfumon.exporter.node.spool import MemorySpool
from mfumon.exporter.samples import JobShare
from mfumon.exporter.signals import stop_on_signals
from mfumon.exporter.transport import FreshConnectionRetry

__all__ = ["SimulationResult", "main", "run_simulation"]

logger = logging.getLogger(__name__)

SCHEDULER_INTERVAL_S = 5.0
#: how long the demo's server lets ingest wait in its queue before a 503 (MFUMON_MAX_INGEST_QUEUE_SECONDS; 0.05 s in
#: production): the demo shares a laptop's cores with everything else on it
DEMO_INGEST_QUEUE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """What a simulation run did."""

    cycles: int
    reports_posted: int
    report_failures: int
    batches_delivered: int


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _register_jobs(client: httpx.Client, cluster: ClusterSpec) -> None:
    """``PUT`` every job's metadata, the pending ones with ``gpus_requested`` and no GPUs."""
    bodies = [(job.job_id, job.metadata()) for job in cluster.jobs if job.reports]
    bodies += [(job.job_id, job.metadata()) for job in cluster.pending]
    # A serving job reports through the exporter, which knows no SLO: the ones with their own targets say so here.
    bodies += [
        (job.job_id, {"kind": "inference", "name": job.name, "team": job.team, "pool": job.pool, "slo": slo})
        for job in cluster.serving
        if (slo := job.slo_json()) is not None
    ]
    for job_id, body in bodies:
        try:
            client.put(f"/v1/jobs/{job_id}", json=body).raise_for_status()
        except httpx.HTTPError as exc:
            logger.warning("registering job %s failed: %s", job_id, exc)


def _ports(node: SimNode, started: float) -> SimIbPorts:
    """Two 400 Gb/s InfiniBand ports; the second one flaps when the node is set up to."""
    traffic = node.ib_traffic_bytes_per_second
    ports = [
        SimPort("mlx5_0", traffic_bytes_per_second=traffic),
        SimPort("mlx5_1", traffic_bytes_per_second=traffic, flap_every_seconds=node.flapping_link_every_seconds),
    ]
    return SimIbPorts(ports, started=started)


def _serving_workload(serving: SimServingJob, busy: bool = True) -> SimWorkload:
    """What a serving job's GPUs run: tensor activity following the MFU the engine's reports will show, ~1.2x of it
    as for an honest training job (the inference profile's own 1.6x, scaled by 0.75), so the cross-check agrees;
    none while the engine has no request (the GPUs stay the job's)."""
    return SimWorkload(
        profile="inference",
        target_mfu=serving.expected_mfu() if busy else 0.0,
        job_id=serving.job_id,
        step_seconds=0.05,
        tensor_scale=0.75,
    )


def _follow_idle_engines(engines: list[SimulatedEngine], sources: dict[str, SimSource], now: float) -> None:
    """The GPUs of a serving job with idle stretches go quiet while its engine has no request."""
    for engine in engines:
        if engine.job.idle_every_seconds > 0:
            workload = _serving_workload(engine.job, engine.busy(now))
            for node_name, index in engine.job.placement:
                if node_name in sources:
                    sources[node_name].assign(index, workload)


def _start_nodes(
    url: str, cluster: ClusterSpec, interval_seconds: float, seed: int, token: str | None
) -> tuple[list[Agent], dict[str, SimSource]]:
    agents, sources = [], {}
    started = time.time()
    spacing_seconds = interval_seconds / max(1, len(cluster.nodes))  # pushes spread over the interval, not a burst
    for number, node in enumerate(cluster.nodes):
        source = SimSource(node=node.name, model=node.gpu_model, count=node.gpu_count, seed=seed)
        if node.downtrained_gpu is not None:
            source.downtrain(*node.downtrained_gpu)
        if node.fault_gpu is not None:
            source.schedule_fault(node.fault_gpu, started + node.fault_after_seconds)
        for job in cluster.jobs:
            for node_name, index in job.placement:
                if node_name == node.name:
                    source.assign(index, job.workload_on(node_name, index))
        batch = cluster.scheduler.batch if cluster.scheduler is not None else ()
        for placement, workload in [(job.placement, job.workload()) for job in batch]:
            for node_name, index in placement:
                if node_name == node.name:
                    source.assign(index, workload)
        for serving in cluster.serving:
            for node_name, index in serving.placement:
                if node_name == node.name:
                    source.assign(index, _serving_workload(serving))
        for gpu in cluster.shared:
            if gpu.node == node.name:
                lead = gpu.shares[0][0]
                source.assign(gpu.index, SimWorkload(profile="training", target_mfu=gpu.target_mfu, job_id=lead))
                source.share(gpu.index, tuple(JobShare(job, share, "process_utilization") for job, share in gpu.shares))
        for node_name, index in cluster.unattributed:
            if node_name == node.name:  # a notebook's kernels: busy, no job id
                source.assign(index, SimWorkload(profile="inference", target_mfu=0.05))
        retry = RetryPolicy(initial_seconds=0.2, max_seconds=max(2.0, interval_seconds))
        sender = Sender(url, MemorySpool(16 * 1024**2), token=token, retry=retry)
        settings: dict[str, Any] = {
            "source": _reader(node, source),
            "sender": sender,
            "node": node.name,
            "pool": node.pool,
            "interval_seconds": interval_seconds,
            "ports": _ports(node, started),
        }
        inspector = _inspector(node, cluster, seed)
        # Each node of a job with collectives runs the real node agent's NCCL Inspector cycle over its simulated dumps.
        agent = Agent(**settings) if inspector is None else InspectingAgent(inspector=inspector, **settings)
        agent.start(delay_seconds=number * spacing_seconds)
        agents.append(agent)
        sources[node.name] = source
    return agents, sources


def _inspector(node: SimNode, cluster: ClusterSpec, seed: int) -> SimInspector | None:
    """The simulated NCCL Inspector dumps of the job with collectives that runs on ``node`` (None: none does)."""
    for job in cluster.jobs:
        if job.collectives is None or node.name not in {name for name, _ in job.placement}:
            continue
        per_node: dict[str, int] = {}
        for name, _ in job.placement:
            per_node[name] = per_node.get(name, 0) + 1
        if len(set(per_node.values())) != 1:  # global ranks are numbered node by node, as many on each
            raise ValueError(f"{job.job_id}: simulated NCCL ranks need as many GPUs on each node, not {per_node}")
        return SimInspector(
            job_id=job.job_id,
            node=node.name,
            nodes=per_node,
            ranks_per_node=per_node[node.name],
            step_seconds=job.step_seconds,
            spec=job.collectives,
            seed=seed,
        )
    return None


def _close_inspectors(agents: Sequence[Agent]) -> None:
    for agent in agents:
        if isinstance(agent, InspectingAgent) and isinstance(agent.inspector, SimInspector):
            agent.inspector.close()


def _reader(node: SimNode, source: SimSource) -> Source:
    """The node's GPUs as its agent reads them: directly, or through a simulated current dcgm-exporter."""
    if node.reader == "dcgm":
        return SimDcgmSource(SimDcgmExporter(source, hostname=node.name))
    return source


def _sync_scheduler(client: httpx.Client, cluster: ClusterSpec, started: float, now: float) -> None:
    """What ``mfumon scheduler`` would put for this cluster: running jobs, the queue, quotas."""
    assert cluster.scheduler is not None
    body = cluster.scheduler.snapshot(cluster, started, now)
    try:
        client.put(f"/v1/scheduler/{cluster.scheduler.source}", json=body).raise_for_status()
    except httpx.HTTPError as exc:
        logger.warning("scheduler sync failed: %s", exc)


def _post_event(client: httpx.Client, job: SimJob, body: dict[str, object]) -> None:
    try:
        client.post(f"/v1/jobs/{job.job_id}/events", json=body).raise_for_status()
    except httpx.HTTPError as exc:
        logger.warning("event %s for %s failed: %s", body.get("type"), job.job_id, exc)


@dataclass(slots=True)
class _Life:
    """Follows one job's :class:`Lifecycle`: posts the events of what happened since the last cycle (however few
    cycles a loaded machine ran), says whether the job steps now."""

    job: SimJob
    started: float
    attempt: int = 0
    failed: bool = False
    initialised: bool = False
    saves: int = 0  # checkpoints of this attempt already posted
    saved_step: int = 0  # the step of the last checkpoint: a restart resumes from it
    base_step: int = 0

    def step_now(self, client: httpx.Client, now: float) -> int | None:
        """The step to report now, or None while the job starts, saves or is down (it reports nothing then)."""
        life = self.job.lifecycle
        assert life is not None
        phase = life.phase(now - self.started)
        per_save = (life.checkpoint_every_seconds - life.checkpoint_seconds) / self.job.step_seconds
        if (phase.name == "down" or phase.attempt > self.attempt) and not self.failed:
            _post_event(client, self.job, {"type": "failure", "exit_code": 1})
            self.failed = True
        if phase.attempt > self.attempt:  # requeued: a new attempt that resumes from the last checkpoint
            _post_event(client, self.job, {"type": "restart"})
            self.attempt, self.initialised, self.saves, self.base_step = phase.attempt, False, 0, self.saved_step
        if phase.name in ("step", "checkpoint") and not self.initialised:
            _post_event(client, self.job, {"type": "init", "seconds": life.init_seconds})
            self.initialised = True
        while phase.name in ("step", "checkpoint") and self.saves < phase.saves:
            self.saves += 1
            self.saved_step = self.base_step + int(self.saves * per_save)
            body = {"type": "checkpoint_save", "seconds": life.checkpoint_seconds, "step": self.saved_step}
            _post_event(client, self.job, body)
        return self.base_step + int(phase.stepped_seconds / self.job.step_seconds) if phase.name == "step" else None


def _post_report(client: httpx.Client, job: SimJob, body: dict[str, object]) -> dict[str, Any] | None:
    """The aggregator's answer to the report, or None when it failed."""
    try:
        response = client.post(f"/v1/jobs/{job.job_id}/reports", json=body)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        logger.warning("report for %s failed: %s", job.job_id, exc)
        return None
    answer = response.json()
    return answer if isinstance(answer, dict) else {}


def run_simulation(
    url: str,
    duration_seconds: float | None = None,
    interval_seconds: float = 5.0,
    stop_event: threading.Event | None = None,
    *,
    token: str | None = None,
    seed: int = 0,
    cluster: ClusterSpec | None = None,
) -> SimulationResult:
    """Run the simulated cluster against the aggregator at ``url`` until ``duration_s`` passes or ``stop_event``.

    Registers the jobs (``PUT /v1/jobs/{id}``), starts one exporter pipeline per simulated node (sim source ->
    sender -> ``POST /v1/nodes/{node}/samples`` every ``interval_s``) and posts every running job's report each
    ``interval_s``, with throughput computed from the same MFU curve its GPUs show. Blocks; returns a summary.
    """
    cluster = cluster or default_cluster()
    stop = stop_event or threading.Event()
    deadline = None if duration_seconds is None else time.monotonic() + duration_seconds
    client = httpx.Client(base_url=url.rstrip("/"), headers=_auth(token), timeout=5.0, transport=FreshConnectionRetry())
    _register_jobs(client, cluster)
    seed_history(client)  # finished runs across an NCCL and a driver upgrade (issue 59)
    agents, sources = _start_nodes(url, cluster, interval_seconds, seed, token)
    engines = [SimulatedEngine(job, seed).start() for job in cluster.serving]
    collector = InferenceCollector(
        url=url,
        endpoints=[parse_endpoint(f"{engine.url},{engine.job.endpoint_options()}") for engine in engines],
        node="demo",
        token=token,
        interval_seconds=interval_seconds,
    )
    collector.start()
    remediator, remediation_client = dry_run_remediator(url, cluster, token)
    cycles = posted = failed = 0
    last = started = time.time() - interval_seconds
    lives = {job.job_id: _Life(job, started) for job in cluster.jobs if job.reports and job.lifecycle}
    synced = 0.0
    profiler = DemoProfiler({j.job_id: j.num_gpus for j in cluster.jobs if j.job_id in PROFILED_JOBS and j.reports})
    try:
        while True:
            now = time.time()
            _follow_idle_engines(engines, sources, now)
            if cluster.scheduler is not None and now - synced >= SCHEDULER_INTERVAL_S:
                _sync_scheduler(client, cluster, started, now)  # as often as a real adapter, not every cycle
                remediator.run_once()  # what mfumon remediate would do with the drain list (dry run)
                synced = now
            for job in (j for j in cluster.jobs if j.reports):
                mfu = job.mfu_over(seed, last, now)
                step = int(now / job.step_seconds)
                if job.job_id in lives:
                    lived = lives[job.job_id].step_now(client, now)
                    if lived is None:
                        continue
                    step = lived
                answer = _post_report(client, job, job.report(mfu, now - last, step))
                if answer is not None:
                    posted += 1
                    profiler.on_answer(client, job.job_id, answer)
                else:
                    failed += 1
            if cycles == 1:  # once the jobs run: a profile asked as `mfumon profile` would
                profiler.ask(client)
            last = now
            cycles += 1
            wait = interval_seconds if deadline is None else min(interval_seconds, deadline - time.monotonic())
            if wait <= 0 or stop.wait(wait):
                break
    finally:
        collector.stop(timeout_seconds=5.0)
        remediation_client.close()
        for engine in engines:
            engine.stop()
        for agent in agents:
            agent.stop(timeout_seconds=5.0)
        _close_inspectors(agents)
        client.close()
    delivered = sum(agent.sender.delivered for agent in agents)
    return SimulationResult(cycles=cycles, reports_posted=posted, report_failures=failed, batches_delivered=delivered)


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mfumon demo",
        description="Run the aggregator (mfumon serve) with a simulated cluster of 15 nodes x 8 GPUs and a scheduler.",
    )
    p.add_argument("--host", default="127.0.0.1", help="aggregator listen host [127.0.0.1]")
    p.add_argument("--port", type=int, default=8000, help="aggregator port; 0 picks a free one [8000]")
    p.add_argument("--data-dir", help="directory for the SQLite database and server log [a temporary one]")
    p.add_argument("--duration", type=float, help="stop after this many seconds [run until Ctrl-C]")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between samples and reports [5]")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation [0]")
    p.add_argument("--no-checkpoints", action="store_true", help="no periodic checkpoint dips in training jobs")
    p.add_argument("--log-level", default="WARNING", help="the demo's own log level: DEBUG, INFO, WARNING... [WARNING]")
    add_token_file_option(p, purpose="demo's ingest (its aggregator then requires it)")
    prometheus = p.add_argument_group("Prometheus beside the demo (docs: demo with Prometheus and Grafana)")
    prometheus.add_argument(
        "--prometheus",
        action="store_true",
        help="also start Prometheus on a free loopback port with the project's rules, scraping the demo",
    )
    prometheus.add_argument(
        "--prometheus-binary", default="prometheus", metavar="PATH", help="the Prometheus to run [prometheus]"
    )
    prometheus.add_argument(
        "--prometheus-rules",
        metavar="DIR",
        help="rule files to load [deploy/prometheus/rules of this checkout]",
    )
    return p


def _start_server(host: str, port: int, data_dir: Path, token: str | None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MFUMON_DATABASE_URL": f"sqlite:///{data_dir / 'mfumon.db'}"}
    if token:  # the demo's clients send it, and its aggregator requires it, as a secured install would
        env["MFUMON_INGEST_TOKENS"] = f"{token} name=demo"
    env.setdefault("MFUMON_MAX_INGEST_QUEUE_SECONDS", str(DEMO_INGEST_QUEUE_SECONDS))
    # The software comparison every 30 s, not every 5 minutes: the demo's history is posted after the server starts.
    env.setdefault("MFUMON_REGRESSIONS_INTERVAL_SECONDS", "30")
    # A price list, so that the cost and energy panels and the chargeback have numbers (one pool left unpriced).
    if not env.get("MFUMON_PRICES_FILE"):
        env["MFUMON_PRICES_FILE"] = str(write_demo_prices(data_dir))
    cmd = [sys.executable, "-m", "mfumon", "serve", "--host", host, "--port", str(port)]
    with open(data_dir / "serve.log", "wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir)


def _wait_listening(log_path: Path, proc: subprocess.Popen[bytes], timeout_seconds: float = 60.0) -> str | None:
    """The URL our own server bound (never whatever else answers on the port), or None if it exited first."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            if line.startswith(LISTENING_PREFIX):
                return line.removeprefix(LISTENING_PREFIX).strip()
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def _startup_error(log_path: Path) -> str:
    """The server's own reason for not starting, or the tail of its log."""
    text = log_path.read_text(errors="replace")
    reasons = [line for line in text.splitlines() if line.startswith("mfumon serve: ")]
    return reasons[-1].removeprefix("mfumon serve: ") if reasons else text[-2000:]


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    return False


def _print_banner(url: str, data_dir: Path, prometheus: DemoPrometheus | None) -> None:
    """The addresses, the pages first: what a person opens."""
    print(f"mfumon demo: open {url}/ui in a browser", flush=True)
    print(f"  aggregator at {url} (data in {data_dir})", flush=True)
    if prometheus is not None:
        print(f"  prometheus: {prometheus.url} (rules loaded; config {prometheus.config_path})", flush=True)
        print(f"  ({shortened_note()})", flush=True)
    print(f"  metrics:  {url}/metrics\n  API docs: {url}/docs\n  cluster:  {url}/v1/cluster", flush=True)
    print(f"  jobs:     {url}/v1/jobs\n  nodes:    {url}/v1/nodes", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the aggregator and the simulated cluster until Ctrl-C (or ``--duration``)."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        token = read_token(args.token_file)
    except OSError as exc:
        parser.error(f"cannot read the token file (--token-file or MFUMON_TOKEN_FILE): {exc}")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="mfumon-demo-") if temporary else args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = _start_server(args.host, args.port, data_dir, token)
    prometheus: DemoPrometheus | None = None
    with stop_on_signals() as stop:
        try:
            log_path = data_dir / "serve.log"
            url = _wait_listening(log_path, proc)
            if url is None or not _wait_healthy(url, proc):
                reason = _startup_error(log_path)
                if "in use" in reason:  # serve's own advice names its settings; the demo's port is --port
                    reason = reason.partition(": stop what listens")[0]
                    reason += ": is another mfumon running there? Pick a free port with --port"
                print(
                    f"mfumon demo: the aggregator could not start on {args.host}:{args.port}: {reason}", file=sys.stderr
                )
                return 1
            if args.prometheus:
                try:
                    prometheus = start_prometheus(
                        url, data_dir, binary=args.prometheus_binary, rules_dir=args.prometheus_rules
                    )
                except PrometheusUnavailable as exc:
                    print(f"mfumon demo: {exc}", file=sys.stderr)
                    return 1
            _print_banner(url, data_dir, prometheus)
            print(
                "Simulating 15 nodes x 8 GPUs (H100, B200, A100, MI300X) in 6 pools: 10 reporting jobs (one "
                "over-claims, one checkpoints, fails once and restarts, one waits on its data, one has a straggler "
                "GPU, one on AMD, one on B200, one over 3 nodes with a slow node in its NCCL Inspector figures), a "
                "node read through dcgm-exporter 4.10 names, a GPU two jobs share, 6 "
                "serving jobs behind simulated vLLM/SGLang/TGI endpoints (one misses its TPOT under long prompts, "
                "one preempts for KV cache, one idles at times), an unwrapped "
                "job, 2 unreported sweeps, a GPU busy with no job id, a scheduler queue (a long wait, a "
                "fragmented pool) and 12 finished runs across an NCCL upgrade that cost 6 % and a driver upgrade "
                "that cost nothing (/ui/regressions); a price list, MI300X left unpriced (/ui/chargeback). "
                "Ctrl-C stops.",
                flush=True,
            )
            cluster = default_cluster(checkpoints=not args.no_checkpoints)
            result = run_simulation(
                url, args.duration, args.interval, stop, token=token, seed=args.seed, cluster=cluster
            )
            print(
                f"mfumon demo: stopped after {result.cycles} cycles, {result.reports_posted} job reports and "
                f"{result.batches_delivered} node batches delivered",
                flush=True,
            )
            return 0
        finally:
            if prometheus is not None:
                prometheus.stop()
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if temporary:
                shutil.rmtree(data_dir, ignore_errors=True)
