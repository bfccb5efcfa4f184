"""The OpenAPI document states every status the service can answer, for every route, including routes added later.

FastAPI documents 200 and 422 by itself; the other answers come from middleware, dependencies and exception
handlers that it cannot see. They are added here by rule (what kind of operation it is), so a new route is
documented without anyone remembering to; ``tests/api/openapi/test_conformance.py`` runs schemathesis to check.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from mfumon.api.schemas.baselines import signature_pattern

_MESSAGE = {"$ref": "#/components/schemas/ErrorMessage"}
_MESSAGE_SCHEMA = {
    "title": "ErrorMessage",
    "type": "object",
    "properties": {"detail": {"type": "string", "title": "Detail"}},
    "required": ["detail"],
}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}}

# status -> (description, the operations it applies to)
_WRITE = "write"
_ANY = "any"
_BY_ID = "by_id"
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("The body is not JSON text (not UTF-8, for instance).", _WRITE),
    401: (
        "Missing or wrong token: `Authorization: Bearer <token>` (reads need one only with "
        "MFUMON_READ_REQUIRES_TOKEN).",
        _ANY,
    ),
    403: ("The token lacks the scope this needs, or the job belongs to a team the token does not write for.", _ANY),
    404: ("No such resource (or a node silent past the node TTL).", _BY_ID),
    408: ("The request body did not arrive within MFUMON_BODY_TIMEOUT_SECONDS.", _WRITE),
    413: ("The body is larger than MFUMON_MAX_BODY_BYTES.", _WRITE),
    429: ("A limit is reached (nodes, GPUs, active jobs, in-flight writes): retry after Retry-After.", _WRITE),
    503: ("The database is unavailable, or the server is busy (every read slot taken): retry later.", _ANY),
}


def answer(status: int, description: str) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route for an error only it answers (``{"detail": ...}``), beside those added by rule."""
    return {status: {"description": description, "content": {"application/json": {"schema": _MESSAGE}}}}


_VALIDATION = {"$ref": "#/components/schemas/HTTPValidationError"}
_INVALID = "Validation error: `detail[].field` names each field at fault; nothing was changed."


def invalid_when(*rules: str) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route whose 422 also answers rules JSON Schema cannot state (one parameter against
    another, a bound from the server's clock): the document says them in words, beside the schema's own rules."""
    listed = "".join(f"\n- {rule}" for rule in rules)
    return {422: {"description": f"{_INVALID} Besides what the schema states, also when:{listed}"}}


def _applies(status: int, kind: str, method: str, path: str) -> bool:
    if path == "/healthz":  # answers 200 whatever happens
        return False
    if path == "/readyz":  # no token needed; 503 while the database is down
        return status == 503
    if kind == _WRITE:
        return method in ("post", "put", "patch", "delete")
    if kind == _BY_ID:
        return "{" in path
    return True


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the error answers, the bearer scheme and the text body of ``/metrics`` to an OpenAPI document."""
    components = schema.setdefault("components", {})
    components.setdefault("schemas", {})["ErrorMessage"] = _MESSAGE_SCHEMA
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "A token from MFUMON_INGEST_TOKENS(_FILE); its scopes decide what it may do.",
    }
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status, (description, kind) in _ERRORS.items():
                if str(status) in responses or not _applies(status, kind, method, path):
                    continue
                content = {"application/json": {"schema": _MESSAGE}}
                response: dict[str, Any] = {"description": description, "content": content}
                if status in (429, 503):
                    response["headers"] = _RETRY_AFTER
                responses[str(status)] = response
            if method in ("post", "put", "patch", "delete"):
                operation["security"] = [{"bearer": []}]
    for operations in schema.get("paths", {}).values():  # 422s described by invalid_when: the usual body
        for operation in operations.values():
            invalid = operation.get("responses", {}).get("422")
            if invalid is not None and not invalid.get("content", {}).get("application/json", {}).get("schema"):
                invalid["content"] = {"application/json": {"schema": _VALIDATION}}
    metrics = schema.get("paths", {}).get("/metrics", {}).get("get")
    if metrics is not None:
        metrics["responses"]["200"]["content"] = {"text/plain": {"schema": {"type": "string"}}}
    return schema


def _this_server(schema: dict[str, Any], app: FastAPI) -> dict[str, Any]:
    """The bounds this server's settings and peak table set, where the schema's own are looser: GPUs per push
    (``MFUMON_MAX_GPUS_PER_NODE``), and the device part of a signature a pin names (a key of the peak table)."""
    ctx = getattr(app.state, "ctx", None)
    if ctx is None:  # not started: the static document
        return schema
    components = schema.get("components", {}).get("schemas", {})
    gpus = components.get("NodeSampleCreate", {}).get("properties", {}).get("gpus")
    if gpus is not None:
        gpus["maxItems"] = min(gpus.get("maxItems", ctx.settings.MAX_GPUS_PER_NODE), ctx.settings.MAX_GPUS_PER_NODE)
        gpus["description"] = f"{gpus.get('description', '')} (at most MFUMON_MAX_GPUS_PER_NODE)".lstrip()
    pin = schema.get("paths", {}).get("/v1/baselines/{signature}", {}).get("put")
    if pin is not None:
        keys = "|".join(spec.key.replace(".", "\\.") for spec in ctx.peak_table.specs)
        for parameter in pin.get("parameters", []):
            if parameter.get("name") == "signature" and parameter.get("in") == "path":
                parameter["schema"] = {**parameter["schema"], "pattern": signature_pattern(keys)}
                parameter["description"] = (
                    f"{parameter.get('description', '')} A pin names a device of this server's peak table.".lstrip()
                )
    return schema


def install(app: FastAPI) -> None:
    """Serve the completed document at ``/openapi.json`` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = _this_server(document_errors(schema), app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
