"""``mfumon exporter``: the node agent.

Reads GPU counters every ``--interval`` seconds from NVML (default when it loads), a local dcgm-exporter, or a
simulation; attributes GPUs to jobs; pushes one batch per cycle to ``POST /v1/nodes/{node}/samples``, spooling what
the aggregator cannot take; serves its own ``/metrics`` and ``/healthz`` on ``--web.listen-address``. In a thread of
its own it reads the serving engines on the node (``--inference.url``, local discovery) and posts inference reports.
Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 when no counter source can be opened, 2 for invalid settings.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mfumon.exporter.errors import ConfigError, ExporterError, SourceUnavailable
from mfumon.exporter.node.attribution import DeviceOwners, JobResolver
from mfumon.exporter.node.inference.collector import InferenceCollector
from mfumon.exporter.node.inference.discovery import discover_endpoints
from mfumon.exporter.node.inference.endpoints import InferenceEndpoint, parse_endpoint, split_endpoint_list
from mfumon.exporter.node.nccl_inspector.cycle import GpuJobs, InspectingAgent
from mfumon.exporter.node.nccl_inspector.source import InspectorSource
from mfumon.exporter.node.pipeline import Agent, PortReader, node_software
from mfumon.exporter.node.push import RetryPolicy, Sender
from mfumon.exporter.node.selfmetrics import ExporterMetrics, MetricsServer
from mfumon.exporter.node.settings import Settings, build_parser, load_settings
from mfumon.exporter.node.sources import Source, open_source
from mfumon.exporter.node.sources.infiniband import InfinibandReader
from mfumon.exporter.node.sources.sim import SimIbPorts, SimPort, SimSource
from mfumon.exporter.node.spool import DiskSpool, MemorySpool, Spool
from mfumon.exporter.samples import NodeBatch
from mfumon.exporter.signals import stop_on_signals
from mfumon.startup import aggregator_url_problem, fail

__all__ = [
    "build_agent",
    "build_inference_collector",
    "main",
    "open_configured_source",
    "open_inspector",
    "open_port_reader",
]

logger = logging.getLogger("mfumon.exporter.node.agent")


def _pod_devices(socket_path: str) -> DeviceOwners | None:
    """GPU -> pod -> job from the kubelet, when its pod-resources socket is there (Kubernetes nodes)."""
    if not socket_path or not Path(socket_path).is_socket():
        return None
    try:
        from mfumon.exporter.node.podresources import DeviceJobs, PodOwners, PodResourcesClient
    except ImportError as exc:  # grpcio/protobuf not installed: pip install 'mfu-monitor[kubernetes]'
        logger.warning("pod-resources socket %s found but grpcio is missing (%s): not used", socket_path, exc)
        return None
    client = PodResourcesClient(socket_path)
    logger.info("GPU -> pod attribution from the kubelet's pod-resources API at %s", socket_path)
    return DeviceJobs(client.list, PodOwners.in_cluster())


def open_configured_source(settings: Settings) -> Source:
    """The counter source the settings ask for, with job attribution wired in."""
    resolver = JobResolver(
        settings.PROC_ROOT,
        str(settings.JOB_MAPPING_DIR) if settings.JOB_MAPPING_DIR else None,
        devices=_pod_devices(settings.POD_RESOURCES_SOCKET),
    )
    return open_source(
        settings.SOURCE,
        node=settings.NODE,
        resolver=resolver,
        dcgm_url=settings.DCGM_URL,
        sim_model=settings.SIM_MODEL,
        sim_gpus=settings.SIM_GPUS,
        sim_profile=settings.SIM_PROFILE,
        sim_mfu=settings.SIM_MFU,
        sim_seed=settings.SIM_SEED,
    )


def open_port_reader(settings: Settings, source: Source) -> PortReader | None:
    """The node's InfiniBand/RoCE ports: simulated with a simulated source, else sysfs when the host has any."""
    if not settings.ib_patterns():
        return None
    if isinstance(source, SimSource):
        return SimIbPorts([SimPort("mlx5_0"), SimPort("mlx5_1")])
    reader = InfinibandReader(settings.IB_ROOT, settings.ib_patterns())
    return reader if reader.available() else None


def open_inspector(settings: Settings, gpu_jobs: GpuJobs | None = None) -> InspectorSource | None:
    """The NCCL Inspector reader when ``--nccl-inspector.dir`` is set: pids joined to jobs by their environment
    (the attribution's :meth:`JobResolver.process_job`), textfiles through the job on their GPU."""
    if settings.NCCL_INSPECTOR_DIR is None:
        return None
    resolver = JobResolver(settings.PROC_ROOT)
    return InspectorSource(
        settings.NCCL_INSPECTOR_DIR,
        job_of_pid=resolver.process_job,
        job_of_gpu=gpu_jobs,
        local_host=socket.gethostname(),  # what NCCL names its files by, whatever --node says
    )


def build_agent(settings: Settings, source: Source, metrics: ExporterMetrics | None = None) -> Agent:
    """Spool, sender and collector for ``source``, configured from ``settings`` (not started); with
    ``--nccl-inspector.dir``, an agent that also reads the Inspector each cycle and keeps the batch (not pushed)."""
    metrics = metrics or ExporterMetrics()
    spool: Spool
    if settings.SPOOL_DIR is not None:
        spool = DiskSpool(settings.SPOOL_DIR, settings.SPOOL_MAX_BYTES)
    else:
        spool = MemorySpool(settings.SPOOL_MAX_BYTES)
    sender = Sender(
        settings.URL,
        spool,
        token=settings.token(),
        metrics=metrics,
        timeout_seconds=settings.PUSH_TIMEOUT,
        retry=RetryPolicy(max_seconds=settings.BACKOFF_MAX),
    )
    parts: dict[str, Any] = {
        "source": source,
        "sender": sender,
        "node": settings.NODE,
        "pool": settings.POOL,
        "interval_seconds": settings.INTERVAL,
        "metrics": metrics,
        "ports": open_port_reader(settings, source),
    }
    if settings.NCCL_INSPECTOR_DIR is None:
        return Agent(**parts)
    gpu_jobs = GpuJobs()
    return InspectingAgent(inspector=open_inspector(settings, gpu_jobs), gpu_jobs=gpu_jobs, **parts)


