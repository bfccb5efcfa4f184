"""CPU to decode one node push: the pydantic model against the fast decoder derived from it.

    .venv/bin/python bench/decode_push.py [--nodes 2000] [--rounds 7]

Bodies: ``bench/aggregator_scale.py``'s pushes (8 GPUs, the counters the bench sends), one per node, and the
exporter's own body with every counter, InfiniBand ports and a shared GPU (``tests/api/openapi/test_fast_decoder``).
Rounds alternate; per push, the fastest round of each (the least disturbed on a shared machine) and the median of
the rounds' ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aggregator_scale import node_sample

from mfumon.api.schemas.nodes import PUSH_DECODER, NodeSampleCreate
from tests.api.openapi.test_fast_decoder import real_pushes


def per_push(decode: Callable[[bytes], object], bodies: list[bytes]) -> float:
    started = time.process_time()
    for body in bodies:
        if decode(body) is None:
            raise RuntimeError("a bench body was not taken")
    return (time.process_time() - started) / len(bodies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    exporter_body = real_pushes()[0]
    kinds = {
        "bench push (8 GPUs, 11 counters)": [json.dumps(node_sample(n, 1.7e9)).encode() for n in range(args.nodes)],
        "exporter push (8 GPUs, 31 counters, 4 ports)": [exporter_body] * args.nodes,
    }
    for kind, bodies in kinds.items():
        model, fast = [], []
        for _ in range(args.rounds):
            model.append(per_push(NodeSampleCreate.model_validate_json, bodies))
            fast.append(per_push(PUSH_DECODER.decode, bodies))
        ratios = [m / f for m, f in zip(model, fast, strict=True)]
        print(
            f"{kind}: model {min(model) * 1e6:.1f} us, fast decoder {min(fast) * 1e6:.1f} us a push "
            f"(fastest rounds: {min(model) / min(fast):.2f}x; median of rounds {statistics.median(ratios):.2f}x)"
        )


if __name__ == "__main__":
    main()
