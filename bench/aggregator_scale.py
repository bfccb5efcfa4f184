"""Aggregator scale benchmark: one command, one run, every figure as a ratio against a baseline measured beside it.

    .venv/bin/python bench/aggregator_scale.py            # everything, SQLite and PostgreSQL (about 30 min)
    .venv/bin/python bench/aggregator_scale.py --quick    # 1,000 and 10,000 GPUs, SQLite, shorter windows

What it measures, with real processes on loopback (the load generator runs in separate processes, keep-alive
connections, pre-encoded node pushes of 8 GPUs whose timestamp changes on every request, see ``bench/loadgen.py``):

- **ingest**: GPU-samples/s that one ``mfumon serve`` sustains against a *bare* app (``bench/bare_app.py``: the same
  route on the same FastAPI and ASGI server, doing nothing but parse the body), at 1,000, 10,000 and 100,000
  simulated GPUs, on SQLite and PostgreSQL. Bare and real runs alternate and repeat; medians, with min-max. Beside
  them the ASGI server alone (``bare_app.py --floor``, no app): each app's CPU per push above it is its own. Also
  per CPU-second of the server, counting the work it deferred under saturation and did after the load stopped
  (renders that fell behind), which the closed-loop rate alone leaves out. Saturated, the server also *sheds*
  renders (a node pushed several times before its turn is rendered once; a scrape renders what is left), which
  neither figure counts; so also, open loop below saturation, its CPU per push against the bare app's at the same
  rate, with its renders per push (``mfumon_metrics_renders_total``). Since issue 33 a node is rendered per
  scrape, not per push (``mfumon.api.metrics.store``): windows with no scrape render each node at most once.
- **latency**: open loop (latency counts from when a push was due, so a server that falls behind pays for its
  queue). At 80% of the closed-loop rate, mfumon's (the lower of its two figures) and the bare app's own, with how
  busy each is: the closed-loop rate gains from uvicorn batching requests that arrive together, so 80% of it keeps
  even the bare app saturated. Then the **capacity** (rate / busy share below saturation), and p50/p99 at 80% of
  that capacity, the rate a cluster sized by it runs at; that rate held for
  ``--held-seconds`` (30), past the 10 s durability bound, where a sample writer that cannot keep up would show
  as pushes refused 'unavailable', and scraped meanwhile every ``--scrape-every`` (10) seconds, as Prometheus
  would (the other windows run with no scrape).
- **overload**: 2x that capacity: how many pushes are refused (503/429 + Retry-After), how fast, and the p99 of
  the accepted ones; and the bare app offered that same rate, for the latency this machine and the load
  generator's 1,024 connections give any server there.
- **scrape**: ``/metrics`` warm (nothing changed, each scrape past the 1 s cache so it renders) and right after every
  node pushed, and the size.
- **replicas** (PostgreSQL): the ingest rate of 1, 2 and 4 ``mfumon serve`` processes on one database.
- **memory**: RSS of one aggregator holding 100,000 GPUs and 10,000 jobs, and after those jobs end.
- **pushgateway**: the Prometheus Pushgateway (Debian ``prometheus-pushgateway``) fed the same GPUs as text, the
  peer users would otherwise reach for.

PostgreSQL comes from ``--postgres-url`` or ``MFUMON_TEST_PG_ADMIN_URL`` (a fresh database is created per server
and dropped after). Absolute figures depend on the machine and what else runs on it; the ratios are the result.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import io
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from loadgen import TS, LoadResult, Target, run_load  # noqa: E402

from mfumon.api.main import TRIM_EVERY_S  # noqa: E402
from tests.conftest import stop_process, wait_for_listening  # noqa: E402

GPUS_PER_NODE = 8
GPUS_PER_JOB = 32
_LISTENING = re.compile(r"mfumon serve: listening on (http://\S+:\d+)")
_PUSHGATEWAY_LISTENING = re.compile(r'msg="Listening on"[^\n]*? address=(127\.0\.0\.1:\d+)')


# --- what the simulated cluster sends ---------------------------------------------------------------------------


def node_name(n: int) -> str:
    return f"node-{n:06d}"


def node_sample(n: int, ts: float, variant: int = 0) -> dict[str, object]:
    """One push of node ``n``: counters with the precision NVML gives (integer percent, milliwatts, whole degrees
    and bytes; GPM activity as a computed ratio), different in each ``variant`` as they are from push to push."""
    rng = random.Random(n * 1000 + variant)
    gpus = [
        {
            "uuid": f"GPU-{n:06d}-{i}",
            "index": i,
            "name": "NVIDIA H100 80GB HBM3",
            "job_id": f"job-{n * GPUS_PER_NODE // GPUS_PER_JOB}",
            "utilization": rng.randint(80, 100) / 100,
            "sm_active": rng.uniform(0.6, 0.9),
            "tensor_active": rng.uniform(0.3, 0.5),
            "memory_used_bytes": float(rng.randint(60_000_000_000, 80_000_000_000)),
            "memory_total_bytes": 85_520_809_984.0,
            "power_watts": rng.randint(400_000, 700_000) / 1000,
            "temperature_celsius": float(rng.randint(50, 80)),
            "sm_clock_hz": rng.choice([1.755e9, 1.98e9]),
            "max_sm_clock_hz": 1.98e9,
            "xid_errors_total": 0,
            "compute_processes": 1,
        }
        for i in range(GPUS_PER_NODE)
    ]
    return {"timestamp": ts, "pool": f"pool-{n % 4}", "gpus": gpus}


def push_targets(nodes: int, variants: int = 4) -> list[Target]:
    """Every node once per pass, with other counter values on each pass (timestamps always new)."""
    out = []
    for variant in range(variants):
        for n in range(nodes):
            body = json.dumps(node_sample(n, 0.0, variant)).replace('"timestamp": 0.0', f'"timestamp": {TS}')
            out.append(Target("POST", f"/v1/nodes/{node_name(n)}/samples", body, GPUS_PER_NODE))
    return out


def job_report(job: int) -> dict[str, object]:
    return {
        "tokens_per_second": 4e5 + job,
        "num_gpus": GPUS_PER_JOB,
        "gpu_model": "h100-sxm",
        "model": {"params": 7e9, "layers": 32, "heads": 32, "head_dim": 128, "seq_len": 4096},
        "team": f"team-{job % 8}",
    }


def pushgateway_targets(nodes: int) -> list[Target]:
    """The same GPUs as Prometheus text, one group per node, as a user would push them to a Pushgateway."""
    out = []
    for n in range(nodes):
        sample = node_sample(n, 0.0)
        families: dict[str, list[str]] = {}  # the text format wants each family's lines together
        for gpu in sample["gpus"]:  # type: ignore[attr-defined]
            labels = f'node="{node_name(n)}",gpu="{gpu["index"]}",uuid="{gpu["uuid"]}"'
            info = f'mfumon_gpu_info{{{labels},model="{gpu["name"]}",job_id="{gpu["job_id"]}"}} 1'
            families.setdefault("info", []).append(info)
            for key, value in gpu.items():
                if isinstance(value, float | int) and key != "index":
                    families.setdefault(key, []).append(f"mfumon_gpu_{key}{{{labels}}} {value}")
            families.setdefault("ts", []).append(f"mfumon_gpu_sample_timestamp_seconds{{{labels}}} {TS}")
        lines = [line for group in families.values() for line in group]
        body = "\n".join(lines) + "\n"
        path = f"/metrics/job/mfumon/instance/{node_name(n)}"
        out.append(Target("PUT", path, body, GPUS_PER_NODE, content_type="text/plain; version=0.0.4"))
    return out


# --- servers ---------------------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


def _wait_ready(url: str, path: str, proc: subprocess.Popen[bytes], log: Path, timeout_seconds: float = 600) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + path, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server at {url} not ready:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def spawn(name: str, cmd: list[str], env: dict[str, str], ready_path: str, workdir: Path) -> Iterator[Server]:
    """Start a server on port 0 and read the port it got from its log (no free-port guessing, no races)."""
    log = workdir / f"{name}-{uuid.uuid4().hex[:8]}.log"
    pushgateway = "pushgateway" in cmd[0]
    full = [*cmd, "--web.listen-address=127.0.0.1:0"] if pushgateway else [*cmd, "--port=0"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(full, env=env, cwd=workdir, stdout=out, stderr=subprocess.STDOUT)
    try:
        match = wait_for_listening(proc, log, _PUSHGATEWAY_LISTENING if pushgateway else _LISTENING)
        url = match.group(1) if match.group(1).startswith("http") else f"http://{match.group(1)}"
        _wait_ready(url, ready_path, proc, log)
        yield Server(name, url, proc, log)
    finally:
        stop_process(proc)


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MFUMON_")}
    env.update(MFUMON_LOG_LEVEL="WARNING", **extra)
    return env


def bare(workdir: Path) -> contextlib.AbstractContextManager[Server]:
    return spawn("bare", [sys.executable, str(ROOT / "bench" / "bare_app.py")], _env({}), "/healthz", workdir)


def floor(workdir: Path) -> contextlib.AbstractContextManager[Server]:
    """The ASGI server alone (``bare_app.py --floor``): what a request costs before any app work."""
    cmd = [sys.executable, str(ROOT / "bench" / "bare_app.py"), "--floor"]
    return spawn("floor", cmd, _env({}), "/healthz", workdir)


def mfumon(
    database_url: str, workdir: Path, extra: dict[str, str] | None = None
) -> contextlib.AbstractContextManager[Server]:
    cmd = [sys.executable, "-m", "mfumon", "serve"]
    env = _env({"MFUMON_DATABASE_URL": database_url, **(extra or {})})
    return spawn("mfumon", cmd, env, "/readyz", workdir)


class Databases:
    """Fresh databases: a SQLite file, or a new PostgreSQL database dropped when the bench ends."""

    def __init__(self, workdir: Path, postgres_admin_url: str | None) -> None:
        self.workdir = workdir
        self.admin = postgres_admin_url
        self.created: list[str] = []

    def new(self, kind: str) -> str:
        if kind == "sqlite":
            return f"sqlite:///{self.workdir / f'bench-{uuid.uuid4().hex[:6]}.db'}"
        from sqlalchemy import create_engine, text

        assert self.admin is not None
        name = f"mfumon_bench_{uuid.uuid4().hex[:8]}"
        engine = create_engine(self.admin, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        self.created.append(name)
        return self.admin.rsplit("/", 1)[0] + "/" + name

    def drop_all(self) -> None:
        if not self.created or self.admin is None:
            return
        from sqlalchemy import create_engine, text

        engine = create_engine(self.admin, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            for name in self.created:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


# --- measurements ----------------------------------------------------------------------------------------------


def fill(url: str, nodes: int, jobs: int, job_prefix: str = "job") -> None:
    """Every node pushes once and every job reports once, over a few connections at once."""
    targets = push_targets(nodes, variants=1)
    result = run_load_once(url, targets)
    assert result.ok == nodes, f"fill: {result.ok} of {nodes} pushes accepted ({dict(result.statuses)})"
    reports = [
        Target("POST", f"/v1/jobs/{job_prefix}-{job}/reports", json.dumps(job_report(job))) for job in range(jobs)
    ]
    result = run_load_once(url, reports)
    assert result.ok == jobs, f"fill: {result.ok} of {jobs} reports accepted ({dict(result.statuses)})"


def run_load_once(url: str, targets: Sequence[Target], connections: int = 4) -> LoadResult:
    """Send each target exactly once, over ``connections`` threads, retrying refusals."""
    result = LoadResult(seconds=0)

    def send(part: Sequence[Target]) -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            for t in part:
                for _ in range(100):
                    body = t.body.replace(TS, f"{time.time():.6f}")
                    r = client.request(t.method, t.path, content=body, headers={"content-type": t.content_type})
                    if r.status_code not in (429, 503):
                        break
                    time.sleep(0.05)
                result.statuses[r.status_code] += 1  # Counter updates hold the GIL: safe across these threads

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(send, [targets[k::connections] for k in range(connections)]))
    return result


def scrape_once(url: str, encoding: str = "identity", query: str = "") -> tuple[float, int]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    started = time.perf_counter()
    conn.request("GET", "/metrics" + query, headers={"Accept-Encoding": encoding})
    response = conn.getresponse()
    size = len(response.read())
    elapsed = time.perf_counter() - started
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"scrape answered {response.status}")
    return elapsed, size


@contextlib.contextmanager
def scraping(url: str, every_seconds: float) -> Iterator[list[float]]:
    """Scrape ``/metrics`` (gzip) every ``every_s`` seconds from a thread while the block runs; yields the
    durations, filled as they come."""
    durations: list[float] = []
    stop = threading.Event()

    def scrape_on() -> None:
        while not stop.wait(every_seconds):
            durations.append(scrape_once(url, encoding="gzip")[0])

    thread = threading.Thread(target=scrape_on, daemon=True)
    thread.start()
    try:
        yield durations
    finally:
        stop.set()
        thread.join()


def self_samples(url: str, *families: str) -> list[Sample]:
    """The samples of the server's own ``families``, from a scrape of one shard in 1,024 (the self series and few
    nodes: the exposition is 138 MB at 100,000 GPUs, and the scrape itself renders next to nothing); only their
    lines, HELP and TYPE included, go to the parser."""
    text = httpx.get(f"{url}/metrics", params={"shard": 0, "shards": 1024}, timeout=60).text
    text = "".join(line + "\n" for line in text.splitlines() if any(name in line for name in families))
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def ingest_outcomes(url: str) -> dict[str, float]:
    """The server's count of node pushes by outcome (``mfumon_ingest_requests_total``)."""
    return {
        sample.labels["outcome"]: sample.value
        for sample in self_samples(url, "mfumon_ingest_requests")
        if sample.name == "mfumon_ingest_requests_total" and sample.labels.get("endpoint") == "node_samples"
    }


