"""Colossal-AI: the end-of-run result of its ``examples/language`` benchmarks (a library, with no trainer log line).

``PerformanceEvaluator.on_fit_end`` (``examples/language/performance_evaluator.py``; ``examples/language/llama2/
performance_evaluator.py`` from 2023-08, 0b00def8) prints, once, on the master rank::

    num_samples: 48, dp_world_size: 32, flop: ..., avg_duration: 63.31409727947238, avg_throughput: 24.259999999999618
    Throughput: 24.26 samples/sec, TFLOPS per GPU: 167.40

(v2, 2024-03 on, 29695cf7: ``Throughput: {:.2f} samples/sec, TFLOPS per GPU by Megatron: {:.2f}, TFLOPS per GPU:
{:.2f}``). ``avg_throughput = num_samples x dp_world_size / avg_duration``: this rank's samples times the
data-parallel size over the step time averaged over all ranks, i.e. the **whole job's** samples/s, **averaged over
the run's measured steps** (the first ``ignore_steps`` left out). The benchmarks feed fixed-length samples
(``RandomDataset(..., max_length=args.max_length)``), so the job's tokens/s is samples/s x ``--max_length`` (``-l``,
4096 by default), given to wrap as ``--seq-len``.

The run's average is sent, once, as what it is (declared ``timing="run"``): these benchmarks print no other
throughput (their step lines carry only the loss), it is the figure the benchmark exists to measure, and it is
printed at the very end, so it never stands for a moment of the run. The ``avg_throughput`` of the line before is the
same figure unrounded and is not read (one figure, read once). The README's result lines (``examples/language/
llama2/README.md`` @ 0b00def8, 32 A800 GPUs, ``-b 16``, sequence length 4096)::

    `max memory usage:  55491.10 MB, throughput:  24.26 samples/s, TFLOPS/GPU:  167.43`.

come from a script that is not in the repository; their figure agrees with the same formula (24.26 x 4096 / 32 =
3,105 tokens/s per GPU; 8 FLOPs x 6.74e9 parameters x 3,105 = 167.4 TFLOP/s, the printed TFLOPS/GPU), so it is read
the same way.

ColossalChat's RLHF ``Performance summary:`` (``Generate 768 samples, throughput: 188.48 samples/s, ...``,
``Train ...``, ``Overall throughput: 118.42 samples/s``; written to a file since 2024-03-29) counts samples of varying
length (a prompt up to ``max_seq_len`` plus what was generated), which no flag gives: it is recognised and nothing is
sent. Its ``throughput`` also multiplies by the world size, not the data-parallel size.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_format

_TITLE = "Colossal-AI"

_THROUGHPUT = re.compile(r"\bThroughput: (?P<rate>" + NUMBER + r") samples/sec, TFLOPS per GPU")
_README = re.compile(r"\bthroughput:\s+(?P<rate>" + NUMBER + r") samples/s, TFLOPS/GPU:")
_CHAT = re.compile(r"\b(?:(?:Generate|Train) \d+ samples, throughput|Overall throughput): " + NUMBER + " samples/s")

_BENCHMARK = Declaration(
    trainer=_TITLE,
    versions="Colossal-AI examples/language benchmarks 2023-08 (0b00def8) to 2026 (PerformanceEvaluator v1, v2)",
    example="Throughput: 24.26 samples/sec, TFLOPS per GPU: 167.40",
    key="Throughput",
    figure="samples/s",
    scope="job",
    timing="run",
    sends="once, at the end: the run's whole-job samples/s x --seq-len (the benchmark's --max_length).",
)
_README_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="Colossal-AI examples/language/llama2 README result lines (2023-08, 0b00def8)",
    example="`max memory usage:  55491.10 MB, throughput:  24.26 samples/s, TFLOPS/GPU:  167.43`.",
    key="throughput",
    figure="samples/s",
    scope="job",
    timing="run",
    sends="the benchmark's whole-job samples/s x --seq-len, as the Throughput line.",
)
_CHAT_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="ColossalChat (Coati) PerformanceEvaluator 2023-04 to 2026",
    example="Train 768 samples, throughput: 448.38 samples/s, TFLOPS per GPU: 82.84",
    key="throughput",
    figure="samples/s",
    scope="none",
    timing="run",
    sends="nothing: its samples are prompts plus generations of varying length, whose tokens no flag gives.",
)


def _recognised(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    return None


FORMATS = (
    declared_format("colossalai", "Throughput: ", _THROUGHPUT, _BENCHMARK),
    declared_format("colossalai_readme", "TFLOPS/GPU:", _README, _README_DECLARATION),
    Format("colossalai_chat", _TITLE, "hroughput: ", _CHAT, _recognised, (_CHAT_DECLARATION,)),
)
