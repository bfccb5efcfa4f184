"""The bench's baseline: the aggregator's web stack doing nothing but parse the node-sample body.

Same route, same FastAPI, same ASGI server and settings (``mfumon.api.server.run_app``), one process: what ``mfumon
serve`` would reach if storing, aggregating and rendering cost nothing.

    .venv/bin/python bench/bare_app.py --port 8001 [--validate]

``--validate`` parses into the aggregator's own request model (``NodeSampleCreate``) instead of plain JSON.
``--floor`` serves :func:`floor_app` instead: no FastAPI at all, the ASGI server's own cost of a request.
"""

from __future__ import annotations

import argparse
from typing import Any

from fastapi import Body, FastAPI
from starlette.types import Receive, Scope, Send

from mfumon.api.core.config import Settings
from mfumon.api.schemas.nodes import NodeSampleCreate
from mfumon.api.server import run_app


def bare_app(validate: bool) -> FastAPI:
    app = FastAPI(title="bare baseline")
    if validate:

        @app.post("/v1/nodes/{node}/samples")
        async def create_validated(node: str, body: NodeSampleCreate) -> dict[str, Any]:
            return {"accepted": len(body.gpus), "applied": True}

    else:

        @app.post("/v1/nodes/{node}/samples")
        async def create_sample(node: str, body: dict[str, Any] = Body()) -> dict[str, Any]:  # noqa: B008
            return {"accepted": len(body["gpus"]), "applied": True}

    @app.get("/healthz")
    async def read_health() -> dict[str, str]:
        return {"status": "ok"}

    return app


_FLOOR_ANSWER = b'{"accepted":8,"applied":true}'
_FLOOR_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(_FLOOR_ANSWER)).encode())]


async def floor_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The floor under both apps: an ASGI app that reads a request's body, parses nothing and answers what a push
    is answered (any path, any method: ``GET /healthz`` too). What the ASGI server alone (uvicorn's h11 protocol,
    ``run_app``'s connection guard) costs a push, so the bench can say how much of each app's CPU is its own."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _FLOOR_HEADERS})
    await send({"type": "http.response.body", "body": _FLOOR_ANSWER})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--floor", action="store_true")
    args = parser.parse_args()
    app = floor_app if args.floor else bare_app(args.validate)
    run_app(app, Settings(PORT=args.port, LOG_LEVEL="WARNING"))


if __name__ == "__main__":
    main()