def render_counts(url: str) -> tuple[float, float]:
    """(node renders, node pushes accepted) so far."""
    renders = pushes = 0.0
    for sample in self_samples(url, "mfumon_metrics_renders", "mfumon_ingest_requests"):
        if sample.name == "mfumon_metrics_renders_total" and sample.labels.get("kind") == "node":
            renders = sample.value
        elif sample.name == "mfumon_ingest_requests_total" and sample.labels == {
            "endpoint": "node_samples",
            "outcome": "accepted",
        }:
            pushes = sample.value
    return renders, pushes


def renders_per_push(before: tuple[float, float], after: tuple[float, float]) -> float:
    return (after[0] - before[0]) / max(1.0, after[1] - before[1])


def scrape_median(url: str, repeats: int, encoding: str = "identity", query: str = "") -> tuple[float, int]:
    runs = [scrape_once(url, encoding, query) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), runs[-1][1]


def scrape_rendered(url: str, repeats: int) -> float:
    """Median of scrapes spaced past ``MFUMON_METRICS_MAX_AGE_SECONDS`` (default 1 s), so each one renders: a warm
    scrape, not a cached body."""
    runs = []
    for _ in range(repeats):
        time.sleep(1.2)
        runs.append(scrape_once(url)[0])
    return statistics.median(runs)


