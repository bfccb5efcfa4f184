"""``mfumon scheduler --source slurm|kubernetes``: keep the aggregator's jobs in step with the scheduler.

Run one per cluster (a systemd unit next to slurmctld, or a one-replica Deployment). No leader election is
needed: every sync is the scheduler's whole picture, applied atomically, and the aggregator ignores a snapshot
older than the last one it applied, so two adapters of one cluster (a rolling update) agree rather than fight.
A failed read of the scheduler sends nothing (an empty queue would end every job); a failed push is retried at the
next interval with a fresh snapshot (only the latest picture matters, so nothing is spooled).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from mfumon.exporter.auth import read_token
from mfumon.exporter.cliopts import add_log_level_option, add_token_file_option
from mfumon.exporter.scheduler.model import Quota, Snapshot
from mfumon.exporter.signals import stop_on_signals
from mfumon.startup import aggregator_url_problem, fail, is_debug

__all__ = ["Syncer", "load_quotas", "main"]

logger = logging.getLogger("mfumon.exporter.scheduler")
PROG = "mfumon scheduler"


def load_quotas(path: str | os.PathLike[str]) -> list[Quota]:
    """Team GPU quotas from YAML: ``team: 16`` (all pools) or ``team: {pool: 8, other-pool: 4}``."""
    document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a mapping of team -> GPUs or team -> {{pool: GPUs}}")
    quotas = []
    for team, value in document.items():
        if isinstance(value, int) and not isinstance(value, bool):
            quotas.append(Quota(team=str(team), gpus=value))
        elif isinstance(value, dict):
            quotas += [Quota(team=str(team), pool=str(pool), gpus=int(gpus)) for pool, gpus in value.items()]
        else:
            raise ValueError(f"{path}: quota of team {team!r} must be a number or a mapping of pool -> GPUs")
    return quotas


class Syncer:
    """Reads the scheduler with ``read`` and puts each snapshot to the aggregator."""

    def __init__(
        self,
        read: Callable[[], Snapshot],
        *,
        url: str,
        source: str,
        token: str | None = None,
        quotas: Sequence[Quota] = (),
        timeout_seconds: float = 30.0,
    ) -> None:
        self._read = read
        self._source = source
        self._quotas = list(quotas)
        headers = {"User-Agent": "mfumon-scheduler"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_seconds)
        self.syncs = self.failures = 0
        self.last_result: dict[str, Any] | None = None

    def snapshot(self) -> Snapshot:
        snap = self._read()
        if self._quotas and not snap.quotas:
            snap.quotas = list(self._quotas)
        return snap

    def sync_once(self) -> bool:
        """One read and one push; False (logged) when either failed."""
        try:
            body = self.snapshot().as_json()
        except Exception as exc:  # any scheduler failure: skip this round, never send an empty queue
            self.failures += 1
            logger.warning("reading the scheduler failed, nothing sent: %s", exc)
            return False
        return self.push(body)

    def push(self, body: dict[str, Any]) -> bool:
        """Put one snapshot (as JSON) to the aggregator; False (logged) when it failed."""
        try:
            response = self._client.put(f"/v1/scheduler/{self._source}", json=body)
        except httpx.HTTPError as exc:
            self.failures += 1
            logger.warning("sync to the aggregator failed (%s); retrying next interval", exc)
            return False
        if response.status_code != 200:
            self.failures += 1
            logger.warning("aggregator answered %s: %s", response.status_code, response.text[:500])
            return False
        self.syncs += 1
        self.last_result = response.json()
        logger.info("synced %s", self.last_result)
        return True

    def run(self, interval_seconds: float, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            self.sync_once()
            stop.wait(max(0.0, interval_seconds - (time.monotonic() - started)))

    def close(self) -> None:
        self._client.close()


def _build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="mfumon scheduler",
        description="Keep the aggregator's jobs in step with the scheduler (one per cluster).",
    )
    source = env("MFUMON_SCHEDULER_SOURCE")
    p.add_argument(
        "--source",
        choices=("slurm", "kubernetes"),
        default=source,
        required=source is None,
        help="the scheduler to follow (required unless $MFUMON_SCHEDULER_SOURCE is set)",
    )
    p.add_argument("--name", default=env("MFUMON_SCHEDULER_NAME"), help="source name on the aggregator [the source]")
    p.add_argument("--url", default=env("MFUMON_URL", "http://127.0.0.1:8000"), help="aggregator URL [$MFUMON_URL]")
    add_token_file_option(p, purpose="'scheduler'-scoped ingest")
    p.add_argument("--interval", type=float, default=float(env("MFUMON_SCHEDULER_INTERVAL", "30")), help="seconds [30]")
    p.add_argument("--quota-file", default=env("MFUMON_QUOTA_FILE"), help="YAML team -> GPUs (or pool -> GPUs)")
    p.add_argument("--once", action="store_true", help="sync once and exit (1 on failure)")
    p.add_argument("--dry-run", action="store_true", help="print the snapshot as JSON and exit, sending nothing")
    p.add_argument(
        "--slurm.squeue", dest="squeue", default=env("MFUMON_SLURM_SQUEUE", "squeue"), help="squeue to run [squeue]"
    )
    p.add_argument(
        "--slurm.sinfo", dest="sinfo", default=env("MFUMON_SLURM_SINFO", "sinfo"), help="sinfo: partitions as pools"
    )
    p.add_argument(
        "--pools",
        choices=("scheduler", "exporters"),
        default=env("MFUMON_SCHEDULER_POOLS", "scheduler"),
        help="who defines pools: the scheduler's partitions / node pools (they may overlap) or exporters' --pool "
        "[scheduler]",
    )
    p.add_argument("--kube.pool-label", dest="pool_labels", action="append", help="node label naming the pool")
    p.add_argument("--kube.job-label", dest="job_labels", action="append", help="pod label naming the job")
    p.add_argument("--kube.team-label", dest="team_label", default=env("MFUMON_KUBE_TEAM_LABEL"), help="[namespace]")
    p.add_argument(
        "--kube.kueue",
        dest="kueue",
        choices=("auto", "on", "off"),
        default=env("MFUMON_KUEUE", "auto"),
        help="read Kueue's queues and quotas [auto: when its CRDs exist]",
    )
    add_log_level_option(p, "INFO")
    return p


def _reader(args: argparse.Namespace) -> Callable[[], Snapshot]:
    if args.source == "slurm":
        from mfumon.exporter.scheduler import slurm

        command = (args.squeue, "--all", "--json")
        sinfo = (args.sinfo, "--json") if args.pools == "scheduler" else None
        return lambda: slurm.snapshot(command, sinfo=sinfo)
    from mfumon.exporter.scheduler import kubernetes

    watcher = kubernetes.ClusterWatcher.from_environment(
        pool_labels=args.pool_labels,
        job_labels=args.job_labels,
        team_label=args.team_label,
        kueue=args.kueue,
        pools=args.pools == "scheduler",
    )
    watcher.start()
    return watcher.snapshot


def _token(args: argparse.Namespace) -> str | None:
    return read_token(args.token_file)


def _unreadable(args: argparse.Namespace, exc: Exception) -> str:
    """The one line for a scheduler that cannot be read at start: what failed and which setting to fix."""
    if args.source == "slurm":
        fix = (
            "run it where Slurm's commands work (slurm.conf or SLURM_CONF set), "
            "or point --slurm.squeue/--slurm.sinfo at them"
        )
    else:
        fix = "run it in the cluster or with a kubeconfig that can list pods and nodes"
    return f"--source {args.source}: cannot read the scheduler: {exc}: {fix}"


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    debug = is_debug(args.log_level)
    url_problem = aggregator_url_problem(args.url)
    if url_problem is not None:
        return fail(PROG, url_problem, code=2)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        quotas = load_quotas(args.quota_file) if args.quota_file else []
        token = _token(args)
        read = _reader(args)
    except (OSError, ValueError) as exc:
        return fail(PROG, str(exc), debug=debug, code=2)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "lightkube":
            raise
        return fail(
            PROG,
            f"--source {args.source} needs the 'kubernetes' extra (lightkube is not installed): "
            "pip install 'mfu-monitor[kubernetes]'",
            code=2,
        )
    except (ImportError, RuntimeError) as exc:  # API server unreachable
        return fail(PROG, _unreadable(args, exc), debug=debug)
    syncer = Syncer(read, url=args.url, source=args.name or args.source, token=token, quotas=quotas)
    try:
        # The first read is the start-up check: a scheduler that cannot be read at all (not configured, commands
        # missing) is one line and a non-zero exit, not a warning repeated every interval.
        try:
            first = syncer.snapshot().as_json()
        except Exception as exc:
            return fail(PROG, _unreadable(args, exc), debug=debug)
        if args.dry_run:
            print(json.dumps(first, indent=1))
            return 0
        pushed = syncer.push(first)
        if args.once:
            return 0 if pushed else 1
        with stop_on_signals() as stop:
            if not stop.wait(args.interval):
                syncer.run(args.interval, stop)
        return 0
    finally:
        syncer.close()
