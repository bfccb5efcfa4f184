"""fairseq2 (``LogMetricRecorder``): one ``Train Metrics (step N) - Name: value | ...`` record per publish interval.

No real pasted fairseq2 throughput line was found (its docs show throughput only as TensorBoard screenshots); the
lines below are built from the code that prints them. v0.5+ (``src/fairseq2/metrics/recorders/log.py``:
``log.info("{} - {}", f"{title} Metrics (step {step_nr})", " | ".join(...))``; names and formatters in
``recipe/composition/metric_recorders.py`` and ``metrics/formatters.py``), with ``--no-rich``::

    2025-10-01 12:00:00 INFO: fairseq2 - Train Metrics (step 200) - NLL Loss: 0.8123 | ... | Compute Time: 11s |
     Lapse Time: 12s | ... | Elements per Batch: 61,344 | Elements per Second: 49,954 | Number of Examples: 2,184 | ...

v0.3.0-v0.4.x (``fairseq2/metrics/recorder.py``, then ``metrics/recorders/_log.py``) print ``Elapsed Time`` where v0.5
prints ``Data Time``/``Compute Time``/``Lapse Time``/``Total Time``; ``Elements per Second`` is the same.

``Elements per Second`` (``metrics/common.py`` ``extend_batch_metric_values``: ``num_elements / elapsed_time``) is the
interval's elements **summed over the data-parallel gang** (``sync_and_compute_metrics(..., gangs.dp)``, tensor-parallel
rank 0 only) over rank 0's data-loading + compute time of the interval (v0.3-v0.4: the summed step times): the
**whole job's current** rate, sent as printed (an integer with thousands separators). The time leaves out validation,
checkpointing and metric syncing, so it is the training steps' rate. An element is a non-padding position of the
batch: a token for the language-model and translation recipes, an audio frame for the speech ones (wav2vec2, ASR),
where the figure is not tokens/s. ``Total Number of Elements`` (running total, including resumed runs) and the
``Validation``/``Evaluation Metrics`` records are not read. A figure below one prints ``<1`` and is not read.

By default fairseq2 logs through rich's ``RichHandler`` to stderr, which wraps a record at the console's width (80
columns when not a terminal): the record goes on over lines indented past the time and level columns, and a name can
be split from its value or in two (``Elements per`` / ``Second: 49,954``)::

    [12/06/26 18:32:49] INFO     fairseq2 - Train Metrics (step 200) - NLL Loss:
                                 0.8123 | Gradient Norm: 1.734 | Data Epoch: 1 |
                                 ...
                                 61,344 | Elements per Second: 49,954 | Number of

so a record whose figure is not on its first line is joined with its continuation lines before the figure is looked
for (``declared_block_format``; a one-line record is read at once, not at the next line); a continuation line is
one indented by 20 or more spaces that does not start a new record (rich blanks a repeated time, leaving
``                    INFO     ...``).
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_block_format, declared_format

_HEADER = re.compile(r"\bTrain Metrics \(step \d+\)")
_CONTINUATION = re.compile(r"^ {20,}(?!(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s)\S")
_RECORD = re.compile(
    r"\bTrain\s+Metrics\s+\(step\s+(?P<step>\d+)\)\s+-\s.*?"
    r"(?:-|\|)\s+Elements\s+per\s+Second:\s+(?P<rate>" + NUMBER + r")(?:\s|\||$)",
    re.DOTALL,
)

_DECLARATION = Declaration(
    trainer="fairseq2",
    versions="fairseq2 0.3.0 to 0.8 (LogMetricRecorder; rich-wrapped records joined)",
    example="2025-10-01 12:00:00 INFO: fairseq2 - Train Metrics (step 200) - NLL Loss: 0.8123 | Gradient Norm: 1.734 | "
    "Data Epoch: 1 | Data Time: <1s | Compute Time: 11s | Lapse Time: 12s | Total Time: 271s | Wall Time: 271s | "
    "Learning Rate: 1e-05 | Batch Size: 218 | Elements per Batch: 61,344 | Elements per Second: 49,954 | ...",
    key="Elements per Second",
    figure="tokens/s",
    scope="job",
    timing="current",
    sends="Elements per Second as printed: the interval's non-padding elements of all data-parallel ranks per second "
    "of rank 0's data and compute time.",
)

_MARKER = "Metrics (step "
_ONE_LINE = declared_format("fairseq2", _MARKER, _RECORD, _DECLARATION)
_WRAPPED = declared_block_format("fairseq2", _MARKER, _HEADER, _RECORD, _DECLARATION, body=_CONTINUATION)


def _record(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    """A record whose figure is on its first line (``--no-rich``, or a wide console) is read at once; else its
    continuation lines are joined first."""
    whole = _RECORD.search(line)
    if whole is not None:
        return _ONE_LINE.handler(whole, line, ctx)
    return _WRAPPED.handler(match, line, ctx)


FORMATS = (Format("fairseq2", "fairseq2", _MARKER, _HEADER, _record, (_DECLARATION,)),)