@dataclass
class Series:
    values: list[float] = field(default_factory=list)

    def add(self, v: float) -> None:
        self.values.append(v)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def spread(self, scale: float = 1.0, fmt: str = "{:,.0f}") -> str:
        if not self.values:
            return "-"
        lo, hi = min(self.values) * scale, max(self.values) * scale
        return f"{fmt.format(self.median * scale)} [{fmt.format(lo)}-{fmt.format(hi)}]"


@dataclass
class SizeResult:
    db: str
    gpus: int
    bare: Series = field(default_factory=Series)
    real: Series = field(default_factory=Series)
    ratios: Series = field(default_factory=Series)
    # GPU-samples per CPU-second of the server, counting the work a burst defers until it has settled (renders)
    bare_per_cpu: Series = field(default_factory=Series)
    real_per_cpu: Series = field(default_factory=Series)
    floor_per_cpu: Series = field(default_factory=Series)  # the ASGI server alone (bare_app.py --floor)
    # PostgreSQL's own CPU (us) per push in the same windows: on this machine, beside mfumon and the load generator
    postgres_us: Series = field(default_factory=Series)
    cpu_ratios: Series = field(default_factory=Series)
    p99_at_80: Series = field(default_factory=Series)
    p50_at_80: Series = field(default_factory=Series)
    bare_p99_at_80: Series = field(default_factory=Series)  # the bare app at the same rate: this machine's floor
    at_80_rate: float = 0.0  # pushes/s: 80% of the sustained closed-loop rate
    busy_at_80: Series = field(default_factory=Series)  # server CPU-seconds per second of the 80% window
    rendered_at_80: Series = field(default_factory=Series)  # node renders per push accepted (1: none shed)
    # Open loop below saturation, at 80% of the capacity the 80% windows' busy share gives (see measure_size)
    open_rate: float = 0.0  # pushes/s
    open_steps: int = 0  # first windows found near or past capacity and run again at a lower rate
    busy_at_open: Series = field(default_factory=Series)
    bare_busy_at_open: Series = field(default_factory=Series)
    rendered_at_open: Series = field(default_factory=Series)
    cpu_ratio_at_open: Series = field(default_factory=Series)  # bare CPU per push / mfumon CPU per push
    p99_at_open: Series = field(default_factory=Series)
    p50_at_open: Series = field(default_factory=Series)
    bare_p99_at_open: Series = field(default_factory=Series)
    # The bare app open loop at 80% of its own closed-loop rate: whether any server here holds such a rate
    bare_own_80_rate: float = 0.0  # pushes/s
    bare_busy_at_own_80: Series = field(default_factory=Series)
    bare_p99_at_own_80: Series = field(default_factory=Series)
    # mfumon open loop at 80% of its capacity with every push rendered (the open windows' rate / busy)
    capacity: float = 0.0  # pushes/s
    busy_at_cap_80: Series = field(default_factory=Series)
    rendered_at_cap_80: Series = field(default_factory=Series)
    p50_at_cap_80: Series = field(default_factory=Series)
    p99_at_cap_80: Series = field(default_factory=Series)
    held: dict[str, float] = field(default_factory=dict)  # 80% held past the durability bound (see measure_size)
    overload: list[dict[str, float]] = field(default_factory=list)
    scrape_warm: Series = field(default_factory=Series)
    scrape_changed: Series = field(default_factory=Series)  # every node pushed, paced, just before
    scrape_burst: Series = field(default_factory=Series)  # every node pushed at full speed just before
    scrape_bytes: int = 0
    rss: int = 0


