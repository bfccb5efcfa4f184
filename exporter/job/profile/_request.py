"""A profile request as the job side holds it, which ranks it names, and how rank 0 passes it to the others.

Only rank 0 reports, so only rank 0 reads the request in its report's answer; it writes the request to the store of
the job's default process group (the ``torch.distributed`` rendezvous store every rank already talks to), which the
other ranks poll from a background thread. No rank opens a port; a job without ``torch.distributed`` profiles rank 0.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("mfumon.exporter.job.profile")

SAMPLE_RANKS = 8
_STORE_KEY = "mfumon/profile_request"


@dataclass(frozen=True, slots=True)
class ProfileRequest:
    """``profile_request`` of a report's answer: profile ``steps`` steps on ``ranks``."""

    id: int
    steps: int
    ranks: str | tuple[int, ...]  # "all", "sample" or the ranks

    @classmethod
    def from_json(cls, raw: Any) -> ProfileRequest | None:
        """The request in an answer, or None (absent, or not one this reporter understands)."""
        if not isinstance(raw, Mapping):
            return None
        try:
            ranks = raw.get("ranks", "sample")
            chosen = ranks if ranks in ("all", "sample") else tuple(int(r) for r in ranks)
            return cls(int(raw["id"]), int(raw["steps"]), chosen)
        except (KeyError, TypeError, ValueError):
            return None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "steps": self.steps,
            "ranks": self.ranks if isinstance(self.ranks, str) else list(self.ranks),
        }

    def names(self, rank: int, world_size: int | None) -> bool:
        """True when ``rank`` is to be profiled."""
        if self.ranks == "all":
            return True
        if self.ranks == "sample":
            return rank in sample_ranks(world_size or 1)
        return rank in self.ranks


def sample_ranks(world_size: int, count: int = SAMPLE_RANKS) -> frozenset[int]:
    """Rank 0, the last rank and evenly spaced ranks between: at most ``count``."""
    if world_size <= count:
        return frozenset(range(world_size))
    last = world_size - 1
    return frozenset(round(i * last / (count - 1)) for i in range(count))


class StoreChannel:
    """The request on the default process group's store: rank 0 writes it, the other ranks read it."""

    def __init__(self, store: Any) -> None:
        self._store = store

    @classmethod
    def of_default_group(cls) -> StoreChannel | None:
        """The channel of the job's default process group, or None before ``init_process_group`` (or without torch)."""
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        try:
            dist = torch.distributed
            if not dist.is_available() or not dist.is_initialized():
                return None
            from torch.distributed.distributed_c10d import _get_default_store

            return cls(_get_default_store())
        except Exception:  # a torch without the store API: rank 0 alone is profiled
            logger.debug("mfumon profile: no process-group store", exc_info=True)
            return None

    def publish(self, request: ProfileRequest) -> None:
        self._store.set(_STORE_KEY, json.dumps(request.to_json()))

    def read(self) -> ProfileRequest | None:
        if not self._store.check([_STORE_KEY]):
            return None
        raw = self._store.get(_STORE_KEY)
        return ProfileRequest.from_json(json.loads(raw.decode() if isinstance(raw, bytes) else raw))
