"""The ingest token on every client command, and what to say when the aggregator refuses it.

Every subcommand that talks to an aggregator takes ``--token-file`` and reads ``MFUMON_TOKEN_FILE`` and
``MFUMON_TOKEN`` the same way (flag, then the file variable, then the token variable), so a token that works for one
works for all. A 401 or 403 is logged once with the flag or variable that fixes it, then retried quietly with backoff
and counted: a job without a token used to print the same 401 on every interval, forever, naming no fix.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["AUTH_STATUSES", "TOKEN_FIX", "add_token_file_option", "auth_hint", "read_token"]

AUTH_STATUSES = frozenset({401, 403})
TOKEN_FIX = "--token-file FILE, or the environment variable MFUMON_TOKEN_FILE=FILE or MFUMON_TOKEN=TOKEN"


def read_token(token_file: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The token from ``token_file``, else the file ``MFUMON_TOKEN_FILE`` names, else ``MFUMON_TOKEN``; None if
    none is set. A file's first line is the token; ``OSError`` when the file cannot be read."""
    env = os.environ if env is None else env
    path = token_file or env.get("MFUMON_TOKEN_FILE", "").strip()
    if path:
        lines = Path(path).read_text(encoding="utf-8").strip().splitlines()
        return (lines[0].strip() or None) if lines else None
    return env.get("MFUMON_TOKEN", "").strip() or None


def add_token_file_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, purpose: str = "ingest") -> None:
    """``--token-file``, with the help every subcommand shares."""
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"file whose first line is the {purpose} token [env MFUMON_TOKEN_FILE, or MFUMON_TOKEN holding the token]",
    )


def auth_hint(status: int, detail: str, *, scope: str = "ingest", flags: str = TOKEN_FIX) -> str:
    """One line for a 401/403 that says what fixes it; ``detail`` is the answer's body (its JSON ``detail`` if any)."""
    try:
        parsed = json.loads(detail)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("detail"), str):
        detail = parsed["detail"]
    detail = " ".join(detail.split())[:200]
    if status == 403:
        problem = f"the aggregator refused the token (HTTP 403: {detail}): it lacks the '{scope}' scope or this team"
        fix = f"give a token with the '{scope}' scope ({flags})"
    else:
        problem = f"the aggregator wants a token (HTTP 401: {detail})"
        fix = f"give one with {flags}"
    return f"{problem}; {fix}. Retrying quietly with backoff; refusals are counted"
