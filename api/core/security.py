"""Authentication: named, scoped bearer tokens compared in constant time, and the refuse-to-start rule.

The rule: a process listening beyond loopback must have tokens, unless the operator explicitly says ``--insecure``.
Tokens are never logged; their names are.

A token line is ``TOKEN [name=NAME] [scopes=SCOPE,...] [teams=TEAM,...]``. A line with no ``scopes=`` may do
everything, as every token could before scopes existed. Scopes:

- ``nodes``: push node samples (exporters);
- ``jobs``: register, report, end jobs, post their events (job wrappers); with ``teams=``, only jobs of those teams;
- ``scheduler``: put a scheduler's whole view of its queue (``mfumon scheduler``), which creates and ends the jobs of
  every team, so a token limited to teams cannot have it;
- ``read``: read ``/v1/*`` and ``/metrics`` when ``MFUMON_READ_REQUIRES_TOKEN`` is on (Grafana, Prometheus);
- ``baselines``: pin and reset workload baselines (``PUT``/``DELETE /v1/baselines/{signature}``); a baseline is shared
  by every team that runs the workload, so a token limited to teams cannot have it;
- ``remediate``: record what ``mfumon remediate`` did, would do, or was stopped from doing to a node
  (``POST /v1/remediations``); the drain list it reads is a read like any other, so a token limited to teams cannot
  have it;
- ``profile``: ask a running job for a profile (``POST /v1/jobs/{id}/profile``); the job's own summaries come in with
  ``jobs``. With ``teams=`` (beside ``jobs``), only jobs of those teams.
- ``prices``: set the price list (``PUT /v1/prices``) that every team's cost is computed with, so a token limited to
  teams cannot have it.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mfumon.api.errors import ForbiddenError, InsecureConfigError, TokenConfigError

SCOPES: tuple[str, ...] = ("nodes", "jobs", "scheduler", "read", "baselines", "remediate", "profile", "prices")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: a token's name, what it may do, and for job writes which teams (None: any)."""

    name: str
    scopes: frozenset[str]
    teams: frozenset[str] | None = None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes

    def job_team(self, job_id: str, requested: str | None, current: str | None = None, *, exists: bool) -> str | None:
        """The team a job write leaves the job in, or :class:`ForbiddenError`.

        A team-scoped token touches only jobs of its teams and moves them only among its teams; a job it creates
        without naming a team gets the token's team when it has exactly one.
        """
        if self.teams is None:
            return requested
        allowed = ", ".join(sorted(self.teams))
        if exists and current not in self.teams:
            owner = f"team {current!r}" if current else "no team"
            raise ForbiddenError(f"token {self.name!r} writes jobs of team(s) {allowed}; job {job_id!r} is of {owner}")
        team = requested or current
        if team is None:
            if len(self.teams) == 1:
                return next(iter(self.teams))
            raise ForbiddenError(f"token {self.name!r} writes jobs of several teams ({allowed}): name the job's team")
        if team not in self.teams:
            raise ForbiddenError(f"token {self.name!r} writes jobs of team(s) {allowed}, not of team {team!r}")
        return team


ANONYMOUS = Principal("anonymous", frozenset(SCOPES))
"""The principal of every request while no token is configured (loopback only)."""


@dataclass(frozen=True, slots=True)
class Token:
    principal: Principal
    secret: bytes


def parse_token_line(line: str, default_name: str) -> Token | None:
    """One line of a token file (or one entry of ``MFUMON_INGEST_TOKENS``); None for blanks and comments."""
    fields = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
    if not fields:
        return None
    secret, options = fields[0], fields[1:]
    name, scopes, teams = default_name, set(SCOPES), None
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not value:
            raise TokenConfigError(f"token {default_name}: expected name=, scopes= or teams=, got {option!r}")
        items = {v for v in value.split(",") if v}
        if key == "name":
            if not _NAME.match(value):
                raise TokenConfigError(f"token {default_name}: name {value!r} must match {_NAME.pattern}")
            name = value
        elif key == "scopes":
            unknown = items - set(SCOPES)
            if unknown:
                raise TokenConfigError(f"token {default_name}: unknown scope(s) {sorted(unknown)}; known: {SCOPES}")
            scopes = items
        elif key == "teams":
            teams = frozenset(items)
        else:
            raise TokenConfigError(f"token {default_name}: unknown option {key!r} (name=, scopes=, teams=)")
    if teams is not None and "jobs" not in scopes:
        raise TokenConfigError(f"token {name}: teams= limits job writes, but the token has no 'jobs' scope")
    if teams is not None and "scheduler" in scopes:
        raise TokenConfigError(f"token {name}: a scheduler sync writes every team's jobs; it cannot have teams=")
    if teams is not None and "baselines" in scopes:
        raise TokenConfigError(f"token {name}: a baseline is shared by every team; a token with teams= cannot pin one")
    if teams is not None and "remediate" in scopes:
        raise TokenConfigError(f"token {name}: remediation acts on nodes of every team; it cannot have teams=")
    if teams is not None and "prices" in scopes:
        raise TokenConfigError(f"token {name}: prices apply to every team's cost; a token with teams= cannot set them")
    return Token(Principal(name, frozenset(scopes), teams), secret.encode())


