"""``mfumon serve``: run the aggregator. Flags override ``MFUMON_*`` environment variables."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from mfumon.api.core.config import Settings
from mfumon.api.core.security import check_startup_security
from mfumon.api.errors import BindError, InsecureConfigError, TokenConfigError
from mfumon.api.server import bind_socket, run_app


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mfumon serve",
        description="Run the aggregator. Database from MFUMON_DATABASE_URL (default: SQLite ./mfumon.db); "
        "migrations are applied on start.",
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1, env MFUMON_HOST)")
    parser.add_argument("--port", type=int, help="port; 0 picks a free one (default 8000, env MFUMON_PORT)")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow listening beyond loopback without ingest tokens (env MFUMON_ALLOW_INSECURE)",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="ingest tokens, one per line (optionally named and scoped); the file a client's --token-file reads "
        "works here as is (env MFUMON_INGEST_TOKENS_FILE)",
    )
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING, ... (env MFUMON_LOG_LEVEL)")
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    overrides: dict[str, object] = {}
    if args.host is not None:
        overrides["HOST"] = args.host
    if args.port is not None:
        overrides["PORT"] = args.port
    if args.insecure:
        overrides["ALLOW_INSECURE"] = True
    if args.log_level is not None:
        overrides["LOG_LEVEL"] = args.log_level
    if args.token_file is not None:
        overrides["INGEST_TOKENS_FILE"] = args.token_file
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
        tokens = settings.ingest_tokens()
        check_startup_security(settings.HOST, tokens, settings.ALLOW_INSECURE)
        if settings.READ_REQUIRES_TOKEN and not any(t.principal.allows("read") for t in tokens):
            raise TokenConfigError("MFUMON_READ_REQUIRES_TOKEN is on, but no token has the 'read' scope")
    except (ValidationError, InsecureConfigError, TokenConfigError, OSError) as exc:
        print(f"mfumon serve: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    try:
        sock = bind_socket(settings.HOST, settings.PORT)
    except BindError as exc:
        print(f"mfumon serve: {exc.strerror}", file=sys.stderr)
        return 1
    logging.basicConfig(level=settings.LOG_LEVEL.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from mfumon.api.main import create_app

    run_app(create_app(settings), settings, sock)
    return 0
