"""fairseq (``fairseq-train``; ``fairseq_cli/train.py``, ``train.py`` before 2019): ``wps``, printed by the master.

``wps`` ("words" per second) is the criterion's ``ntokens`` per second, **summed over the data-parallel workers**
(``Trainer._aggregate_logging_outputs``, then ``FairseqTask.reduce_metrics``:
``metrics.log_speed("wps", ntokens, round=1)``; ``all_gather_list`` in v0.5-v0.9): the **whole job's** rate. For
translation it counts target tokens, for language models the sample's tokens, for speech criteria letters or frames.

Since 2020-03-03 (244835d8, "Reset mid-epoch stats every log-interval steps") the mid-epoch lines are tagged
``train_inner`` and their meters are reset after each print: ``wps`` is the **current** rate of the last
``--log-interval`` updates and is sent as it is. Simple format (fairseq 0.9/0.10, https://github.com/facebookresearch/fairseq/issues/2338)::

    2020-07-17 07:11:02 | INFO | train_inner | epoch 001:   2800 / 160368 loss=9.255, ppl=611.12, wps=57.3, ups=0.04,
     wpb=1613, bsz=80, num_updates=2800, lr=2.8e-05, gnorm=3.23, train_wall=13, wall=1236

JSON format (``examples/fully_sharded_data_parallel/README.md`` @ c6006678, 2021-03, 8 GPUs)::

    2021-03-08 18:05:45 | INFO | train_inner | {"epoch": 1, "update": 0.002, "loss": "16.352", "ppl": "83644.3",
     "wps": "3283.4", "ups": "0.03", "wpb": "131072", "bsz": "64", "num_updates": "2", ..., "wall": "96"}

Two ``train_inner`` lines are not sent: the first update's ``"wps": "0"`` (the meter is created and reset by it), and
lines whose ``ups`` is far below the updates per second the line's own ``num_updates`` and ``wall`` show (between two
lines, or since the start): on TPU (``fairseq/trainer.py``: "this causes wps to be misreported when log_interval >
1") ``wps`` and ``ups`` count one update per log interval (0.04 ups while 100 updates took 29 s, above).

Before 2020-03-03 the mid-epoch line was an **average since the epoch's start** (``trainer.get_meter('wps').reset()``
only at the epoch's first batch), in every form: 2017's ``| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, ...``,
v0.5-v0.9's ``| epoch 001:    450 / 1891 loss=11.521, ..., wps=52922, ups=0.5, ..., wall=882, train_wall=756`` and
the first logging builds' (2020-02) ``| INFO | train | epoch 001:     19 / 3373 ... wps=33168.8, ...``. The line
prints no time since the epoch's start (``wall`` counts from the trainer's start), so no interval rate follows:
nothing is sent (``timing="cumulative"`` without an elapsed time). A tqdm bar (``... 2.09it/s, loss=..., wps=...]``)
and a JSON line with ``"update"`` but no ``train_inner`` tag cannot be dated either and are read the same way.

The epoch-end line (``| train | epoch 050 | ... | wps 34422 | ...``, JSON ``"train_wps": "2567.8"``, v0.5's
``{"epoch": 25, ..., "wps": 1667443, ...}`` without ``"update"``) is the epoch's average, whose time includes the
validation and checkpoint saving inside the epoch: not a current rate, nothing is sent. ``valid`` lines
(``valid_wps``) are evaluation and not read.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_format

_TITLE = "fairseq"
_WPS = r"(?:\bwps=|\"wps\": \"?)(?P<rate>" + NUMBER + ")"

_INNER = re.compile(r"\| train_inner \| .*?" + _WPS)
_RUNNING = re.compile(r"(?:\bepoch \d+:?\s+\d+ / \d+ |\d+/\d+ \[|\"update\": ).*?" + _WPS)
_EPOCH = re.compile(r"(?:\| wps |\"(?:train_)?wps\": \"?)(?P<rate>" + NUMBER + ")")
_FIELD = re.compile(r"(?<![\w])(?P<key>ups|num_updates|wall)(?:=|\": \"?)(?P<v>" + NUMBER + ")")

#: ``ups`` below a third of the updates per second the line's counters show: wps counts only some updates (TPU).
_UNDERCOUNT = 3.0
_MIN_SPAN = 5.0  # seconds of ``wall`` (printed as an integer) between two lines for their difference to be used

_INNER_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="fairseq 2020-03-03 (244835d8) to 0.12 and main (train_inner lines, simple and JSON)",
    example="2020-07-17 07:11:31 | INFO | train_inner | epoch 001:   2900 / 160368 loss=8.979, ppl=504.73, wps=53.5, "
    "ups=0.04, wpb=1504, bsz=64, num_updates=2900, lr=2.9e-05, gnorm=2.39, train_wall=13, wall=1265",
    key="wps",
    figure="tokens/s",
    scope="job",
    timing="current",
    sends="wps as printed (the last log interval's tokens of all workers per second); not the first update's 0, "
    "nor a line whose ups disagrees with its num_updates and wall (TPU).",
)
_RUNNING_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="fairseq-py 2017 to fairseq 0.9 and builds before 2020-03-03 (mid-epoch lines without train_inner)",
    example="| epoch 001:    450 / 1891 loss=11.521, nll_loss=10.881, ppl=1886.05, wps=52922, ups=0.5, wpb=104928, "
    "bsz=5325, num_updates=445, lr=8.90889e-05, gnorm=1.543, clip=0%, oom=0, loss_scale=2.000, wall=882, "
    "train_wall=756",
    key="wps",
    figure="tokens/s",
    scope="job",
    timing="cumulative",
    sends="nothing: an average since the epoch's start, and the line prints no time since then.",
)
_EPOCH_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="fairseq 0.5 to main (end-of-epoch lines)",
    example="2021-05-07 16:11:09 | INFO | train | epoch 050 | loss 3.942 | nll_loss 2.512 | ppl 5.71 | wps 34422 | "
    "ups 3.3 | wpb 10419.8 | bsz 422.8 | num_updates 18950 | lr 0.000229718 | gnorm 0.619 | train_wall 66 | "
    "gb_free 8.9 | wall 5740",
    key="wps",
    figure="tokens/s",
    scope="job",
    timing="cumulative",
    sends="nothing: the epoch's average, its time including validation and checkpoint saving.",
)


def _inner(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    fields: dict[str, float] = {}
    for field in _FIELD.finditer(line):
        fields.setdefault(field["key"], to_number(field["v"]))
    updates, wall, ups = fields.get("num_updates"), fields.get("wall"), fields.get("ups")
    step = int(updates) if updates is not None else None
    previous = ctx.memory.get("fairseq:counters")
    if updates is not None and wall is not None:
        ctx.memory["fairseq:counters"] = (updates, wall)
    rate = to_number(match["rate"])
    if rate <= 0:  # the first update: the meter is created and reset by it
        return None
    if ups is not None and updates and wall:
        if previous is not None and wall - previous[1] >= _MIN_SPAN and updates > previous[0]:
            shown = (updates - previous[0]) / (wall - previous[1])
        else:
            shown = updates / wall
        if shown > _UNDERCOUNT * ups:
            return Observation(
                "fairseq",
                step=step,
                note=(
                    f"fairseq's ups ({ups:g}) is far below the {shown:.3g} updates/s its num_updates and wall show: "
                    "its wps counts only some updates (on TPU, one per log interval), so it is not sent"
                ),
            )
    return ctx.whole_job("fairseq", rate, step=step)


FORMATS = (
    Format("fairseq", _TITLE, "wps", _INNER, _inner, (_INNER_DECLARATION,)),
    declared_format("fairseq_running", "wps", _RUNNING, _RUNNING_DECLARATION),
    declared_format("fairseq_epoch", "wps", _EPOCH, _EPOCH_DECLARATION),
)
