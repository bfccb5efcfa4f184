"""The ``mfumon`` console script: a thin dispatcher to one module per subcommand.

Each subcommand module owns its own argument parser and exposes ``main(argv) -> int``. Modules are imported only
when their subcommand runs, so ``mfumon wrap`` and ``mfumon exporter`` never import FastAPI or SQLAlchemy, and a
subcommand whose extra is not installed says which one in one line instead of a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass

#: the line ``mfumon serve`` prints on stderr once it listens, followed by its URL (the demo and tests read it)
LISTENING_PREFIX = "mfumon serve: listening on "


@dataclass(frozen=True, slots=True)
class Subcommand:
    module: str  # has ``main(argv) -> int``
    help: str
    extra: str | None = None  # the install extra whose packages the module imports
    needs: tuple[str, ...] = ()  # top-level packages of that extra


_SERVER = ("fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic", "jinja2", "fastapi_offline")

SUBCOMMANDS: dict[str, Subcommand] = {
    "serve": Subcommand("mfumon.api.cli", "run the aggregator (database from MFUMON_DATABASE_URL)", "server", _SERVER),
    "demo": Subcommand(
        "mfumon.exporter.demo.cli",
        "run the aggregator with a simulated cluster and jobs (no GPU needed)",
        "server",
        _SERVER,
    ),
    "exporter": Subcommand(
        "mfumon.exporter.node.agent", "run the node agent: read GPU counters and push them to the aggregator"
    ),
    "wrap": Subcommand("mfumon.exporter.job.wrap.cli", "run a training/inference command and report its throughput"),
    "scheduler": Subcommand(
        "mfumon.exporter.scheduler.cli", "keep the aggregator's jobs in step with Slurm or Kubernetes"
    ),
    "remediate": Subcommand(
        "mfumon.exporter.scheduler.remediate.cli", "drain and resume unhealthy nodes through the scheduler (dry run)"
    ),
    "profile": Subcommand(
        "mfumon.exporter.ops.profile_cli", "ask a running job for a torch.profiler profile and print its summary"
    ),
    "report": Subcommand(
        "mfumon.exporter.ops.cli", "where a window's GPU-hours went: teams, pools, top wasters, cost (md or html)"
    ),
}


def _usage() -> str:
    lines = ["usage: mfumon <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {command.help}" for name, command in SUBCOMMANDS.items()]
    lines += ["", "Run 'mfumon <command> --help' for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mfumon`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        from importlib.metadata import version

        print(f"mfumon {version('mfu-monitor')}")
        return 0
    command = SUBCOMMANDS.get(args[0])
    if command is None:
        print(f"mfumon: unknown command {args[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    missing = [name for name in command.needs if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"mfumon {args[0]}: needs the '{command.extra}' extra ({missing[0]} is not installed): "
            f"pip install 'mfu-monitor[{command.extra}]'",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(command.module)
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
