"""NeMo Automodel (``nemo_automodel/recipes/*``, ``log_train_metrics``): one line per optimizer step on rank 0.

``recipes/llm/train_ft.py`` (the VLM, sequence-classification, multimodal and dLLM recipes print the same ``mem ...
GiB | tps ...`` part among their own fields; before 2025-08 without the ``(…/gpu)``)::

    step {} | epoch {} | loss {:.4f} | grad_norm {:.4f} | lr {:.2e} | mem {:.2f} GiB | tps {:.2f}({:.2f}/gpu) |
     num_label_tokens {}

as the root logger prints it, e.g. (8 GPUs)::

    2026-08-10 15:48:59 | INFO | root | step 13 | epoch 0 | loss 0.6407 | grad_norm 1.1754 | lr 1.00e-05 |
     mem 31.55 GiB | tps 6574.51(821.81/gpu) | num_label_tokens 26779

``tps`` is the whole job's and is the figure used: the step's tokens (labels less tail padding) summed over the
data-parallel ranks by an all-reduce, divided by the step's wall time. The ``/gpu`` figure is not used: it is ``tps``
divided by the data-parallel and context-parallel sizes only, so with tensor or pipeline parallelism it is the rate
of one model replica's group of GPUs, not of one GPU, and multiplying it by ``--num-gpus`` would overcount.
"""

from __future__ import annotations

import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_HEAD = r"\bstep (?P<step>\d+) \| epoch \d+ \|.*?\| mem [\d.]+ GiB \| "
_PER_GPU = r"(?:\(" + NUMBER + r"/gpu\))?"  # read past, never used (see above)
_STEP = re.compile(_HEAD + r"tps (?P<tps>" + NUMBER + ")" + _PER_GPU)


def _step(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    return ctx.whole_job("nemo_automodel", to_number(match["tps"]), step=int(match["step"]))


FORMATS = (
    Format(
        "nemo_automodel",
        "NeMo Automodel",
        " GiB | tps ",
        _STEP,
        _step,
        (
            Declaration(
                trainer="NeMo Automodel",
                versions="since db4c6227a (2025-08) to main @ 36044ad3d",
                example=(
                    "step 13 | epoch 0 | loss 0.6407 | ... | mem 31.55 GiB | tps 6574.51(821.81/gpu) | "
                    "num_label_tokens 26779"
                ),
                key="tps",
                figure="tokens/s",
                scope="job",
                timing="current",
                sends=(
                    "`tps` (whole job: the data-parallel ranks' tokens ÷ step time); the `/gpu` figure is `tps` ÷ "
                    "(data x context parallel), not one GPU's under tensor or pipeline parallelism, and is not used"
                ),
            ),
        ),
    ),
)
