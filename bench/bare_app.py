"""The bench's baseline: the aggregator's web stack doing nothing but parse the node-sample body.

Same route, same FastAPI, same ASGI server and settings (``mfumon.api.server.run_app``), one process: what ``mfumon
serve`` would reach if storing, aggregating and rendering cost nothing.

    .venv/bin/python bench/bare_app.py --port 8001 [--validate]

``--validate`` parses into the aggregator's own request model (``NodeSampleCreate``) instead of plain JSON.
"""

from __future__ import annotations

import argparse
from typing import Any

from fastapi import Body, FastAPI

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--validate", action="store_true")
    args = parser.parse_args()
    run_app(bare_app(args.validate), Settings(PORT=args.port, LOG_LEVEL="WARNING"))


if __name__ == "__main__":
    main()
