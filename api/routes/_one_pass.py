"""Ingest bodies parsed and validated in one pass, by pydantic's own JSON parser.

FastAPI reads a JSON body with ``json.loads`` and then validates the Python objects against the route's body
model: two passes over every push. Here the request's ``json()`` returns the model validated straight from the
bytes (one pass, about half the work), and FastAPI takes a model instance as it is. A body that does not
validate comes back as plain JSON instead, so FastAPI validates it again and words the errors as it always does;
invalid JSON fails exactly as before.

The node push, nearly every request, mostly never gets here: :mod:`mfumon.api.server.fast_door` answers a
well-formed one ahead of the app's middleware, validating it in one pass the same way; what it declines comes through
the whole stack to this route.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.types import Receive, Scope


class OnePassJSONRoute(APIRoute):
    """An ``APIRoute`` whose JSON body model (if any) is validated from the raw bytes."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        body_field = getattr(self, "body_field", None)
        model = body_field.field_info.annotation if body_field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return handler
        body_model: type[BaseModel] = model

        async def one_pass(request: Request) -> Response:
            return await handler(_OnePassRequest(request.scope, request.receive, body_model))

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
