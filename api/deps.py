"""Route dependencies: the process context, authentication by scope, and checks that need the server's state.

The context and the scope checks are ``async``: they only read memory, and FastAPI runs a plain ``def`` dependency
in a worker thread, a hop that would cost every request (a node push most of all) more than the check itself.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError

from mfumon.api.context import AppContext
from mfumon.api.core.security import Principal, granted
from mfumon.api.errors import InputError
from mfumon.api.route_table import endpoint_of
from mfumon.api.schemas._common import ID_PATTERN
from mfumon.api.schemas.baselines import SIGNATURE_KEY_PATTERN
from mfumon.api.services.ingest import limited
from mfumon.api.services.ingest import reject_future_timestamp as reject_future_timestamp  # for the routes
from mfumon.api.services.usage import TIME_PATTERN, TIME_RULE, parse_time


async def get_context(request: Request) -> AppContext:
    return request.app.state.ctx  # type: ignore[no-any-return]


ContextDep = Annotated[AppContext, Depends(get_context)]
JobIdPath = Annotated[str, Path(pattern=ID_PATTERN, description="Scheduler job id, at most 128 characters.")]
NodePath = Annotated[str, Path(pattern=ID_PATTERN, description="Node (host) name, at most 128 characters.")]


def authorized(request: Request, ctx: AppContext, scope: str) -> Principal | None:
    """The request's principal if its token has ``scope`` (kept for the write audit), else None, with nothing
    counted or raised."""
    state = request.scope.setdefault("state", {})
    return granted(state, request.headers.get("authorization"), ctx.verifier, scope)


def authenticate(request: Request, ctx: AppContext, scope: str) -> Principal:
    """The request's principal if its token has ``scope``: 401 for a missing or wrong token, 403 for a token
    without that scope. The principal is kept on the request for the write audit (log line and per-token count)."""
    if (principal := authorized(request, ctx, scope)) is not None:
        return principal
    principal = ctx.verifier.principal(request.headers.get("authorization"))  # refused: find out why
    if principal is None:
        if (endpoint := endpoint_of(request.method, request.scope["path"])) is not None:
            ctx.self_metrics.count_ingest(endpoint, "unauthorized")
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="missing or invalid token (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if (endpoint := endpoint_of(request.method, request.scope["path"])) is not None:
        ctx.self_metrics.count_ingest(endpoint, "forbidden")
    raise HTTPException(
        status_code=status.HTTP_403_FORBIDDEN,
        detail=f"token {principal.name!r} lacks the {scope!r} scope (it has: {', '.join(sorted(principal.scopes))})"
        if principal.scopes
        else f"token {principal.name!r} lacks the {scope!r} scope",
    )


def _require(scope: str) -> Callable[[Request], Coroutine[Any, Any, Principal]]:
    async def dependency(request: Request) -> Principal:  # no ContextDep: every dependency costs each request
        return authenticate(request, request.app.state.ctx, scope)

    dependency.__name__ = f"require_{scope}_scope"
    return dependency


# One dependency per scope: declare the principal a route needs (``principal: JobWriter``) and the check is done.
NodeWriter = Annotated[Principal, Depends(_require("nodes"))]
"""Pushes node samples: a token with the ``nodes`` scope."""
JobWriter = Annotated[Principal, Depends(_require("jobs"))]
"""Writes jobs (register, report, end, events, ...): a token with the ``jobs`` scope; pass it on to the service,
which checks the job's team with :meth:`Principal.job_team`."""
SchedulerWriter = Annotated[Principal, Depends(_require("scheduler"))]
"""Puts a scheduler's whole queue (``mfumon scheduler``): a token with the ``scheduler`` scope (never team-limited)."""
BaselineWriter = Annotated[Principal, Depends(_require("baselines"))]
"""Pins and resets workload baselines: a token with the ``baselines`` scope (never team-limited)."""
RemediationWriter = Annotated[Principal, Depends(_require("remediate"))]
"""Records ``mfumon remediate``'s decisions: a token with the ``remediate`` scope (never team-limited)."""
ProfileRequester = Annotated[Principal, Depends(_require("profile"))]
"""Asks a running job for a profile: a token with the ``profile`` scope (team-limited like job writes)."""
PricesWriter = Annotated[Principal, Depends(_require("prices"))]
"""Sets the price list every team's cost is computed with: a token with the ``prices`` scope (never team-limited)."""
IngestAuth = Depends(_require("jobs"))
"""For ``dependencies=[...]`` on a job write that needs no principal; prefer :data:`JobWriter`."""


async def _require_job_capacity(
    request: Request, job_id: JobIdPath, ctx: ContextDep, _: JobWriter
) -> AsyncIterator[None]:
    if not ctx.state.reserve_job(job_id, ctx.settings.MAX_ACTIVE_JOBS):
        jobs = ctx.state.sizes()[2]
        endpoint = endpoint_of(request.method, request.url.path) or "jobs"
        raise limited(ctx, endpoint, "active_jobs", f"the aggregator holds {jobs} jobs (MFUMON_MAX_ACTIVE_JOBS)")
    try:
        yield  # the route writes and applies the job meanwhile
    finally:
        ctx.state.release_job(job_id)


JobCapacity = Depends(_require_job_capacity)
"""For writes that may start tracking a new job: 429 once ``MFUMON_MAX_ACTIVE_JOBS`` jobs are held."""


MAX_PAGE = 1000


