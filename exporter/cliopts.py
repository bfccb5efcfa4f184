"""Options every client subcommand spells the same way: ``--token-file`` (see :mod:`mfumon.exporter.auth`) and
``--log-level``, so a flag learnt on one command works on the others."""

from __future__ import annotations

import argparse
import os

from mfumon.exporter.auth import add_token_file_option

__all__ = ["add_log_level_option", "add_token_file_option"]


def add_log_level_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, default: str | None) -> None:
    """``--log-level`` with ``MFUMON_LOG_LEVEL`` as its default, else ``default``."""
    shown = f", default {default}" if default else ""
    parser.add_argument(
        "--log-level",
        default=os.environ.get("MFUMON_LOG_LEVEL") or default,
        metavar="LEVEL",
        help=f"DEBUG, INFO, WARNING or ERROR [env MFUMON_LOG_LEVEL{shown}]",
    )