def log(msg: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def measure_size(
    args: argparse.Namespace,
    dbs: Databases,
    db: str,
    gpus: int,
    bare_server: Server,
    floor_server: Server,
    workdir: Path,
) -> SizeResult:
    nodes = gpus // GPUS_PER_NODE
    jobs = gpus // GPUS_PER_JOB
    result = SizeResult(db, gpus)
    targets = push_targets(nodes)

    def load(url: str, targets: list[Target], **kw: float) -> LoadResult:
        kw = {"seconds": args.seconds, "processes": args.processes, "connections": args.connections, **kw}
        return run_load(url, targets, **kw)  # type: ignore[arg-type]

    bare_url = bare_server.url
    with mfumon(dbs.new(db), workdir) as server:

        def rendered_window(rate: float) -> tuple[LoadResult, float, float]:
            """mfumon open loop at ``rate``: the result, the server's CPU seconds (its work after the window
            included) and node renders per push accepted (counted once it is idle, so renders shed count, deferred
            ones do not)."""
            counted = render_counts(server.url)
            r, r_cpu = with_cpu(server, lambda: load(server.url, targets, connections=32, rate=rate))
            return r, r_cpu, renders_per_push(counted, render_counts(server.url))

        log(f"{db} {gpus:,} GPUs: filling {nodes:,} nodes and {jobs:,} jobs")
        fill(server.url, nodes, jobs)
        scrape_once(server.url)
        for repeat in range(args.repeats):  # ingest, bare and real alternating
            f, f_cpu = with_cpu(floor_server, lambda: load(floor_server.url, targets))
            result.floor_per_cpu.add(f.units_ok / f_cpu)
            pair = paired_window(bare_server, server, lambda url: load(url, targets), postgres=db == "postgres")
            b, r = pair.bare, pair.real
            if db == "postgres":
                result.postgres_us.add(pair.postgres_us)
            result.bare.add(b.units_per_second)
            result.real.add(r.units_per_second)
            result.ratios.add(pair.ratio)
            b_per_cpu, r_per_cpu = pair.bare_per_cpu, pair.real_per_cpu
            result.bare_per_cpu.add(b_per_cpu)
            result.real_per_cpu.add(r_per_cpu)
            result.cpu_ratios.add(pair.cpu_ratio)
            log(
                f"repeat {repeat + 1}: bare {b.units_per_second:,.0f}, mfumon {r.units_per_second:,.0f} GPU-samples/s "
                f"(ratio {r.units_per_second / b.units_per_second:.2f}; mfumon non-2xx {r.sent - r.ok}); "
                f"per CPU-second with deferred work: bare {b_per_cpu:,.0f}, mfumon {r_per_cpu:,.0f} "
                f"(ratio {r_per_cpu / b_per_cpu:.2f})"
            )
        # What it sustains with every push's work done, deferred renders included; the renders it shed under this
        # closed loop (coalesced: a node pushed again before its turn is rendered once) are not, see the 80% windows.
        sustained = min(result.real.median, result.real_per_cpu.median) / GPUS_PER_NODE  # pushes/s
        once = push_targets(nodes, variants=1)
        # Past 10,000 GPUs one paced pass takes most of a minute: measured once.
        for _ in range(args.repeats if gpus <= 10_000 else 1):
            # Warm: nothing changed. Then every node pushes once, spread at a quarter of the sustained rate or
            # over 2 s if that is slower (a cluster pushing on its interval), and the scrape comes right after the
            # last push. Exactly once: at a fixed 2 s a fast machine had every node of 10,000 GPUs push twice,
            # which is off the scrape's beat (the scrape renders them itself, see MetricsRenderer), and a slow one
            # left nodes out. Then the worst case: every node pushes as fast as the server takes them (several
            # times each), and the scrape comes right after.
            result.scrape_warm.add(scrape_rendered(server.url, 3))
            paced = min(0.25 * sustained, nodes / 2.0)
            # One connection per generator process: each sends its share of the nodes in order, every one once
            load(server.url, once, seconds=nodes / paced, connections=1, rate=paced)
            changed, result.scrape_bytes = scrape_once(server.url)
            result.scrape_changed.add(changed)
            load(server.url, once, seconds=max(1.0, nodes / sustained))
            burst, _ = scrape_once(server.url)
            result.scrape_burst.add(burst)
            log(
                f"scrape warm {result.scrape_warm.values[-1] * 1e3:.0f} ms, after every node pushed "
                f"{changed * 1e3:.0f} ms (paced), {burst * 1e3:.0f} ms (at full speed)"
            )
        at_80 = result.at_80_rate = 0.8 * sustained
        result.bare_own_80_rate = 0.8 * result.bare.median / GPUS_PER_NODE
        for _ in range(args.repeats):
            # The bare app open loop at 80% of its own closed-loop rate: that rate counts uvicorn's batching of
            # requests that arrive together, which requests due one by one do not get.
            own, own_cpu = with_cpu(
                bare_server, lambda: load(bare_url, targets, connections=32, rate=result.bare_own_80_rate)
            )
            result.bare_busy_at_own_80.add(own_cpu / own.seconds)
            result.bare_p99_at_own_80.add(own.percentile(0.99))
            log(
                f"bare app open loop at 80% of its closed-loop rate ({result.bare_own_80_rate:,.0f} pushes/s): "
                f"p99 {own.percentile(0.99):.1f} ms, busy {own_cpu / own.seconds:.0%}"
            )
            # The bare app at the same rate, alternating: the tail that the load generator and this machine's
            # scheduling add whatever the server does. The server's CPU includes what it did after the window
            # until it was idle again; renders per push after that count the renders it shed, not those deferred.
            floor = load(bare_url, targets, connections=32, rate=at_80)
            r, r_cpu, rendered = rendered_window(at_80)
            result.p50_at_80.add(r.percentile(0.5))
            result.p99_at_80.add(r.percentile(0.99))
            result.bare_p99_at_80.add(floor.percentile(0.99))
            result.busy_at_80.add(r_cpu / r.seconds)
            result.rendered_at_80.add(rendered)
            log(
                f"80% load ({at_80:,.0f} pushes/s): p50 {r.percentile(0.5):.1f} ms, p99 {r.percentile(0.99):.1f} ms, "
                f"non-2xx {r.sent - r.ok}, server busy {r_cpu / r.seconds:.0%}, renders per push {rendered:.2f}; "
                f"bare app at that rate: p99 {floor.percentile(0.99):.1f} ms"
            )
        # That 80% keeps the server about fully busy open loop (the closed loop's rate gains from batching, in
        # uvicorn and in renders shed), so also: open loop at 80% of the capacity its busy share there gives, where
        # renders per push and the busy share say whether every push was rendered and how near capacity it ran;
        # and the bare app at that same rate, for the CPU per push of each. A busy share near 100% caps at it, so
        # rate / busy overstates the capacity of a server that was past it: a first window that finds the server
        # over 92% busy steps the rate down (at most 3 times) and is not counted.
        result.open_rate = 0.8 * at_80 / max(result.busy_at_80.median, 0.01)
        while len(result.busy_at_open.values) < args.repeats:
            floor, floor_cpu = with_cpu(
                bare_server, lambda: load(bare_url, targets, connections=32, rate=result.open_rate)
            )
            r, r_cpu, rendered = rendered_window(result.open_rate)
            busy = r_cpu / r.seconds
            log(
                f"open loop at {result.open_rate:,.0f} pushes/s: p50 {r.percentile(0.5):.1f} ms, "
                f"p99 {r.percentile(0.99):.1f} ms, non-2xx {r.sent - r.ok}, server busy {busy:.0%}, "
                f"renders per push {rendered:.2f}; bare app: p99 {floor.percentile(0.99):.1f} ms, busy "
                f"{floor_cpu / floor.seconds:.0%}; CPU per push bare/mfumon "
                f"{(floor_cpu / max(1, floor.ok)) / (r_cpu / max(1, r.ok)):.2f}"
            )
            # Renders per push are no sign of saturation since a node is rendered per scrape, not per push (these
            # windows have no scrape): only the busy share is.
            if not result.busy_at_open.values and busy > 0.92 and result.open_steps < 3:
                result.open_steps += 1
                result.open_rate *= 0.8 / max(busy, 0.8)
                log(f"near or past capacity: not counted, stepping down to {result.open_rate:,.0f} pushes/s")
                continue
            result.p50_at_open.add(r.percentile(0.5))
            result.p99_at_open.add(r.percentile(0.99))
            result.bare_p99_at_open.add(floor.percentile(0.99))
            result.busy_at_open.add(busy)
            result.bare_busy_at_open.add(floor_cpu / floor.seconds)
            result.rendered_at_open.add(rendered)
            result.cpu_ratio_at_open.add((floor_cpu / max(1, floor.ok)) / (r_cpu / max(1, r.ok)))
        # The rate it holds with every push rendered: its capacity from those windows (rate / busy). At 80% of it,
        # the latency a cluster sized by that capacity sees; held past the durability bound; and 2x it, overload.
        result.capacity = result.open_rate / max(result.busy_at_open.median, 0.01)
        at_cap_80 = 0.8 * result.capacity
        for _ in range(args.repeats):
            r, r_cpu, rendered = rendered_window(at_cap_80)
            result.p50_at_cap_80.add(r.percentile(0.5))
            result.p99_at_cap_80.add(r.percentile(0.99))
            result.busy_at_cap_80.add(r_cpu / r.seconds)
            result.rendered_at_cap_80.add(rendered)
            log(
                f"80% of capacity ({at_cap_80:,.0f} of {result.capacity:,.0f} pushes/s): p50 {r.percentile(0.5):.1f} "
                f"ms, p99 {r.percentile(0.99):.1f} ms, non-2xx {r.sent - r.ok}, server busy {r_cpu / r.seconds:.0%}, "
                f"renders per push {rendered:.2f}"
            )
        # 80% held longer than SAMPLE_MAX_UNFLUSHED_SECONDS (10 s), which the windows above are not: a sample writer
        # that falls behind shows only then, as pushes refused 'unavailable' (at 100,000 GPUs on SQLite, 16% of
        # them in two runs of three before node rows went 500 a statement; mfumon.api.crud.nodes).
        # Scraped meanwhile, gzipped, every --scrape-every seconds, as Prometheus would: the windows above run with
        # no scrape, and a scrape's CPU on top of 80% busy builds a queue.
        before = ingest_outcomes(server.url)
        with scraping(server.url, args.scrape_every) as scrapes:
            r = load(server.url, targets, seconds=args.held_seconds, connections=32, rate=at_cap_80)
        after = ingest_outcomes(server.url)
        result.held = {
            "seconds": args.held_seconds,
            "p99": r.percentile(0.99),
            "refused_share": r.refused / max(1, r.sent),
            "unavailable": after.get("unavailable", 0) - before.get("unavailable", 0),
            "scrapes": len(scrapes),
            "scrape_max_s": max(scrapes, default=float("nan")),
        }
        log(
            f"80% held {args.held_seconds:g} s: p99 {r.percentile(0.99):.1f} ms, refused {r.refused} of {r.sent} "
            f"({result.held['unavailable']:.0f} as 'unavailable': the sample writer behind its bound); "
            f"{len(scrapes)} scrapes meanwhile, the longest {result.held['scrape_max_s'] * 1e3:.0f} ms"
        )
        # As many senders as a cluster has exporters, each waiting on its own answer; the bare app first, at the
        # same rate: what any server gets on this machine at that rate.
        twice = 2 * result.capacity
        floor = run_load(bare_url, targets, seconds=args.seconds, processes=args.processes, connections=512, rate=twice)
        r = run_load(server.url, targets, seconds=args.seconds, processes=args.processes, connections=512, rate=twice)
        result.overload.append(
            {
                "offered": r.issued / r.seconds,
                "accepted": r.ok / r.seconds,
                "answered": (r.ok + r.refused) / r.seconds,
                "bare_answered": floor.ok / floor.seconds,
                "bare_p99": floor.percentile(0.99),
                "refused_share": r.refused / max(1, r.sent),
                "errors": r.errors,
                "p99_ok": r.percentile(0.99),
                "p50_ok": r.percentile(0.5),
                "p99_refused": r.percentile(0.99, refused=True),
                "p99_ok_sent": r.percentile(0.99, from_sent=True),
                "p99_refused_sent": r.percentile(0.99, refused=True, from_sent=True),
                "bare_p99_sent": floor.percentile(0.99, from_sent=True),
            }
        )
        o = result.overload[-1]
        log(
            f"2x load: offered {o['offered']:,.0f}/s, accepted {o['accepted']:,.0f}/s, "
            f"refused {o['refused_share']:.0%}, p99 accepted {o['p99_ok']:.0f} ms, "
            f"p99 refused {o['p99_refused']:.1f} ms, errors {o['errors']:.0f}; bare app at that rate: answered "
            f"{o['bare_answered']:,.0f}/s, p99 {o['bare_p99']:.0f} ms; from when written rather than due: p99 "
            f"accepted {o['p99_ok_sent']:.0f} ms, refused {o['p99_refused_sent']:.1f} ms, "
            f"bare {o['bare_p99_sent']:.0f} ms"
        )
        result.rss = server.rss_bytes()
    return result


def pushgateway_binary() -> str | None:
    """The Pushgateway on PATH (Debian names it ``prometheus-pushgateway``)."""
    return shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")


def measure_pushgateway(args: argparse.Namespace, gpus: int, workdir: Path) -> dict[str, float] | None:
    binary = pushgateway_binary()
    if binary is None:
        return None
    nodes = gpus // GPUS_PER_NODE
    targets = pushgateway_targets(nodes)
    # At info it logs the port it got; at warn it says nothing.
    cmd = [binary, f"--persistence.file={workdir / f'pgw-{gpus}.data'}", "--log.level=info"]
    with spawn("pushgateway", cmd, dict(os.environ), "/-/ready", workdir) as server:
        run_load(
            server.url, targets, seconds=max(3.0, nodes / 300), processes=args.processes, connections=args.connections
        )
        r = run_load(server.url, targets, seconds=args.seconds, processes=args.processes, connections=args.connections)
        scrape_seconds, size = scrape_median(server.url, 3)
        rss = server.rss_bytes()
        return {"gpus": gpus, "ingest": r.units_per_second, "scrape_s": scrape_seconds, "bytes": size, "rss": rss}


def _stat_ticks(proc: Path, reaped: bool = False) -> int | None:
    """A process's CPU clock ticks from ``/proc/<pid>/stat`` (user + system; with ``reaped``, its waited-for
    children's too); None once it is gone."""
    try:
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(v) for v in fields[11 : 15 if reaped else 13])


