"""mlx-lm (``mlx_lm.lora``: LoRA, DoRA and full fine-tuning; the ``lora/lora.py`` example of mlx-examples before it).

One line per report (every ``--steps-per-report`` iterations, 10 by default), printed by rank 0. mlx-lm 2025-07
(``mlx_lm/tuner/trainer.py`` ``train()`` @ 48aead68, https://github.com/ml-explore/mlx-lm/pull/330)::

    Iter 20: Train loss 2.101, Learning Rate 1.000e-05, It/sec 13.913, Tokens/sec 4560.749, Trained Tokens 6568,
     Peak mem 10.588 GB

mlx-examples ``llms/mlx_lm/tuner/trainer.py`` of 2024-03 (@ 8eee4399, before ``Peak mem``)::

    Iter 20: Train loss 1.508, Learning Rate 1.000e-05, It/sec 0.826, Tokens/sec 81.866, Trained Tokens 1853

and the first form, mlx-examples ``lora/lora.py`` @ 7ae445f6 (2023-12)::

    Iter 20: Train loss 3.508, It/sec 0.013, Tokens/sec 1.522

``Tokens/sec`` is ``n_tokens / train_time`` of **this report interval** (a current rate, not an average since the
start): ``n_tokens`` is the interval's loss-masked, non-padding tokens, ``all_sum``-ed over the ranks since
distributed LoRA (#821, 2024-11; a single device before), so it is the **whole job's** tokens/s and is sent as it is.
``Trained Tokens`` is the running total since the process started and is not read (``Tokens/sec`` already is the
interval's rate). ``Iter N: Val loss ...`` and ``Iter N: Saved adapter weights ...`` lines carry no rate and are not
read. What is counted: tokens under the loss (with ``--mask-prompt``, completion tokens only). The first interval
includes MLX's compilation and is sent as measured; before #1278 (2025-02) an interval holding a validation pass
lost the time before it, so that one interval's figure was too high (this cannot be seen in the line).

From mlx-lm 2026-06 (#1344, ``mlx_lm/cli_ui.py`` ``TrainUI``) the report is a table: a header printed once, then a
row per report, ``f"  {it:>4}    {train_loss:>5.3f} {arrow}    {tokens_sec:>5,.0f}    {trained_tokens / 1000:>5.1f}k"``
(``arrow`` is ``▼`` or ``▲``)::

      iter   train_loss     tok/s     tokens
        20    2.101 ▼    4,561      6.6k

The ``tok/s`` column is the same interval figure (whole job, rounded to an integer with separators); rows are read
only after the header was seen (a row alone is just numbers).
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration, declared_format

_TITLE = "mlx-lm"

_REPORT = re.compile(
    r"\bIter (?P<step>\d+): Train loss " + NUMBER + r", (?:Learning Rate " + NUMBER + r", )?"
    r"It/sec " + NUMBER + r", Tokens/sec (?P<rate>" + NUMBER + ")"
)
#: The table's header (``iter   train_loss     tok/s     tokens``) or a row (``20    2.101 ▼    4,561      6.6k``).
_TABLE = re.compile(
    r"^\s*(?:(?P<header>iter\s+train_loss\s+tok/s\s+tokens)"
    r"|(?P<step>\d+)\s+" + NUMBER + r" [▼▲]\s+(?P<rate>\d[\d,]*)\s+" + NUMBER + r"k)\s*$"
)

_LINE = Declaration(
    trainer=_TITLE,
    versions="mlx-examples lora/lora.py 2023-12; mlx-lm trainer.py 2024-02 to 2026-06",
    example="Iter 20: Train loss 2.101, Learning Rate 1.000e-05, It/sec 13.913, Tokens/sec 4560.749, "
    "Trained Tokens 6568, Peak mem 10.588 GB",
    key="Tokens/sec",
    figure="tokens/s",
    scope="job",
    timing="current",
    sends="Tokens/sec as printed: the report interval's tokens, summed over the ranks, per second of its time.",
)
_TABLE_DECLARATION = Declaration(
    trainer=_TITLE,
    versions="mlx-lm 2026-06 (cli_ui.py TrainUI) and later",
    example="    20    2.101 ▼    4,561      6.6k",
    key="tok/s",
    figure="tokens/s",
    scope="job",
    timing="current",
    sends="the tok/s column of a row after the table's header: the same interval figure as Tokens/sec, rounded.",
)


def _table(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if match["header"]:
        ctx.memory["mlx_lm:table"] = True
        return None
    if not ctx.memory.get("mlx_lm:table"):
        return None
    return ctx.whole_job("mlx_lm_table", to_number(match["rate"]), step=int(match["step"]))


FORMATS = (
    declared_format("mlx_lm", "Tokens/sec ", _REPORT, _LINE),
    Format("mlx_lm_table", _TITLE, "k", _TABLE, _table, (_TABLE_DECLARATION,)),  # the header and the rows hold a "k"
)
