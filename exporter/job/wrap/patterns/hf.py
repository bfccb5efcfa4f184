"""Hugging Face Trainer: the dicts ``Trainer.log`` prints, and the ``***** train metrics *****`` block.

Per-step dicts (``ProgressCallback``/``PrinterCallback``; transformers >= 5.0 prints floats as ``'{:.4g}'`` strings)::

    {'loss': '2.345', 'grad_norm': '1.23', 'learning_rate': '5e-05', 'epoch': '0.5',
     'num_input_tokens_seen': 4096, 'train_runtime': '1.234', 'train_tokens_per_second': '3319'}

``num_input_tokens_seen`` (``include_num_input_tokens_seen=True``) is gathered over all ranks, so the rate between two
lines is the whole job's. From transformers 4.47 these lines also carry ``train_tokens_per_second``: the same counter
over the time since training started, also whole-job; it is used for the first line only.

End of training, as a dict and as the block ``trainer.log_metrics("train", metrics)`` prints::

    {'train_runtime': 10.5, 'train_samples_per_second': 9.52, 'train_steps_per_second': 1.19, 'train_loss': 2.3}
    ***** train metrics *****
      train_samples_per_second =      8.021
      train_tokens_per_second  =   1234.567

``train_samples_per_second`` is global (max_steps x the total train batch size). ``train_tokens_per_second`` in this
summary is **per device** (``include_tokens_per_second``, documented "tokens per second per device"; it counts the
tokens of one process's dataloader) in transformers 4.36 (the oldest checked) to 4.57, and gone from the summary in
5.x: it is multiplied by the GPU count. A summary in the middle of a job is rare; it is averaged with the per-step
figures of its interval.
"""

from __future__ import annotations

import contextlib
import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number

_DICT = re.compile(r"^\s*\{'(?:loss|train_\w+|eval_\w+|epoch|num_input_tokens_seen|grad_norm|learning_rate)'")
_FIELD = re.compile(r"'(?P<key>[a-z_]+)':\s*'?(?P<v>" + NUMBER + ")'?")
_SUMMARY_KEYS = {"train_samples_per_second", "train_steps_per_second", "train_loss"}


def _dict_line(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    values: dict[str, float] = {}
    for field in _FIELD.finditer(line):
        try:
            values[field["key"]] = to_number(field["v"])
        except ValueError:
            continue
    seen = values.get("num_input_tokens_seen")
    if seen is not None:
        # The rate between two lines, timed by their arrival (the summary repeats the last value: no new tokens).
        previous = ctx.memory.get("hf_seen")
        ctx.memory["hf_seen"] = (seen, ctx.now)
        if previous is not None and ctx.now > previous[1] and seen > previous[0]:
            return ctx.whole_job("hf_trainer", (seen - previous[0]) / (ctx.now - previous[1]))
    if _SUMMARY_KEYS & values.keys():
        return _summary(values, ctx)
    if "train_tokens_per_second" in values:
        return ctx.whole_job("hf_trainer", values["train_tokens_per_second"])
    if "loss" in values and "learning_rate" in values and seen is None:
        return Observation("hf_trainer", missing=("hf_token_counter",))
    return None


def _summary(values: dict[str, float], ctx: ParseContext) -> Result:
    """End-of-training metrics: per-device tokens/s (transformers <= 4.57) or global samples/s."""
    if "train_tokens_per_second" in values and ctx.num_gpus:
        return ctx.per_gpu("hf_trainer", values["train_tokens_per_second"])
    if "train_samples_per_second" in values:
        return ctx.samples("hf_trainer", values["train_samples_per_second"])
    if "train_tokens_per_second" in values:
        return ctx.per_gpu("hf_trainer", values["train_tokens_per_second"])
    return None


# -- trainer.log_metrics("train", metrics) -------------------------------------------------------------------------
_BLOCK_HEADER = re.compile(r"^\*{5} (?P<split>\w+) metrics \*{5}\s*$")
_BLOCK_LINE = re.compile(r"^\s+(?P<key>\w+)\s*=\s*(?P<v>\S.*?)\s*$")


class _MetricsBlock:
    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def __call__(self, line: str | None, ctx: ParseContext) -> tuple[bool, list[Observation]]:
        if line is not None:
            found = _BLOCK_LINE.match(line)
            if found is not None:
                with contextlib.suppress(ValueError):  # train_runtime = 0:01:23.45, total_flos = 123GF
                    self.values[found["key"]] = to_number(found["v"])
                return True, []
        result = _summary(self.values, ctx)
        return False, [result] if isinstance(result, Observation) else []


def _block(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    if match["split"] == "train":
        ctx.open_block(_MetricsBlock())
    return None


FORMATS = (
    Format("hf_trainer", "Hugging Face Trainer", "{'", _DICT, _dict_line),
    Format("hf_trainer_block", "Hugging Face Trainer", " metrics *****", _BLOCK_HEADER, _block),
)
