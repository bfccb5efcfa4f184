"""Start-up failures a user can cause, said in one line: the setting, its value and what to do.

Every subcommand reports a bad setting the same way: ``mfumon <command>: <SETTING>=<value> ...: <what to do>`` on
stderr, a non-zero exit, and the traceback only with ``--log-level debug`` (it is ours to read, not the user's).
Nothing here imports more than the standard library, so the client subcommands can use it.
"""

from __future__ import annotations

import logging
import sys
import traceback
from urllib.parse import urlsplit, urlunsplit

__all__ = ["PAGE_SEGMENTS", "aggregator_url_problem", "fail", "is_debug"]

#: the first path segment of the aggregator's own pages and endpoints: a ``--url`` with one of them names a page,
#: not the base address the clients add ``/v1/...`` to
PAGE_SEGMENTS = frozenset({"ui", "docs", "metrics", "v1", "healthz", "readyz", "openapi.json"})


def is_debug(level: object) -> bool:
    """Whether a ``--log-level`` value (name or number) asks for debug output, tracebacks included."""
    if isinstance(level, int):
        return level <= logging.DEBUG
    return str(level or "").strip().upper() == "DEBUG"


def fail(prog: str, message: str, *, debug: bool = False, code: int = 1) -> int:
    """Print ``prog: message`` as the one line on stderr (after the current exception's traceback when ``debug``);
    returns ``code`` for the command's ``main`` to return."""
    if debug and sys.exc_info()[0] is not None:
        traceback.print_exc()
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return code


def aggregator_url_problem(url: str | None, setting: str = "--url") -> str | None:
    """What is wrong with an aggregator base address, or None: not http(s), or a page's address (``…/ui``)."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{setting} {url!r} is not an http(s) URL: give the aggregator's base address, e.g. http://HOST:8000"
    segments = parts.path.split("/")
    for index, segment in enumerate(segments):
        if segment in PAGE_SEGMENTS:
            base = urlunsplit((parts.scheme, parts.netloc, "/".join(segments[:index]), "", ""))
            return (
                f"{setting} {url!r} is an aggregator page; {setting} is the aggregator's base address: "
                f"use {setting} {base.rstrip('/')}"
            )
    return None
