"""Where a serving job's GPU-hours go: its allocated GPU-seconds split into categories that mean something for
serving, summing to the same total as the job's (training-shaped) waterfall.

The job's ledger cuts time into tiles and splits each (:mod:`mfumon.api.accounting.ledger`). For a serving job its
start-up, failures and silences (``init``, ``stalled``, ``lost``...) are time the engine was **down**, and its
step time is the engine serving. That serving time is split here, per report:

- **idle**: the engine made no token with no request running or waiting (a whole report interval, the resolution
  of the engine's counters); TGI also says how long its forward passes ran, so the rest of a busy interval is idle.
- **prefill**, **decode**, **recompute**: the busy time in proportion to the time each phase's work needs at the
  hardware's limit: prefill at the dense peak (its MFU x the interval), decode at the memory bandwidth (its MBU x
  the interval; its MFU where MBU is unknown), and re-prefilling preempted requests (preemptions x the context of
  a sequence x FLOPs per token, at the peak). TGI times prefill and decode itself: its own split is used.
- **busy**: busy time whose phase split is unknown (no peak known for the job's GPUs).

**down** is what is left: the job's allocated GPU-seconds less the rest, so the categories always add up.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SERVING_CATEGORIES", "ServingTile", "serving_waterfall", "split_tile"]

SERVING_CATEGORIES: tuple[str, ...] = ("down", "idle", "prefill", "decode", "recompute", "busy")
METHOD = (
    "down: start-up, failures and silences; idle: report intervals with no token made and no request running or "
    "waiting (TGI: also the time outside its forward passes); busy time split by the time each phase's work "
    "needs at the hardware limit (prefill: MFU x interval; decode: MBU x interval; recompute: preemptions x "
    "context x FLOPs per token at the peak), or by TGI's own prefill and decode times"
)


@dataclass(frozen=True, slots=True)
class ServingTile:
    """One report's tile of a serving job, as the split needs it."""

    serving_gpu_seconds: float  # the tile's step time (the engine up and serving)
    stalled_gpu_seconds: float = 0.0  # time the ledger counted stalled because the report made no token
    no_requests: bool = False  # nothing running or waiting at the report (both known to be 0)
    interval_seconds: float | None = None
    prefill_busy_seconds: float | None = None  # TGI's own times
    decode_busy_seconds: float | None = None
    prefill_weight: float | None = None  # seconds of the interval each phase needs at the hardware limit
    decode_weight: float | None = None
    recompute_weight: float | None = None


def split_tile(tile: ServingTile) -> dict[str, float]:
    """The tile's serving categories other than ``down`` (GPU-seconds); what is not here is down."""
    out: dict[str, float] = {}
    if tile.stalled_gpu_seconds > 0 and tile.no_requests:
        out["idle"] = tile.stalled_gpu_seconds  # no token because nobody asked: idle, not stuck
    serving = tile.serving_gpu_seconds
    if serving <= 0:
        return out
    timed = tile.prefill_busy_seconds is not None and tile.decode_busy_seconds is not None
    if timed and tile.interval_seconds:
        prefill, decode = tile.prefill_busy_seconds or 0.0, tile.decode_busy_seconds or 0.0
        busy = min(1.0, (prefill + decode) / tile.interval_seconds)
        _add(out, "idle", serving * (1.0 - busy))
        if prefill + decode > 0:
            _add(out, "prefill", serving * busy * prefill / (prefill + decode))
            _add(out, "decode", serving * busy * decode / (prefill + decode))
        return out
    weights = {
        "prefill": tile.prefill_weight or 0.0,
        "decode": tile.decode_weight or 0.0,
        "recompute": tile.recompute_weight or 0.0,
    }
    total = sum(weights.values())
    if total <= 0:
        _add(out, "busy", serving)
        return out
    for category, weight in weights.items():
        _add(out, category, serving * weight / total)
    return out


def _add(out: dict[str, float], category: str, gpu_seconds: float) -> None:
    if gpu_seconds > 0:
        out[category] = out.get(category, 0.0) + gpu_seconds


def serving_waterfall(total_gpu_seconds: float, split: dict[str, float]) -> list[tuple[str, float]]:
    """The serving waterfall in category order: ``down`` is the total less the categories the reports placed."""
    placed = {c: split.get(c, 0.0) for c in SERVING_CATEGORIES if c != "down"}
    down = total_gpu_seconds - sum(placed.values())
    if down < 1e-9 * max(1.0, total_gpu_seconds):  # the float residue of a sum, not time the engine was down
        down = 0.0
    return [("down", down), *placed.items()]
