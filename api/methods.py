"""A 405 lists every method of the path in ``Allow`` (RFC 9110 section 15.5.6), for every path.

Starlette's router hands a request whose path matches but whose method does not to the first route with that path,
which answers 405 with only its own methods: ``OPTIONS /v1/jobs/j`` said ``Allow: PUT`` though ``GET`` works too.
The 405 handler (:func:`mfumon.api.handlers.method_not_allowed`) answers again with the methods of every route whose
path matches the request's. Only 405s pay.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.routing import iter_route_contexts
from starlette.routing import get_route_path


def allowed_methods(request: Request) -> list[str]:
    """The methods of every route of the app (included routers' too) whose path matches the request's, sorted."""
    path = get_route_path(request.scope)
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(path):
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)
