"""The HTML side of the aggregator: server-rendered pages (``/``, ``/ui``) with inline SVG charts and one small
stylesheet, so they work on an air-gapped cluster and without JavaScript.

Each module gathers one page's numbers through the services and the state (never storage directly); the templates
only lay them out, with :mod:`mfumon.api.pages.fmt` printing every value with its unit, or ``—`` and the reason.
"""

from __future__ import annotations

from mfumon.api.pages.render import STATIC_DIR, render

__all__ = ["STATIC_DIR", "render"]
