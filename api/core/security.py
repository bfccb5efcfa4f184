"""Ingest authentication: bearer tokens compared in constant time, and the refuse-to-start rule.

The rule: a process listening beyond loopback must have ingest tokens, unless the operator explicitly says
``--insecure``. Tokens are never logged; only their count is.
"""

from __future__ import annotations

import hmac
import ipaddress


class InsecureConfigError(Exception):
    """Raised at startup when the service would accept unauthenticated ingest from the network."""


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_startup_security(host: str, tokens: list[str], allow_insecure: bool) -> None:
    """Refuse to listen beyond loopback without ingest tokens, unless explicitly allowed."""
    if tokens or allow_insecure or is_loopback(host):
        return
    raise InsecureConfigError(
        f"refusing to listen on {host!r} without ingest tokens: set MFUMON_INGEST_TOKENS or "
        "MFUMON_INGEST_TOKENS_FILE, or pass --insecure (MFUMON_ALLOW_INSECURE=true) to accept unauthenticated pushes"
    )


class TokenVerifier:
    """Checks ``Authorization: Bearer <token>`` headers against the configured tokens."""

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = [t.encode() for t in tokens]

    @property
    def required(self) -> bool:
        return bool(self._tokens)

    def verify(self, authorization: str | None) -> bool:
        """True when auth is off, or the header carries one of the tokens (every token is compared)."""
        if not self._tokens:
            return True
        if not authorization or not authorization.lower().startswith("bearer "):
            return False
        presented = authorization[7:].strip().encode()
        matched = False
        for token in self._tokens:
            matched |= hmac.compare_digest(presented, token)
        return matched
