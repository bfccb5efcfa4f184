"""``mfumon remediate --source slurm|kubernetes``: drain and resume unhealthy nodes through the scheduler, safely.

Run one per cluster, next to ``mfumon scheduler``. Dry run unless ``--act``: it then logs and records (in the
aggregator's audit and ``mfumon_remediation_actions_total{outcome="dry_run"}``) what it would do.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from mfumon.exporter.auth import read_token
from mfumon.exporter.cliopts import add_log_level_option, add_token_file_option
from mfumon.exporter.scheduler.remediate.aggregator import Aggregator
from mfumon.exporter.scheduler.remediate.driver import Driver, SchedulerCommandError
from mfumon.exporter.scheduler.remediate.loop import KILL_ENV, KillSwitch, Remediator, Retry
from mfumon.exporter.scheduler.remediate.model import Policy
from mfumon.exporter.signals import stop_on_signals
from mfumon.startup import aggregator_url_problem, fail, is_debug

__all__ = ["main"]

PROG = "mfumon remediate"


def _build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    defaults = Policy()
    p = argparse.ArgumentParser(
        prog="mfumon remediate",
        description="Drain nodes on the aggregator's drain list and resume them once healthy, through the scheduler "
        "(one per cluster). Dry run unless --act.",
    )
    source = env("MFUMON_SCHEDULER_SOURCE")
    p.add_argument(
        "--source",
        choices=("slurm", "kubernetes"),
        default=source,
        required=source is None,
        help="the scheduler that drains and resumes (required unless $MFUMON_SCHEDULER_SOURCE is set)",
    )
    p.add_argument("--act", action="store_true", help="drain and resume for real (default: dry run)")
    p.add_argument("--url", default=env("MFUMON_URL", "http://127.0.0.1:8000"), help="aggregator URL [$MFUMON_URL]")
    add_token_file_option(p, purpose="'remediate'-scoped")
    p.add_argument("--interval", type=float, default=float(env("MFUMON_REMEDIATE_INTERVAL", "30")), help="s [30]")
    p.add_argument("--once", action="store_true", help="one round and exit (1 when it could not read or act)")
    p.add_argument(
        "--kill-file",
        default=env("MFUMON_REMEDIATE_STOP_FILE", "/etc/mfumon/remediate.stop"),
        help=f"while this file exists every action is withheld (so while ${KILL_ENV} is set)",
    )
    rails = p.add_argument_group("rails")
    rails.add_argument("--drain-after", type=float, default=defaults.drain_after_seconds, help="seconds [300]")
    rails.add_argument("--resume-after", type=float, default=defaults.resume_after_seconds, help="seconds [900]")
    budget = "at most this many drained at once"
    rails.add_argument(
        "--budget.pool-nodes",
        dest="pool_nodes",
        type=int,
        default=defaults.max_pool_nodes,
        help=f"nodes of a pool {budget} [{defaults.max_pool_nodes}]",
    )
    rails.add_argument(
        "--budget.pool-ratio",
        dest="pool_ratio",
        type=float,
        default=defaults.max_pool_ratio,
        help=f"share of a pool's nodes {budget} [{defaults.max_pool_ratio}]",
    )
    rails.add_argument(
        "--budget.cluster-nodes",
        dest="cluster_nodes",
        type=int,
        default=defaults.max_cluster_nodes,
        help=f"nodes of the cluster {budget} [{defaults.max_cluster_nodes}]",
    )
    rails.add_argument(
        "--budget.cluster-ratio",
        dest="cluster_ratio",
        type=float,
        default=defaults.max_cluster_ratio,
        help=f"share of the cluster's nodes {budget} [{defaults.max_cluster_ratio}]",
    )
    rails.add_argument(
        "--rate.actions",
        dest="max_actions",
        type=int,
        default=defaults.max_actions,
        help=f"actions allowed per --rate.window [{defaults.max_actions}]",
    )
    rails.add_argument(
        "--rate.window",
        dest="rate_window",
        type=float,
        default=defaults.rate_window_seconds,
        help=f"seconds of the action rate limit [{defaults.rate_window_seconds:g}]",
    )
    rails.add_argument("--retry.attempts", dest="attempts", type=int, default=3, help="tries of a failed action [3]")
    rails.add_argument("--retry.backoff", dest="backoff", type=float, default=2.0, help="seconds, doubling [2]")
    p.add_argument("--slurm.sinfo", dest="sinfo", default=env("MFUMON_SLURM_SINFO", "sinfo"), help="sinfo to run")
    p.add_argument(
        "--slurm.scontrol", dest="scontrol", default=env("MFUMON_SLURM_SCONTROL", "scontrol"), help="scontrol to run"
    )
    p.add_argument("--kube.pool-label", dest="pool_labels", action="append", help="node label naming the pool")
    add_log_level_option(p, "INFO")
    return p


def _driver(args: argparse.Namespace) -> Driver:
    if args.source == "slurm":
        from mfumon.exporter.scheduler.remediate.slurm import SlurmDriver

        return SlurmDriver(sinfo=(args.sinfo, "--json"), scontrol=args.scontrol)
    from mfumon.exporter.scheduler.remediate.kubernetes import KubernetesDriver

    return KubernetesDriver.from_environment(pool_labels=args.pool_labels)


def _token(args: argparse.Namespace) -> str | None:
    return read_token(args.token_file)


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    url_problem = aggregator_url_problem(args.url)
    if url_problem is not None:
        return fail(PROG, url_problem, code=2)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        policy = Policy(
            drain_after_seconds=args.drain_after,
            resume_after_seconds=args.resume_after,
            max_pool_nodes=args.pool_nodes,
            max_pool_ratio=args.pool_ratio,
            max_cluster_nodes=args.cluster_nodes,
            max_cluster_ratio=args.cluster_ratio,
            max_actions=args.max_actions,
            rate_window_seconds=args.rate_window,
        )
        token = _token(args)
        driver = _driver(args)
    except (OSError, ValueError) as exc:
        print(f"mfumon remediate: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "lightkube":
            raise
        print(
            "mfumon remediate: --source kubernetes needs the 'kubernetes' extra (lightkube is not installed): "
            "pip install 'mfu-monitor[kubernetes]'",
            file=sys.stderr,
        )
        return 2
    try:  # the start-up check: a scheduler that cannot be read at all is one line, not a warning every round
        driver.read_nodes()
    except SchedulerCommandError as exc:
        fix = (
            "run it where Slurm's commands work (slurm.conf or SLURM_CONF set), or point --slurm.sinfo at them"
            if args.source == "slurm"
            else "run it in the cluster or with a kubeconfig that can list nodes"
        )
        return fail(
            PROG, f"--source {args.source}: cannot read the scheduler: {exc}: {fix}", debug=is_debug(args.log_level)
        )
    aggregator = Aggregator(args.url, token=token)
    remediator = Remediator(
        driver,
        aggregator,
        policy=policy,
        act=args.act,
        kill_switch=KillSwitch(Path(args.kill_file) if args.kill_file else None),
        retry=Retry(attempts=max(1, args.attempts), backoff_seconds=args.backoff),
    )
    logging.getLogger("mfumon.exporter.scheduler.remediate").info(
        "%s on %s (%s)", "acting" if args.act else "dry run", args.source, policy
    )
    try:
        if args.once:
            records = remediator.run_once()
            return 1 if remediator.failed_rounds or any(r.outcome == "failed" for r in records) else 0
        with stop_on_signals() as stop:
            remediator.run(args.interval, stop)
        return 0
    finally:
        aggregator.close()
