"""Ingest bodies parsed and validated in one pass, by pydantic's own JSON parser; and a fast path for the hottest
route.

FastAPI reads a JSON body with ``json.loads`` and then validates the Python objects against the route's body
model: two passes over every push. Here the request's ``json()`` returns the model validated straight from the
bytes (one pass, about half the work), and FastAPI takes a model instance as it is. A body that does not
validate comes back as plain JSON instead, so FastAPI validates it again and words the errors as it always does;
invalid JSON fails exactly as before.

An endpoint marked with :func:`fast_path` is first offered each request through a hand-written function that
answers a well-formed one without FastAPI's request handling (dependency solving, parameter extraction, content
negotiation: about a fifth of a node push's cost), or returns None; FastAPI's handler then takes the request as
if the fast path had not looked at it (the body read and validated once, for both), so every error, status and
count comes from the one place it always came from.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.types import Receive, Scope

FastPath = Callable[[Request], Awaitable[Response | None]]
"""Answers a well-formed request, or returns None to leave it to FastAPI's handler; must not raise for bad input."""

_Endpoint = TypeVar("_Endpoint", bound=Callable[..., Any])


def fast_path(fast: FastPath) -> Callable[[_Endpoint], _Endpoint]:
    """Mark an endpoint of a :class:`OnePassJSONRoute` router: ``fast`` is offered each request first."""

    def mark(endpoint: _Endpoint) -> _Endpoint:
        endpoint.fast_path = fast  # type: ignore[attr-defined]
        return endpoint

    return mark


class OnePassJSONRoute(APIRoute):
    """An ``APIRoute`` whose JSON body model (if any) is validated from the raw bytes, and whose endpoint may have a
    :func:`fast_path`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        body_field = getattr(self, "body_field", None)
        model = body_field.field_info.annotation if body_field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return handler
        body_model: type[BaseModel] = model
        fast: FastPath | None = getattr(self.endpoint, "fast_path", None)

        async def one_pass(request: Request) -> Response:
            request = _OnePassRequest(request.scope, request.receive, body_model)
            if fast is not None and (response := await fast(request)) is not None:
                return response
            return await handler(request)

        return one_pass


class _OnePassRequest(Request):
    def __init__(self, scope: Scope, receive: Receive, model: type[BaseModel]) -> None:
        super().__init__(scope, receive)
        self._model = model

    async def json(self) -> Any:
        if not hasattr(self, "_parsed"):
            body = await self.body()
            try:
                self._parsed: Any = self._model.model_validate_json(body)
            except ValidationError:
                self._parsed = json.loads(body)  # FastAPI validates it again, for its own error format
        return self._parsed
