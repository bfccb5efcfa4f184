"""vLLM: the engine's periodic stats line, and the summary lines of its benchmark scripts. All are inference.

Engine (``vllm/v1/metrics/loggers.py`` ``LoggingStatLogger``; V0: ``vllm/engine/metrics.py``), every 5-10 s::

    INFO 05-01 12:00:00 [loggers.py:116] Engine 000: Avg prompt throughput: 1024.3 tokens/s, Avg generation
     throughput: 512.7 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.2%, ...

Prompt + generation tokens/s, summed over engines (data-parallel engines print one line each).

``benchmarks/benchmark_throughput.py`` / ``vllm bench throughput`` (older releases: ``..., 5678.90 tokens/s``)::

    Throughput: 12.34 requests/s, 5678.90 total tokens/s, 1234.56 output tokens/s

``benchmarks/benchmark_serving.py`` / ``vllm bench serve`` (the server's throughput seen by the client)::

    Total Token throughput (tok/s):          25393.81
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_ENGINE = re.compile(
    r"(?:Engine (?P<engine>\d+): )?Avg prompt throughput:\s*(?P<prompt>" + NUMBER + r") tokens/s, "
    r"Avg generation throughput:\s*(?P<gen>" + NUMBER + ") tokens/s"
)
_THROUGHPUT = re.compile(r"^Throughput: " + NUMBER + r" requests/s, (?P<total>" + NUMBER + r") (?:total )?tokens/s")
_SERVING = re.compile(r"^Total Token throughput \(tok/s\):\s+(?P<total>" + NUMBER + ")", re.IGNORECASE)


def _engine(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    rate = to_number(match["prompt"]) + to_number(match["gen"])
    return Observation("vllm", rate, source=f"engine{match['engine'] or ''}", kind="inference")


def _benchmark(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    return Observation("vllm_bench", to_number(match["total"]), kind="inference")


FORMATS = (
    Format(
        "vllm",
        "vLLM",
        "Avg prompt throughput",
        _ENGINE,
        _engine,
        (
            Declaration(
                trainer="vLLM engine",
                versions="V1 (`vllm/v1/metrics/loggers.py`); 0.5-era V0",
                example=(
                    "Engine 000: Avg prompt throughput: 1024.3 tokens/s, Avg generation throughput: 512.7 tokens/s, ..."
                ),
                key="Avg prompt throughput, Avg generation throughput",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends="prompt + generation, summed over engines; switches the job to `--kind inference` unless given",
            ),
        ),
    ),
    Format(
        "vllm_bench",
        "vLLM benchmark",
        "requests/s, ",
        _THROUGHPUT,
        _benchmark,
        (
            Declaration(
                trainer="vLLM benchmarks",
                versions="`vllm bench throughput` (0.4 and current)",
                example="Throughput: 12.35 requests/s, 5678.90 total tokens/s, 1234.57 output tokens/s",
                key="total tokens/s",
                figure="tokens/s",
                scope="job",
                timing="run",
                sends="total tokens/s, inference",
            ),
        ),
    ),
    Format(
        "vllm_bench",
        "vLLM benchmark",
        "oken throughput (tok/s):",
        _SERVING,
        _benchmark,
        (
            Declaration(
                trainer="vLLM benchmarks",
                versions="`vllm bench serve`",
                example="Total Token throughput (tok/s):  25393.81",
                key="Total Token throughput (tok/s)",
                figure="tokens/s",
                scope="job",
                timing="run",
                sends="total tokens/s, inference",
            ),
        ),
    ),
)