def _cpu_seconds(pids: Sequence[int]) -> float:
    ticks = (_stat_ticks(Path(f"/proc/{pid}")) for pid in pids)
    return sum(t for t in ticks if t is not None) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class PairedWindow:
    """One closed-loop window of the bare app, then one of mfumon, under the same load: each result and its server's
    CPU seconds (its work after the window included), and PostgreSQL's own CPU per mfumon push (0 on SQLite)."""

    bare: LoadResult
    bare_cpu: float
    real: LoadResult
    real_cpu: float
    postgres_us: float

    @property
    def ratio(self) -> float:
        return self.real.units_per_second / self.bare.units_per_second

    @property
    def bare_per_cpu(self) -> float:
        return self.bare.units_ok / self.bare_cpu

    @property
    def real_per_cpu(self) -> float:
        return self.real.units_ok / self.real_cpu

    @property
    def cpu_ratio(self) -> float:
        return self.real_per_cpu / self.bare_per_cpu


def paired_window(
    bare_server: Server, server: Server, window: Callable[[str], LoadResult], postgres: bool
) -> PairedWindow:
    """The bare app's window and mfumon's, one after the other (``window`` runs the load against a URL)."""
    b, b_cpu = with_cpu(bare_server, lambda: window(bare_server.url))
    postgres_before = postgres_cpu_seconds() if postgres else 0.0
    r, r_cpu = with_cpu(server, lambda: window(server.url))
    postgres_us = (postgres_cpu_seconds() - postgres_before) / max(r.ok, 1) * 1e6 if postgres else 0.0
    return PairedWindow(b, b_cpu, r, r_cpu, postgres_us)