def build_inference_collector(
    settings: Settings, metrics: ExporterMetrics, node_gpu_model: Callable[[], str | None] | None = None
) -> InferenceCollector | None:
    """The serving-engine reader the settings ask for, or None (no endpoints configured and discovery off)."""
    endpoints = [parse_endpoint(spec) for spec in split_endpoint_list(settings.INFERENCE_URLS)]
    discover = None
    if settings.INFERENCE_DISCOVERY == "local":
        proc_root, node = settings.PROC_ROOT, settings.NODE

        def discover() -> list[InferenceEndpoint]:
            return discover_endpoints(proc_root, node)

    if not endpoints and discover is None:
        return None
    return InferenceCollector(
        url=settings.URL,
        endpoints=endpoints,
        discover=discover,
        node=settings.NODE,
        token=settings.inference_token(),
        interval_seconds=settings.INFERENCE_INTERVAL or settings.INTERVAL,
        metrics=metrics,
        node_gpu_model=node_gpu_model,
    )


def _list_inference(settings: Settings) -> int:
    collector = build_inference_collector(settings, ExporterMetrics())
    listed = []
    for endpoint in collector.endpoints() if collector else []:
        reading = collector.read(endpoint) if collector else None
        listed.append(
            {
                "url": endpoint.url,
                "origin": endpoint.origin,
                "job_id": endpoint.job_id,
                **endpoint.report_metadata(),
                "reading": None if reading is None else {**vars(reading), "counters": dict(reading.counters)},
            }
        )
    if collector is not None:
        collector.stop()
    print(json.dumps(listed, indent=2, default=_wire_form))
    return 0


def _wire_form(value: Any) -> Any:
    """A reading's records as JSON: histograms in their report form, mappings as objects."""
    return value.as_json() if hasattr(value, "as_json") else dict(value)


#: ``--once`` reads twice this far apart: GPM activity and throughput rates exist only over an interval.
ONCE_WINDOW_S = 1.0


def _print_once(settings: Settings, source: Source) -> int:
    import time

    ports = open_port_reader(settings, source)
    source.collect()  # opens the interval; a single read would leave tensor/SM activity and rates out
    time.sleep(ONCE_WINDOW_S)
    batch = NodeBatch(
        node=settings.NODE,
        timestamp=time.time(),
        gpus=tuple(source.collect()),
        pool=settings.POOL,
        ib_ports=None if ports is None else tuple(ports.collect()),
        software=node_software(source),
    )
    printed = {"node": batch.node, **batch.body()}
    gpu_jobs = GpuJobs()
    inspector = open_inspector(settings, gpu_jobs)
    if inspector is not None:  # not part of the push body (yet): printed beside it
        gpu_jobs.update(batch.gpus)
        printed["nccl_inspector"] = inspector.collect(batch.timestamp).to_json()
    print(json.dumps(printed, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the exporter until SIGTERM or SIGINT."""
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args)
        settings.token()  # fail early on an unreadable token file
        settings.inference_token()
        for spec in split_endpoint_list(settings.INFERENCE_URLS):
            parse_endpoint(spec)
    except ConfigError as exc:
        print(f"mfumon exporter: {exc}", file=sys.stderr)
        return 2
    url_problem = aggregator_url_problem(settings.URL)
    if url_problem is not None:
        return fail("mfumon exporter", url_problem, code=2)
    logging.basicConfig(level=settings.LOG_LEVEL, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if getattr(args, "inference.list", False):
        return _list_inference(settings)
    try:
        source = open_configured_source(settings)
    except SourceUnavailable as exc:
        print(f"mfumon exporter: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:
        print(f"mfumon exporter: {exc}", file=sys.stderr)
        return 2
    try:
        if args.once:
            return _print_once(settings, source)
        return _serve(settings, source)
    except ExporterError as exc:
        print(f"mfumon exporter: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        source.close()


def _serve(settings: Settings, source: Source) -> int:
    agent = build_agent(settings, source)
    server: MetricsServer | None = None
    if settings.LISTEN_ADDRESS.strip():
        try:
            server = MetricsServer(settings.LISTEN_ADDRESS, agent.metrics, agent.health)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot listen on {settings.LISTEN_ADDRESS!r}: {exc}") from exc
        server.start()
    with stop_on_signals() as stop:
        agent.start()
        inference = build_inference_collector(settings, agent.metrics, lambda: agent.gpu_model)
        if inference is not None:
            inference.start()
        # The bound port, not the configured one: ":0" asks the kernel for a free port and this line says which.
        host = settings.LISTEN_ADDRESS.rpartition(":")[0]
        where = f", self-metrics on http://{host}:{server.port}/metrics" if server else ""
        print(
            f"mfumon exporter: node {settings.NODE}, source {source.name}, pushing to {settings.URL} "
            f"every {settings.INTERVAL:g}s{where}",
            flush=True,
        )
        try:
            while not stop.wait(1.0):
                pass
        finally:
            if inference is not None:
                inference.stop()
            agent.stop()
            if server is not None:
                server.stop()
    return 0
