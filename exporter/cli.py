"""The ``mfumon`` console script: a thin dispatcher to one module per subcommand.

Each subcommand module owns its own argument parser and exposes ``main(argv) -> int``. Modules are imported only
when their subcommand runs, so ``mfumon wrap`` and ``mfumon exporter`` never import FastAPI or SQLAlchemy.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: subcommand -> (module with ``main(argv) -> int``, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("api.cli", "run the aggregator (database from MFUMON_DATABASE_URL)"),
    "demo": ("exporter.demo.cli", "run the aggregator with a simulated cluster and jobs (no GPU needed)"),
    "exporter": ("exporter.node.agent", "run the node agent: read GPU counters and push them to the aggregator"),
    "wrap": ("exporter.job.wrap.cli", "run a training/inference command and report its throughput"),
    "scheduler": ("exporter.scheduler.cli", "keep the aggregator's jobs in step with Slurm or Kubernetes"),
    "report": ("exporter.ops.cli", "where a window's GPU-hours went: teams, pools, top wasters, cost (md or html)"),
}


def _usage() -> str:
    lines = ["usage: mfumon <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_text}" for name, (_, help_text) in SUBCOMMANDS.items()]
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
    entry = SUBCOMMANDS.get(args[0])
    if entry is None:
        print(f"mfumon: unknown command {args[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(entry[0])
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
