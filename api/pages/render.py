"""The Jinja2 environment of the pages: templates shipped in the package, HTML autoescaped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse

from mfumon.api.pages import fmt

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"

_ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    undefined=StrictUndefined,  # a misspelt name fails the page (and its test), never prints an empty cell
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.globals["fmt"] = fmt


def render(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """``template`` rendered with ``context`` as an HTML response."""
    return HTMLResponse(_ENV.get_template(template).render(**context), status_code=status)