def _hex_bytes(chars: str) -> str:
    """A regular expression for one byte, in lowercase hexadecimal, that is one of the ASCII ``chars``."""
    by_high: dict[int, list[int]] = {}
    for code in sorted({ord(c) for c in chars}):
        by_high.setdefault(code >> 4, []).append(code & 15)
    digits = "0123456789abcdef"

    def low_class(lows: list[int]) -> str:  # [0-9a], runs of three or more as ranges
        runs: list[list[int]] = []
        for low in lows:
            if runs and low == runs[-1][-1] + 1 and low != 10:  # 9 and a are not neighbours in ASCII
                runs[-1].append(low)
            else:
                runs.append([low])
        parts = [f"{digits[r[0]]}-{digits[r[-1]]}" if len(r) > 2 else "".join(digits[x] for x in r) for r in runs]
        return f"[{''.join(parts)}]"

    return "|".join(f"{digits[high]}{low_class(lows)}" for high, lows in by_high.items())


_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_CURSOR_PATTERN = rf"^(?:{_hex_bytes(_ALNUM)})(?:{_hex_bytes(_ALNUM + '._:@+-')}){{0,127}}$"
"""The hexadecimal UTF-8 of a key that matches :data:`ID_PATTERN` (a job id, a node name)."""
_CONT = "[89ab][0-9a-f]"  # a UTF-8 continuation byte
_PRINTABLE_UTF8 = (  # one code point but C0, DEL and C1 (U+0000-U+001F, U+007F-U+009F), in UTF-8, in hexadecimal
    "2[0-9a-f]|[3-6][0-9a-f]|7[0-9a-e]"
    f"|c2[ab][0-9a-f]|(?:c[3-9a-f]|d[0-9a-f]){_CONT}"
    f"|e0[ab][0-9a-f]{_CONT}|e[1-9a-c]{_CONT}{_CONT}|ed[89][0-9a-f]{_CONT}|e[ef]{_CONT}{_CONT}"
    f"|f0(?:9[0-9a-f]|[ab][0-9a-f]){_CONT}{_CONT}|f[1-3]{_CONT}{_CONT}{_CONT}|f48[0-9a-f]{_CONT}{_CONT}"
)
_SIGNATURE_CURSOR_PATTERN = rf"^(?:{_PRINTABLE_UTF8}){{1,512}}$"
"""The hexadecimal UTF-8 of a key that matches :data:`SIGNATURE_KEY_PATTERN` (1-512 printable characters)."""
_CURSOR_RULE = (
    "`next_cursor` of the previous page: the last key of that page, its UTF-8 bytes in lowercase hexadecimal "
    "(the pattern accepts exactly the keys this list can hold); anything else is 422 naming `cursor`."
)


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list: at most ``limit`` items whose sort key comes after ``after``."""

    limit: int
    after: str | None

    def next_cursor(self, keys: list[str]) -> str | None:
        """The cursor of the page after one whose items have these keys; None when this page was the last."""
        if len(keys) < self.limit or not keys:
            return None
        return keys[-1].encode().hex()


def _page_of(key_pattern: str, cursor_pattern: str) -> Callable[..., Page]:
    """The ``?limit=&cursor=`` dependency of a list whose sort keys match ``key_pattern``; ``cursor_pattern`` is
    the hexadecimal UTF-8 of the same keys (what the OpenAPI document says, and FastAPI checks first)."""

    key = re.compile(key_pattern.removesuffix("$") + r"\Z")  # a Python ``$`` would let a final newline through

    def page(
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"Items per page, at most {MAX_PAGE}.")] = 100,
        cursor: str | None = None,
    ) -> Page:
        if cursor is None:
            return Page(limit, None)
        try:
            after: str | None = bytes.fromhex(cursor).decode()
        except (ValueError, UnicodeDecodeError):
            after = None
        if after is None or not key.match(after):  # the cursor's pattern allows none of these: a guard
            raise RequestValidationError(
                [
                    {
                        "type": "value_error",
                        "loc": ("query", "cursor"),
                        "msg": "not a cursor this API gave",
                        "input": cursor,
                    }
                ]
            )
        return Page(limit, after)

    # Set here, not in the signature: this module's annotations are strings, and FastAPI reads them in its globals.
    page.__annotations__["cursor"] = Annotated[str | None, Query(pattern=cursor_pattern, description=_CURSOR_RULE)]
    return page


PageDep = Annotated[Page, Depends(_page_of(ID_PATTERN, _ID_CURSOR_PATTERN))]
"""``?limit=&cursor=`` for a list sorted by a unique key; answer with ``next_cursor=page.next_cursor(keys)``."""
SignaturePageDep = Annotated[Page, Depends(_page_of(SIGNATURE_KEY_PATTERN, _SIGNATURE_CURSOR_PATTERN))]
"""The same for a list sorted by workload signature (``/v1/baselines``)."""


def invalid_query(name: str, message: str, value: object) -> RequestValidationError:
    """The 422 for query parameter ``name`` that passed its declared type and pattern but breaks a rule between
    parameters (``since < until``, ``shard`` with ``shards``): raise it from the route, like FastAPI's own."""
    return RequestValidationError([{"type": "value_error", "loc": ("query", name), "msg": message, "input": value}])


TimeQuery = Query(pattern=TIME_PATTERN, description=TIME_RULE)
"""A window's ``since``/``until`` query parameter (``since: Annotated[str, TimeQuery] = "7d"``), read by
:func:`window_bounds`: the same pattern and words on every windowed route."""


def window_bounds(now: float, since: str, until: str | None) -> tuple[float, float]:
    """A window's ``since``/``until`` query values (``7d``, an ISO time, a Unix time) as Unix seconds; the 422 of
    ``invalid_query`` for a value that cannot be read or a window that ends before it starts."""
    try:
        start = parse_time(since, now=now, field="since")
        end = parse_time(until, now=now, field="until") if until is not None else now
    except InputError as exc:
        raise invalid_query(exc.field, str(exc), until if exc.field == "until" else since) from None
    if start >= end:
        raise invalid_query("since", "since must be before until (default: now)", since)
    return start, end