def parse_tokens(env_entries: Iterable[str], file_lines: Iterable[str]) -> list[Token]:
    """Tokens from the environment (comma-separated entries, named ``env-N``) and the file (``line-N``)."""
    tokens = [t for i, e in enumerate(env_entries, 1) if (t := parse_token_line(e, f"env-{i}"))]
    tokens += [t for i, line in enumerate(file_lines, 1) if (t := parse_token_line(line, f"line-{i}"))]
    names = [t.principal.name for t in tokens]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TokenConfigError(f"token names must be unique: {duplicates}")
    return tokens


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


MIN_TOKEN_CHARS = 16
"""The shortest token accepted beyond loopback; ``secrets.token_urlsafe(24)`` makes 32 characters (192 bits)."""
MIN_TOKEN_DISTINCT_CHARS = 8
"""Fewer distinct characters than this (``aaaa...``, ``1111...``) is a placeholder, not a secret."""


def weak_tokens(tokens: list[Token]) -> list[str]:
    """Names of the tokens too short or too repetitive to guard a network port."""
    return [
        t.principal.name
        for t in tokens
        if len(t.secret) < MIN_TOKEN_CHARS or len(set(t.secret)) < MIN_TOKEN_DISTINCT_CHARS
    ]


def check_startup_security(host: str, tokens: list[Token], allow_insecure: bool) -> None:
    """Refuse to listen beyond loopback without ingest tokens, or with a weak one, unless explicitly allowed."""
    if allow_insecure or is_loopback(host):
        return
    if not tokens:
        raise InsecureConfigError(
            f"refusing to listen on {host!r} without ingest tokens: set MFUMON_INGEST_TOKENS or "
            "MFUMON_INGEST_TOKENS_FILE, or pass --insecure (MFUMON_ALLOW_INSECURE=true) to accept unauthenticated "
            "pushes"
        )
    if weak := weak_tokens(tokens):
        raise InsecureConfigError(
            f"refusing to listen on {host!r}: token(s) {', '.join(weak)} have fewer than {MIN_TOKEN_CHARS} characters "
            f"or fewer than {MIN_TOKEN_DISTINCT_CHARS} distinct ones; make one with "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )


class TokenVerifier:
    """Maps ``Authorization: Bearer <token>`` headers to the principal of the configured token."""

    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens

    @property
    def required(self) -> bool:
        return bool(self._tokens)

    @property
    def names(self) -> list[str]:
        return [t.principal.name for t in self._tokens]

    def principal(self, authorization: str | None) -> Principal | None:
        """The token's principal (:data:`ANONYMOUS` while auth is off), or None for a missing or wrong token.

        Every configured token is compared, in constant time, whichever matches.
        """
        if not self._tokens:
            return ANONYMOUS
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        presented = authorization[7:].strip().encode()
        found = None
        for token in self._tokens:
            if hmac.compare_digest(presented, token.secret):
                found = token.principal
        return found

    def verify(self, authorization: str | None) -> bool:
        """True when auth is off, or the header carries one of the tokens."""
        return self.principal(authorization) is not None


def granted(state: dict[str, Any], authorization: str | None, verifier: TokenVerifier, scope: str) -> Principal | None:
    """The principal of a request if its token has ``scope``: the one admission kept in the request's ``state``
    (:mod:`mfumon.api.server.admission`), else the token of its ``Authorization`` value (anonymous while tokens are
    off); kept in ``state`` for the write audit. None, with nothing counted or raised, when it lacks ``scope``."""
    principal = state.get("principal")
    if principal is None:
        principal = verifier.principal(authorization)
    if principal is None or not principal.allows(scope):
        return None
    state["principal"] = principal
    return principal
