"""Serving jobs (kind ``inference``) as serving: SLO goodput from the engines' latency histograms, the serving
waterfall, and the per-report figures both rest on."""

from __future__ import annotations

from mfumon.api.serving.figures import ServingFigures, ServingWindow, figures_of, window_of
from mfumon.api.serving.slo import WINDOW_SECONDS, Goodput, SloCounts, Targets, goodput, resolve_targets
from mfumon.api.serving.waterfall import SERVING_CATEGORIES, ServingTile, serving_waterfall, split_tile

__all__ = [
    "SERVING_CATEGORIES",
    "WINDOW_SECONDS",
    "Goodput",
    "ServingFigures",
    "ServingTile",
    "ServingWindow",
    "SloCounts",
    "Targets",
    "figures_of",
    "goodput",
    "resolve_targets",
    "serving_waterfall",
    "split_tile",
    "window_of",
]
