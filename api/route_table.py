"""The route table: what each write route needs at the door, declared once, next to the route.

A write route declares its :class:`RouteSpec` with :func:`route_spec` under its router decorator::

    @router.post("/{job_id}/end", response_model=JobPublic)
    @route_spec("jobs", endpoint="job_end")
    def end_job(...): ...

The door (:mod:`mfumon.api.server.admission`, :mod:`mfumon.api.server.door`) decides on a request's head alone,
before the router runs; :meth:`RouteTable.compile` builds its matcher once, at start-up, from the app's own routes
(their ``path_regex`` and ``methods``): per method, one compiled regex whose alternatives are the routes' regexes in
the router's order, so the first route that matches is the router's. Reads (:data:`READ_METHODS`) are not in it:
they all need the ``read`` scope (when configured) and the default body limit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that read: never a route's own scope (``read`` when reads need a token), never ingest."""

NODE_SAMPLES = "node_samples"
"""The node push's endpoint label (the in-place path takes only it)."""

BodyLimit = Literal["MAX_BODY_BYTES", "MAX_SCHEDULER_BODY_BYTES"]


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """What a write route needs at the door, before its body is read."""

    scope: str
    """The token scope it needs."""
    endpoint: str | None = None
    """Its ingest endpoint label (metrics, audit, refusals counted); None: ``METHOD /route/{template}``."""
    max_body_bytes: BodyLimit = "MAX_BODY_BYTES"
    """The setting that bounds its body."""


_SPEC_ATTR = "__mfumon_route_spec__"
_F = TypeVar("_F", bound=Callable[..., Any])


def route_spec(
    scope: str, *, endpoint: str | None = None, max_body_bytes: BodyLimit = "MAX_BODY_BYTES"
) -> Callable[[_F], _F]:
    """Declare a write route's :class:`RouteSpec` (apply it under ``@router.post(...)``)."""
    spec = RouteSpec(scope, endpoint, max_body_bytes)

    def record(function: _F) -> _F:
        setattr(function, _SPEC_ATTR, spec)
        return function

    return record


def spec_of(endpoint: Callable[..., Any] | None) -> RouteSpec | None:
    """The spec a route's endpoint declared, or None."""
    spec = getattr(endpoint, _SPEC_ATTR, None)
    return spec if isinstance(spec, RouteSpec) else None


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


class RouteTable:
    """Method and path -> the :class:`RouteSpec` of the route the router would take, without running it."""

    __slots__ = ("_by_method", "specs")

    def __init__(self, routes: Iterable[tuple[str, str, RouteSpec]] = ()) -> None:
        """``routes``: (method, path regex, spec) in the router's order."""
        grouped: dict[str, list[tuple[str, RouteSpec]]] = {}
        for method, pattern, spec in routes:
            grouped.setdefault(method, []).append((pattern, spec))
        self._by_method: dict[str, tuple[re.Pattern[str], dict[int, RouteSpec]]] = {}
        self.specs: tuple[RouteSpec, ...] = tuple(spec for entries in grouped.values() for _, spec in entries)
        for method, entries in grouped.items():
            alternatives, specs, group = [], {}, 1
            for pattern, spec in entries:
                inner = _NAMED_GROUP.sub("(", pattern)  # named groups may repeat across routes: numbered instead
                alternatives.append(f"({inner})")
                specs[group] = spec  # the outer group closes last: it is the match's ``lastindex``
                group += 1 + re.compile(inner).groups
            self._by_method[method] = (re.compile("|".join(alternatives)), specs)

    @classmethod
    def compile(cls, routes: Iterable[BaseRoute]) -> RouteTable:
        """The table of an app's routes (``app.routes``, included routers' too). Every write route must declare a
        spec: one that does not is a ``ValueError`` here, at start-up."""
        entries = []
        for route in iter_route_contexts(list(routes)):
            regex: re.Pattern[str] | None = getattr(route, "path_regex", None)
            methods: set[str] | None = route.methods
            if regex is None or not methods or methods <= READ_METHODS:
                continue
            spec = spec_of(route.endpoint)
            if spec is None:
                raise ValueError(f"{sorted(methods - READ_METHODS)} {route.path} declares no RouteSpec (route_spec)")
            entries += [(method, regex.pattern, spec) for method in sorted(methods - READ_METHODS)]
        return cls(entries)

    def match(self, method: str, path: str) -> RouteSpec | None:
        """The spec of the first route whose regex and method match (the router's choice), or None."""
        entry = self._by_method.get(method)
        if entry is None:
            return None
        matched = entry[0].match(path)
        return None if matched is None else entry[1][matched.lastindex or 0]


_installed = RouteTable()


def install(routes: Iterable[BaseRoute]) -> RouteTable:
    """Compile the app's table and make it the one :func:`endpoint_of` answers from (every app has the same
    routes: the last one compiled serves)."""
    global _installed
    _installed = RouteTable.compile(routes)
    return _installed


def installed() -> RouteTable:
    """The table :func:`install` compiled last (empty before)."""
    return _installed


def endpoint_of(method: str, path: str) -> str | None:
    """The ingest endpoint a request targets, for the ``endpoint`` label of the ingest counter."""
    spec = _installed.match(method, path)
    return None if spec is None else spec.endpoint