def with_cpu(server: Server, work: Callable[[], LoadResult], poll_seconds: float = 0.5) -> tuple[LoadResult, float]:
    """``work()`` and the server's CPU seconds it cost, including what the server deferred and did after the load
    stopped: under saturation the renderer falls behind and catches up later, so the closed-loop rate alone
    overstates what the server sustains with its ``/metrics`` kept current. Counted until the server is back to its
    idle CPU use (measured just before), less that idle use."""
    pid = [server.process.pid]
    c0, t0 = _cpu_seconds(pid), time.monotonic()
    time.sleep(1.0)
    idle = (_cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    c0, t0 = _cpu_seconds(pid), time.monotonic()
    result = work()
    deadline = time.monotonic() + 60
    last = _cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(poll_seconds)
        now = _cpu_seconds(pid)
        if now - last <= idle * poll_seconds + 0.03:  # within a few clock ticks of idle
            break
        last = now
    return result, (_cpu_seconds(pid) - c0) - idle * (time.monotonic() - t0)


def postgres_cpu_seconds() -> float:
    """CPU seconds of every PostgreSQL process on this machine, the ones that exited included (their postmaster's
    reaped children: autovacuum workers come and go). The bench's own server (``.ci/with-postgres``) has no other
    client, so it is the group commit's and the listener's cost, with the vacuum and checkpoints they cause. NaN when
    no PostgreSQL runs on this machine (``--postgres-url`` elsewhere): its CPU is then not this machine's."""
    total, found = 0, False
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or (proc / "comm").read_text().strip() != "postgres":
                continue
        except OSError:
            continue
        ticks = _stat_ticks(proc, reaped=True)
        if ticks is not None:
            total, found = total + ticks, True
    return total / os.sysconf("SC_CLK_TCK") if found else float("nan")


def _machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    tick = os.sysconf("SC_CLK_TCK")
    return (total - idle) / tick, total / tick


def _visibility_lag_seconds(urls: list[str], node: int) -> float:
    """How long a push to the first replica takes to show on the last one (group commit + NOTIFY + read)."""
    stamp = time.time()
    body = node_sample(node, stamp)
    with httpx.Client(timeout=30) as client:
        client.post(f"{urls[0]}/v1/nodes/{node_name(node)}/samples", json=body).raise_for_status()
        sent = time.perf_counter()
        while time.perf_counter() - sent < 30:
            seen = client.get(f"{urls[-1]}/v1/nodes/{node_name(node)}").json().get("last_timestamp")
            if seen == stamp:
                return time.perf_counter() - sent
            time.sleep(0.01)
    return float("nan")


def measure_replicas(args: argparse.Namespace, dbs: Databases, workdir: Path) -> list[dict[str, float]]:
    """1, 2, 4 ``mfumon serve`` on one PostgreSQL, the load spread over them; where the CPU goes."""
    gpus = args.replica_gpus
    nodes, jobs = gpus // GPUS_PER_NODE, gpus // GPUS_PER_JOB
    targets = push_targets(nodes)
    database = dbs.new("postgres")
    out: list[dict[str, float]] = []
    for count in args.replicas:
        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(mfumon(database, workdir)) for _ in range(count)]
            urls = [s.url for s in servers]
            if not out:
                log(f"replicas: filling {nodes:,} nodes and {jobs:,} jobs")
                fill(urls[0], nodes, jobs)
            for url in urls:  # every replica holds the whole cluster (loaded at start, then by NOTIFY)
                deadline = time.monotonic() + 120
                while httpx.get(f"{url}/v1/cluster", timeout=60).json()["nodes"] < nodes:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"replica {url} never saw all {nodes} nodes")
                    time.sleep(0.5)
            connections = args.connections * count
            run_load(urls, targets, seconds=2, processes=args.processes, connections=connections)
            rates, ours, postgres, machine = Series(), Series(), Series(), Series()
            for _ in range(args.repeats):
                mine = [s.process.pid for s in servers]
                before = (_cpu_seconds(mine), postgres_cpu_seconds(), _machine_busy())
                r = run_load(urls, targets, seconds=args.seconds, processes=args.processes, connections=connections)
                after = (_cpu_seconds(mine), postgres_cpu_seconds(), _machine_busy())
                wall = after[2][1] - before[2][1]  # CPU-seconds available on the machine in the window
                rates.add(r.units_per_second)
                ours.add((after[0] - before[0]) / wall)
                postgres.add((after[1] - before[1]) / wall)
                machine.add((after[2][0] - before[2][0]) / wall)
            lags = Series()
            for k in range(5 if count > 1 else 0):
                lags.add(_visibility_lag_seconds(urls, k))
            row = {
                "replicas": count,
                "ingest": rates.median,
                "replicas_cpu": ours.median,
                "postgres_cpu": postgres.median,
                "machine_busy": machine.median,
                "lag_s": lags.median,
            }
            out.append(row)
            log(
                f"{count} replica(s): {row['ingest']:,.0f} GPU-samples/s; machine CPU busy {row['machine_busy']:.0%} "
                f"(replicas {row['replicas_cpu']:.0%}, PostgreSQL {row['postgres_cpu']:.0%}); "
                f"push visible on another replica after {row['lag_s'] * 1e3:.0f} ms"
            )
    return out


def measure_memory(args: argparse.Namespace, dbs: Databases, workdir: Path) -> dict[str, float]:
    gpus, jobs = args.memory_gpus, args.memory_jobs
    nodes = gpus // GPUS_PER_NODE
    out: dict[str, float] = {}
    with mfumon(dbs.new("sqlite"), workdir) as server:
        out["empty"] = server.rss_bytes()
        log(f"memory: filling {gpus:,} GPUs, then {jobs:,} jobs")
        fill(server.url, nodes, 0)
        scrape_once(server.url)
        out["nodes_only"] = server.rss_bytes()
        fill(server.url, 0, jobs, job_prefix="mem")
        scrape_once(server.url)
        out["full"] = server.rss_bytes()
        for cycle, prefix in enumerate(("mem", "again")):  # a second set of jobs reuses what the first freed
            if cycle:
                fill(server.url, 0, jobs, job_prefix=prefix)
                scrape_once(server.url)
                out["full_again"] = server.rss_bytes()
            ends = [Target("POST", f"/v1/jobs/{prefix}-{job}/end") for job in range(jobs)]
            ended = run_load_once(server.url, ends)
            assert ended.ok == jobs, f"memory: {ended.ok} of {jobs} jobs ended ({dict(ended.statuses)})"
            time.sleep(3)  # one refresh prunes ended jobs from the state
            scrape_once(server.url)  # and a scrape drops their rendered series
            time.sleep(TRIM_EVERY_S + 2)  # then the free pages go back (mfumon.api.core.memory.Trimmer)
            out["jobs_ended_again" if cycle else "jobs_ended"] = server.rss_bytes()
        out["gpus"], out["jobs"] = gpus, jobs
    return out


# --- report ----------------------------------------------------------------------------------------------------


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def us_per_push(per_cpu: float) -> float:
    """CPU microseconds per push from GPU-samples per CPU-second."""
    return GPUS_PER_NODE / per_cpu * 1e6


def print_floor(sizes: list[SizeResult]) -> None:
    """Each app's CPU per push, and what is left of it above the ASGI server alone (the same windows as above)."""
    print("CPU per push (us), medians of the windows above, and each app's own share: above the ASGI server alone")
    print("(bench/bare_app.py --floor: uvicorn and run_app's connection guard, reading the body and answering, no")
    print("app). 'own ratio': FastAPI's own cost (routing, JSON parse) over mfumon's own (door, validation, state,")
    print("sample writer), the work each adds to the same server; 'PostgreSQL': the database server's own CPU per")
    print("push in mfumon's windows, on the same CPUs (the group commit, the listener, the vacuum and checkpoints)")
    print(
        f"{'db':<9}{'GPUs':>9}  {'server alone':>12}  {'bare FastAPI':>12}  {'mfumon':>8}  "
        f"{'bare own':>8}  {'mfumon own':>10}  {'own ratio':>9}  {'PostgreSQL':>10}"
    )
    for s in sizes:
        floor_us, bare_us, real_us = (us_per_push(x.median) for x in (s.floor_per_cpu, s.bare_per_cpu, s.real_per_cpu))
        bare_own, real_own = bare_us - floor_us, real_us - floor_us
        database = s.postgres_us.spread(fmt="{:.0f}")
        print(
            f"{s.db:<9}{s.gpus:>9,}  {floor_us:>12.0f}  {bare_us:>12.0f}  {real_us:>8.0f}  "
            f"{bare_own:>8.0f}  {real_own:>10.0f}  {bare_own / real_own:>9.2f}  {database:>10}"
        )
    print()


