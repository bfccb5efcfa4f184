"""Ingest bodies parsed and validated in one pass, by pydantic's own JSON parser; and a fast path for the hottest
route.

FastAPI reads a JSON body with ``json.loads`` and then validates the Python objects against the route's body
model: two passes over every push. Here the request's ``json()`` returns the model validated straight from the
bytes (one pass, about half the work), and FastAPI takes a model instance as it is. A body that does not
validate comes back as plain JSON instead, so FastAPI validates it again and words the errors as it always does;
invalid JSON fails exactly as before.

:class:`FastPath` wraps the app's router (inside every middleware and the exception handlers) and offers each
request of one route to a hand-written function first, which answers a well-formed one without the router's
matching of every route nor FastAPI's dependency solving, parameter extraction and content negotiation (about a
fifth of a node push's CPU), or returns None; the request then goes on as if the fast path had not looked at it
(its body handed on as received), so every error, status and count comes from the one place it always came from,
and the OpenAPI document from the declared route. An error the function raises once it has taken the request
(a limit, the durability bound) is answered by the app's exception handlers, as from the route.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Answer = Callable[[Request], Awaitable[Response | None]]
"""Answers a well-formed request, or returns None to leave it to the app; must not raise for bad input."""


class FastPath:
    """Offers each ``method`` request whose path matches ``path`` (one group: the path parameter ``param``) and
    whose body came whole in one message to ``answer`` first, as a request whose ``json()`` is ``model``
    validated from the raw bytes; what it declines goes on to ``app`` with its body as received. Installed by
    :func:`install` around an app's router."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        method: str,
        path: re.Pattern[str],
        param: str,
        model: type[BaseModel],
        answer: Answer,
    ) -> None:
        self.app = app
        self.method = method
        self.path = path
        self.param = param
        self.model = model
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = None
        if scope["type"] == "http" and scope["method"] == self.method:
            match = self.path.fullmatch(scope["path"])
        if match is None:
            await self.app(scope, receive, send)
            return
        message = await receive()
        if message["type"] != "http.request" or message.get("more_body", False):
            await self.app(scope, _replaying(message, receive), send)
            return
        scope["path_params"] = {self.param: match.group(1)}  # what the router sets too, should this decline
        request = _OnePassRequest(scope, receive, self.model)
        request._body = message.get("body", b"")
        response = await self.answer(request)
        if response is None:
            await self.app(scope, _replaying(message, receive), send)
            return
        await response(scope, receive, send)


def install(app: FastAPI, **fast_path: Any) -> None:
    """Put a :class:`FastPath` around ``app``'s router: inside its middleware and exception handlers, before the
    router matches the request against every route."""
    app.router.middleware_stack = FastPath(app.router.middleware_stack, **fast_path)


def _replaying(first: Message, receive: Receive) -> Receive:
    """``receive`` with ``first``, already received, handed out again first."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


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
