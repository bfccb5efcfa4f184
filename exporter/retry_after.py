"""The ``Retry-After`` an aggregator sends with 503 (overloaded, database behind) or 429: how long to stay away.

Shared by the node exporter and the job reporter, which both honour it: never try again sooner, and spread the
return over half as long again, so that a fleet refused at the same moment does not come back in lockstep.
"""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime

__all__ = ["retry_after_seconds", "spread"]


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date); None when absent or invalid."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def spread(seconds: float, rng: random.Random) -> float:
    """``seconds`` to 1.5 x ``seconds``, uniformly."""
    return seconds + rng.uniform(0.0, seconds / 2)