def print_report(
    args: argparse.Namespace,
    sizes: list[SizeResult],
    pushgateway: list[dict[str, float]],
    replicas: list[dict[str, float]],
    memory: dict[str, float] | None,
    started: float,
) -> None:
    print()
    print(
        f"mfu-monitor aggregator scale bench — {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
        f"load average at start {args.load_at_start}, at end {args.load_at_end}, {(time.time() - started) / 60:.0f} min"
    )
    print(
        f"load: {args.processes} client processes x {args.connections} keep-alive connections, {args.seconds:g} s "
        f"windows, {args.repeats} interleaved repeats; median [min-max]; pushes of {GPUS_PER_NODE} GPUs"
    )
    print()
    print("Ingest (GPU-samples/s)")
    print(f"{'db':<9}{'GPUs':>9}  {'bare FastAPI':>26}  {'mfumon serve':>26}  {'ratio':>17}")
    for s in sizes:
        print(
            f"{s.db:<9}{s.gpus:>9,}  {s.bare.spread():>26}  {s.real.spread():>26}  {s.ratios.spread(fmt='{:.2f}'):>17}"
        )
    print()
    print("Per CPU-second of the server (GPU-samples), counting what it deferred under that load and did once the load")
    print("stopped (renders that fell behind), not the renders it shed (a node pushed again before its turn came is")
    print("rendered once: many pushes at 1,000 and 10,000 GPUs, few at 100,000); see the open-loop table for the cost")
    print("with every push rendered. PostgreSQL's own CPU is not included: the next table shows it.")
    print(f"{'db':<9}{'GPUs':>9}  {'bare FastAPI':>26}  {'mfumon serve':>26}  {'ratio':>17}")
    for s in sizes:
        print(
            f"{s.db:<9}{s.gpus:>9,}  {s.bare_per_cpu.spread():>26}  {s.real_per_cpu.spread():>26}  "
            f"{s.cpu_ratios.spread(fmt='{:.2f}'):>17}"
        )
    print()
    print_floor(sizes)
    nan = float("nan")
    print("Open loop (latency counts from when a push was due) at 80% of the closed-loop rate: mfumon at 80% of its")
    print("sustained rate above (the lower of its two figures), with the bare app at that same rate (the tail this")
    print("machine and the load generator add to any server); busy: the server's CPU-seconds per second, its work")
    print("after the window included; renders: node renders per push accepted (no scrape: a node once). And the bare")
    print("app at 80% of its own closed-loop rate: that rate counts uvicorn's batching of requests that arrive")
    print("together, which pushes due one by one do not get, so it is no rate a server holds open loop here")
    print(
        f"{'db':<9}{'GPUs':>9}  {'mfumon: rate/s':>14}  {'busy':>5}  {'renders':>7}  {'p50':>6}  {'p99':>7}  "
        f"{'bare p99':>8}  {'bare @80% own: rate/s':>21}  {'busy':>5}  {'p99':>7}"
    )
    for s in sizes:
        print(
            f"{s.db:<9}{s.gpus:>9,}  {s.at_80_rate:>14,.0f}  {s.busy_at_80.median:>5.0%}  "
            f"{s.rendered_at_80.median:>7.2f}  {s.p50_at_80.median:>6.1f}  {s.p99_at_80.median:>7.1f}  "
            f"{s.bare_p99_at_80.median:>8.1f}  {s.bare_own_80_rate:>21,.0f}  {s.bare_busy_at_own_80.median:>5.0%}  "
            f"{s.bare_p99_at_own_80.median:>7.1f}"
        )
    print()
    print("Capacity, open loop below saturation (at 80% of the capacity the busy share above gives, stepped down while")
    print("a first window finds mfumon over 92% busy: 'steps'; renders per push: a node is rendered per scrape), the")
    print("bare app at the same rate beside mfumon: capacity = rate / busy; CPU ratio = the bare app's CPU per push")
    print("over mfumon's, which is also mfumon's capacity over the bare app's")
    print(
        f"{'db':<9}{'GPUs':>9}  {'rate/s':>7}  {'steps':>5}  {'busy':>5}  {'renders':>7}  {'bare busy':>9}  "
        f"{'capacity GPU-samples/s':>22}  {'CPU ratio':>17}  {'p50':>5}  {'p99':>18}  {'bare p99':>8}"
    )
    for s in sizes:
        if not s.busy_at_open.values:
            continue
        print(
            f"{s.db:<9}{s.gpus:>9,}  {s.open_rate:>7,.0f}  {s.open_steps:>5}  {s.busy_at_open.median:>5.0%}  "
            f"{s.rendered_at_open.median:>7.2f}  {s.bare_busy_at_open.median:>9.0%}  "
            f"{s.capacity * GPUS_PER_NODE:>22,.0f}  {s.cpu_ratio_at_open.spread(fmt='{:.2f}'):>17}  "
            f"{s.p50_at_open.median:>5.1f}  {s.p99_at_open.spread(fmt='{:.1f}'):>18}  {s.bare_p99_at_open.median:>8.1f}"
        )
    print()
    print("At 80% of that capacity (the rate a cluster sized by it pushes at): latency (ms) of accepted pushes; then")
    print("the same rate held past the durability bound (SAMPLE_MAX_UNFLUSHED_SECONDS, 10 s), where a sample writer")
    print("that cannot keep up shows as pushes refused 'unavailable', and scraped meanwhile (gzip) every")
    print(f"{args.scrape_every:g} s, as Prometheus would: scrapes, the longest (ms)")
    print(
        f"{'db':<9}{'GPUs':>9}  {'rate/s':>7}  {'busy':>5}  {'renders':>7}  {'p50':>6}  {'p99':>20}  "
        f"{'held: seconds':>13}  {'p99':>7}  {'refused':>7}  {'unavailable':>11}  {'scrapes':>7}  {'longest':>7}"
    )
    for s in sizes:
        if not s.busy_at_cap_80.values:
            continue
        h = s.held
        print(
            f"{s.db:<9}{s.gpus:>9,}  {0.8 * s.capacity:>7,.0f}  {s.busy_at_cap_80.median:>5.0%}  "
            f"{s.rendered_at_cap_80.median:>7.2f}  {s.p50_at_cap_80.median:>6.1f}  "
            f"{s.p99_at_cap_80.spread(fmt='{:.1f}'):>20}  {h.get('seconds', nan):>13.0f}  {h.get('p99', nan):>7.1f}  "
            f"{h.get('refused_share', nan):>7.1%}  {h.get('unavailable', nan):>11,.0f}  {h.get('scrapes', nan):>7.0f}  "
            f"{h.get('scrape_max_s', nan) * 1e3:>7.0f}"
        )
    print()
    print("At 2x that capacity, 512 connections per generator process: pushes/s answered (taken + refused) and taken,")
    print("the share refused (503 + Retry-After), p99 (ms) of those taken and of the refusals; 'written': the")
    print("refusals' p99 from when the generator wrote them rather than when they were due (its own wait for a free")
    print("connection or for CPU left out); and the bare app offered the same rate")
    print(
        f"{'db':<9}{'GPUs':>9}  {'offered/s':>9}  {'answered/s':>10}  {'taken/s':>8}  {'refused':>7}  "
        f"{'p99 taken':>9}  {'p99 refusal':>11}  {'written':>7}  {'bare: answered/s':>16}  {'bare p99':>8}"
    )
    for s in sizes:
        o = s.overload[0] if s.overload else {}
        print(
            f"{s.db:<9}{s.gpus:>9,}  {o.get('offered', nan):>9,.0f}  {o.get('answered', nan):>10,.0f}  "
            f"{o.get('accepted', nan):>8,.0f}  {o.get('refused_share', nan):>7.0%}  {o.get('p99_ok', nan):>9.1f}  "
            f"{o.get('p99_refused', nan):>11.1f}  {o.get('p99_refused_sent', nan):>7.1f}  "
            f"{o.get('bare_answered', nan):>16,.0f}  {o.get('bare_p99', nan):>8.1f}"
        )
    print()
    print("Scrape of /metrics (ms): warm (nothing changed); after every node pushed once, paced at 25% of the")
    print("sustained rate or over 2 s if slower (a cluster pushing on its interval), and after every node pushed")
    print("at full speed, several times each (worst case); the scrape right after the last push")
    print(
        f"{'db':<9}{'GPUs':>9}  {'warm':>14}  {'all changed':>16}  {'ratio':>6}  {'at full speed':>16}  {'size':>8}  "
        f"{'RSS':>8}"
    )
    for s in sizes:
        ratio = s.scrape_changed.median / s.scrape_warm.median
        print(
            f"{s.db:<9}{s.gpus:>9,}  {s.scrape_warm.spread(1e3):>14}  {s.scrape_changed.spread(1e3):>16}  "
            f"{ratio:>6.2f}  {s.scrape_burst.spread(1e3):>16}  {mb(s.scrape_bytes):>8}  {mb(s.rss):>8}"
        )
    if pushgateway:
        print()
        print("Pushgateway (same GPUs as text, one group per node) vs mfumon serve on SQLite")
        print(
            f"{'GPUs':>9}  {'Pushgateway GPU-samples/s':>26}  {'mfumon/Pushgateway':>19}  {'PGW scrape':>11}  "
            f"{'mfumon scrape':>14}"
        )
        for p in pushgateway:
            ours = next((s for s in sizes if s.db == "sqlite" and s.gpus == p["gpus"]), None)
            ratio = ours.real.median / p["ingest"] if ours and p["ingest"] else float("nan")
            our_scrape = ours.scrape_changed.median * 1e3 if ours else float("nan")
            print(
                f"{p['gpus']:>9,}  {p['ingest']:>26,.0f}  {ratio:>19.1f}  {p['scrape_s'] * 1e3:>8.0f} ms  "
                f"{our_scrape:>11.0f} ms"
            )
    if replicas:
        print()
        one = replicas[0]["ingest"]
        print(
            f"Replicas on one PostgreSQL, {args.replica_gpus:,} GPUs, load spread over them (CPU: share of the machine)"
        )
        print(
            f"{'replicas':>8}  {'GPU-samples/s':>14}  {'vs 1':>6}  {'machine busy':>12}  {'replicas':>9}  "
            f"{'PostgreSQL':>10}  {'visible elsewhere':>17}"
        )
        for r in replicas:
            lag = "-" if math.isnan(r["lag_s"]) else f"{r['lag_s'] * 1e3:.0f} ms"  # one replica: no other to see it
            print(
                f"{r['replicas']:>8}  {r['ingest']:>14,.0f}  {r['ingest'] / one:>6.2f}  {r['machine_busy']:>12.0%}  "
                f"{r['replicas_cpu']:>9.0%}  {r['postgres_cpu']:>10.0%}  {lag:>17}"
            )
    if memory:
        print()
        print(
            f"Memory (RSS) of one aggregator: empty {mb(memory['empty'])}; {memory['gpus']:,.0f} GPUs "
            f"{mb(memory['nodes_only'])}; and {memory['jobs']:,.0f} jobs {mb(memory['full'])}; after the jobs ended "
            f"{mb(memory['jobs_ended'])}; another {memory['jobs']:,.0f} jobs {mb(memory['full_again'])}, after they "
            f"ended {mb(memory['jobs_ended_again'])}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 GPUs on SQLite, 5 s windows, 2 repeats")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--databases", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each load window")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--held-seconds", type=float, default=30.0, help="one window at 80%% held past the 10 s durability bound"
    )
    parser.add_argument(
        "--scrape-every", type=float, default=10.0, help="seconds between scrapes during the held window"
    )
    parser.add_argument("--processes", type=int, default=2, help="load-generator processes")
    parser.add_argument("--connections", type=int, default=4, help="keep-alive connections per process")
    parser.add_argument("--postgres-url", default=os.environ.get("MFUMON_TEST_PG_ADMIN_URL"))
    parser.add_argument("--skip", nargs="*", default=[], choices=["sizes", "pushgateway", "memory", "replicas"])
    parser.add_argument("--out", type=Path, help="also write the report (report.md) and every figure (results.json)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--replica-gpus", type=int, default=10_000)
    parser.add_argument("--memory-gpus", type=int, default=100_000)
    parser.add_argument("--memory-jobs", type=int, default=10_000)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.databases, args.seconds, args.repeats = [1000, 10000], ["sqlite"], 5.0, 2
        args.memory_gpus, args.memory_jobs = 10_000, 1_000
    if "postgres" in args.databases and not args.postgres_url:
        print("no PostgreSQL (--postgres-url or MFUMON_TEST_PG_ADMIN_URL): SQLite only", file=sys.stderr)
        args.databases = [d for d in args.databases if d != "postgres"]
    if "pushgateway" not in args.skip and pushgateway_binary() is None:
        # Said before the run, not found missing from its report 45 minutes later.
        parser.error("no Pushgateway on PATH (Debian: apt-get install prometheus-pushgateway); or --skip pushgateway")
    args.load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="mfumon-bench-") as tmp:
        workdir = Path(tmp)
        dbs = Databases(workdir, args.postgres_url)
        sizes: list[SizeResult] = []
        pushgateway: list[dict[str, float]] = []
        memory = None
        replicas: list[dict[str, float]] = []
        try:
            if "sizes" not in args.skip:
                with bare(workdir) as bare_server, floor(workdir) as floor_server:
                    for db in args.databases:
                        for gpus in args.sizes:
                            sizes.append(measure_size(args, dbs, db, gpus, bare_server, floor_server, workdir))
            if "pushgateway" not in args.skip:
                for gpus in [g for g in args.sizes if g <= 10000]:
                    log(f"pushgateway at {gpus:,} GPUs")
                    p = measure_pushgateway(args, gpus, workdir)
                    if p:
                        pushgateway.append(p)
            if "replicas" not in args.skip and "postgres" in args.databases:
                replicas = measure_replicas(args, dbs, workdir)
            if "memory" not in args.skip:
                memory = measure_memory(args, dbs, workdir)
        finally:
            dbs.drop_all()
    args.load_at_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        print_report(args, sizes, pushgateway, replicas, memory, started)
    print(report.getvalue(), end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(f"```\n{report.getvalue().strip()}\n```\n")
        figures = {
            "command": " ".join(sys.argv),
            "cpus": os.cpu_count(),
            "load_at_start": args.load_at_start,
            "load_at_end": args.load_at_end,
            "minutes": (time.time() - started) / 60,
            "settings": {k: v for k, v in vars(args).items() if k not in ("out", "postgres_url")},
            "sizes": [dataclasses.asdict(s) for s in sizes],
            "pushgateway": pushgateway,
            "replicas": replicas,
            "memory": memory,
        }
        (args.out / "results.json").write_text(json.dumps(figures, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
