"""``mfumon serve``: run the aggregator. Flags override ``MFUMON_*`` environment variables."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from mfumon.api.core.config import Settings
from mfumon.api.core.security import check_startup_security
from mfumon.api.errors import BindError, InsecureConfigError, TokenConfigError
from mfumon.api.server import bind_socket, run_app
from mfumon.startup import fail, is_debug

PROG = "mfumon serve"


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


def _validation_line(exc: ValidationError) -> str:
    """A settings error as one line: each bad setting by its environment name, with its value."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error.get("loc", ())) or "settings"
        value = f"={error['input']!r}" if field != "settings" and "input" in error else ""
        parts.append(f"MFUMON_{field.upper()}{value}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or str(exc).splitlines()[0]


def database_problem(url: str, setting: str = "MFUMON_DATABASE_URL") -> str | None:
    """Why the aggregator cannot use the database ``url`` (parsed, its folder, one connection), or None."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
    from sqlalchemy.pool import NullPool

    examples = "sqlite:///path/to/mfumon.db or postgresql://USER:PASSWORD@HOST:5432/DB"
    try:
        parsed = make_url(url)
    except ArgumentError:
        return f"{setting}={url!r} is not a database URL: use {examples}"
    shown = f"{setting}={parsed.render_as_string(hide_password=True)!r}"
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        return f"{shown}: mfumon stores its data in SQLite or PostgreSQL: use {examples}"
    connect_args: dict[str, object] = {}
    if backend == "sqlite":
        name = parsed.database or ""
        if name and name != ":memory:" and not name.startswith("file:"):
            folder = Path(name).expanduser().absolute().parent
            if not folder.is_dir():
                return f"{shown}: folder {folder} does not exist: create it, or point {setting} at one that does"
    else:
        connect_args["connect_timeout"] = 10
    try:
        engine = create_engine(parsed, poolclass=NullPool, connect_args=connect_args)
    except (NoSuchModuleError, ArgumentError) as exc:
        return f"{shown}: {exc}: use {examples}"
    except ModuleNotFoundError as exc:
        return f"{shown} needs {exc.name}, which is not installed: pip install 'mfu-monitor[postgres]'"
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as exc:
        lines = str(exc.orig).strip().splitlines()
        reason = lines[0].strip() if lines else type(exc.orig).__name__
        where = "start PostgreSQL there" if backend == "postgresql" else "check the file's permissions"
        return f"{shown}: cannot connect: {reason}: {where}, or fix {setting}"
    finally:
        engine.dispose()
    return None


def peaks_problem(path: str | os.PathLike[str] | None) -> str | None:
    """Why the peak table ``MFUMON_PEAKS_FILE`` cannot be loaded, or None."""
    if path is None:
        return None
    from mfumon.mfu import PeakTable

    try:
        PeakTable.from_file(path)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        return f"MFUMON_PEAKS_FILE='{path}': {reason}: fix the file or unset MFUMON_PEAKS_FILE"
    return None


def prices_problem(path: str | os.PathLike[str] | None) -> str | None:
    """Why the price list ``MFUMON_PRICES_FILE`` cannot be used, or None."""
    if path is None:
        return None
    from mfumon.api.services.prices import read_prices_file

    try:
        read_prices_file(path)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        return f"MFUMON_PRICES_FILE='{path}': {reason}: fix the file or unset MFUMON_PRICES_FILE"
    return None


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
    debug = is_debug(args.log_level or os.environ.get("MFUMON_LOG_LEVEL"))
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        return fail(PROG, _validation_line(exc), debug=debug)
    debug = is_debug(settings.LOG_LEVEL)
    try:
        tokens = settings.ingest_tokens()
        check_startup_security(settings.HOST, tokens, settings.ALLOW_INSECURE)
        if settings.READ_REQUIRES_TOKEN and not any(t.principal.allows("read") for t in tokens):
            raise TokenConfigError("MFUMON_READ_REQUIRES_TOKEN is on, but no token has the 'read' scope")
    except (InsecureConfigError, TokenConfigError, OSError) as exc:
        return fail(PROG, f"{type(exc).__name__}: {exc}", debug=debug)
    try:  # the port first: a busy one fails before any database is touched (or created)
        sock = bind_socket(settings.HOST, settings.PORT)
    except BindError as exc:
        return fail(
            PROG,
            f"{exc.strerror}: stop what listens there, or choose another port with --port (MFUMON_PORT)",
            debug=debug,
        )
    # Every setting that can stop the start is checked before "listening on" is said: a database that cannot be
    # used, or a peak table that cannot be read, is one line here rather than a traceback after it.
    problem = (
        database_problem(settings.DATABASE_URL)
        or peaks_problem(settings.PEAKS_FILE)
        or prices_problem(settings.PRICES_FILE)
    )
    if problem is not None:
        sock.close()
        return fail(PROG, problem, debug=debug)
    logging.basicConfig(level=settings.LOG_LEVEL.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from mfumon.api.main import create_app

    run_app(create_app(settings), settings, sock)
    return 0
