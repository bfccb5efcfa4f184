"""Hugging Face Trainer: the dicts ``Trainer.log`` prints, and the ``***** train metrics *****`` block; with them the
keys TRL, Axolotl, LLaMA-Factory and Liger-Kernel's ``EfficiencyCallback`` add to the same dicts (those trainers print
through the HF Trainer's ``ProgressCallback``/``PrinterCallback``, rank 0 only, so their lines are read here).

Per-step dicts (transformers >= 5.0 prints floats as ``'{:.4g}'`` strings)::

    {'loss': '2.345', 'grad_norm': '1.23', 'learning_rate': '5e-05', 'epoch': '0.5',
     'num_input_tokens_seen': 4096, 'train_runtime': '1.234', 'train_tokens_per_second': '3319'}

``num_input_tokens_seen`` (``include_num_input_tokens_seen=True``) is gathered over all ranks, so the rate between two
lines is the whole job's. From transformers 4.52 these lines also carry ``train_tokens_per_second``: the same counter
over the time since training started, a whole-job **average since the start**; it is used for the first line only
(where the average since the start is the first interval's rate), never after.

The keys other trainers add, read in this order (the first that gives a rate wins; a figure is read once):

* Liger-Kernel's ``EfficiencyCallback`` (example code users copy; ``logging_steps=1``):
  ``'step_tokens_per_second'`` = this optimizer step's growth of ``num_input_tokens_seen`` / its time: whole job,
  current. Sent as it is (it is the same counter as HF's, timed by the trainer); ``avg_tokens_per_second`` (since the
  warm-up) is not read. A ``0.0`` (``include_num_input_tokens_seen="no"`` passes its check) is not a rate.
* HF's ``num_input_tokens_seen`` counter, between two lines, timed by their arrival.
* Axolotl: ``'tokens_per_second_per_gpu'`` (v0.13.0: rank 0's trainable tokens/s, per device) x GPUs;
  ``'tokens/train_per_sec_per_gpu'`` changed meaning: the whole job's last micro-batch in v0.13.1-v0.14 (issue
  #3362), per data-parallel rank in v0.15-v0.17, per GPU over the logging interval from v0.18. v0.18 prints
  ``'tokens/trainable'`` before ``'tokens/total'`` (earlier versions the other way round): there it is per device;
  otherwise it is sent only under ``--rate-scope`` (and v0.13.1-v0.17 drop the gradient-accumulation factor: right
  only with ``gradient_accumulation_steps: 1``). In a dict without ``'loss'`` (the end-of-run and eval dicts) it is a
  stale ``'0'``: not read.
* TRL >= 0.16: ``'num_tokens'``, the whole job's non-padding tokens since ``train()`` started (a float): the rate
  between two lines, timed by their arrival, when HF's counter is off.

End of training, as a dict and as the block ``trainer.log_metrics("train", metrics)`` prints::

    {'train_runtime': 10.5, 'train_samples_per_second': 9.52, 'train_steps_per_second': 1.19, 'train_loss': 2.3}
    ***** train metrics *****
      train_samples_per_second =      8.021
      train_tokens_per_second  =   1234.567

``train_samples_per_second`` is global (max_steps x the total train batch size). ``train_tokens_per_second`` in this
summary is **per device** (``include_tokens_per_second``, documented "tokens per second per device"; it counts the
tokens of one process's dataloader) in transformers 4.36 (the oldest checked) to 4.57, and gone from the summary in
5.x: it is multiplied by the GPU count. With ``max_steps`` it is the first batch's tokens x the steps (an
extrapolation, 13 % high in TRL's captured run): where the summary also carries ``num_input_tokens_seen`` the counter
has already given the job's rate and it is not read. LLaMA-Factory's ``effective_tokens_per_sec`` in the block is the
dataset's unpadded tokens x epochs / runtime / ``dist.get_world_size()``: per device, multiplied by the GPU count
(LLaMA-Factory >= 0.9.2 prints ``world size: W``, read in ``llama_factory.py``). A summary in the middle of a job is
rare; it is averaged with the per-step figures of its interval.
"""

from __future__ import annotations

import contextlib
import re

from mfumon.exporter.job.wrap.patterns._core import NUMBER, Format, Observation, ParseContext, Result, to_number
from mfumon.exporter.job.wrap.patterns._declared import Declaration

_DICT = re.compile(r"^\s*\{'(?:loss|train_\w+|eval_\w+|epoch|num_input_tokens_seen|grad_norm|learning_rate)'")
_FIELD = re.compile(r"'(?P<key>[A-Za-z_/]+)':\s*'?(?P<v>" + NUMBER + ")'?")
_SUMMARY_KEYS = {"train_samples_per_second", "train_steps_per_second", "train_loss"}
_AXOLOTL = "tokens/train_per_sec_per_gpu"
_NAME = "hf_trainer"


def _dict_line(match: re.Match[str], line: str, ctx: ParseContext) -> Result:
    values: dict[str, float] = {}
    for field in _FIELD.finditer(line):
        try:
            values[field["key"]] = to_number(field["v"])
        except ValueError:
            continue
    summary = bool(_SUMMARY_KEYS & values.keys())
    step_rate = values.get("step_tokens_per_second")  # Liger-Kernel's EfficiencyCallback
    seen = values.get("num_input_tokens_seen")
    counter_rate, first_count = None, False
    if seen is not None:
        # The rate between two lines, timed by their arrival (the summary repeats the last value: no new tokens).
        previous = ctx.memory.get("hf_seen")
        ctx.memory["hf_seen"] = (seen, ctx.now)
        first_count = previous is None
        if previous is not None and ctx.now > previous[1] and seen > previous[0]:
            counter_rate = (seen - previous[0]) / (ctx.now - previous[1])
    if step_rate is not None and not summary and "loss" in values:
        return ctx.whole_job(_NAME, step_rate) if step_rate > 0 else None
    if counter_rate is not None:
        return ctx.whole_job(_NAME, counter_rate)
    if summary:
        return _summary(values, ctx)
    if "train_tokens_per_second" in values and first_count:
        # The first line's average since the start is the first interval's rate; later ones are never sent.
        return ctx.whole_job(_NAME, values["train_tokens_per_second"])
    if "loss" not in values:
        return None  # an eval dict (its speed is evaluation's), or the Trainer's other dicts
    axolotl = _axolotl(values, line, ctx)
    if axolotl is not None:
        return axolotl
    if "num_tokens" in values:
        return _count(values["num_tokens"], ctx)
    if seen is None and "learning_rate" in values:
        return Observation(_NAME, missing=("hf_token_counter",))
    return None


def _axolotl(values: dict[str, float], line: str, ctx: ParseContext) -> Observation | None:
    """Axolotl's per-step token rates (0 where nothing was measured yet: not a rate)."""
    if values.get("tokens_per_second_per_gpu"):  # v0.13.0
        return ctx.per_gpu(_NAME, values["tokens_per_second_per_gpu"])
    rate = values.get(_AXOLOTL)
    if not rate:
        return None
    trainable, total = line.find("'tokens/trainable'"), line.find("'tokens/total'")
    if 0 <= trainable < total:  # v0.18's order: the interval's tokens per GPU
        return ctx.per_gpu(_NAME, rate)
    if ctx.rate_scope is None:
        return Observation(_NAME, missing=("rate_scope",))
    return ctx.per_gpu(_NAME, rate) if ctx.rate_scope == "device" else ctx.whole_job(_NAME, rate)


def _count(count: float, ctx: ParseContext) -> Observation | None:
    """TRL's ``num_tokens``: the growth between two lines over their arrival times."""
    previous = ctx.memory.get("trl_num_tokens")
    ctx.memory["trl_num_tokens"] = (count, ctx.now)
    if previous is None or ctx.now <= previous[1] or count <= previous[0]:
        return None
    return ctx.whole_job(_NAME, (count - previous[0]) / (ctx.now - previous[1]))


def _summary(values: dict[str, float], ctx: ParseContext) -> Result:
    """End-of-training metrics: per-device tokens/s (transformers <= 4.57, LLaMA-Factory) or global samples/s."""
    if "effective_tokens_per_sec" in values:
        return ctx.per_gpu(_NAME, values["effective_tokens_per_sec"])
    per_device = values.get("train_tokens_per_second")
    if "num_input_tokens_seen" in values:
        per_device = None  # an extrapolation from the first batch; the counter gave the job's rate
    if per_device is not None and ctx.num_gpus:
        return ctx.per_gpu(_NAME, per_device)
    if "train_samples_per_second" in values:
        return ctx.samples(_NAME, values["train_samples_per_second"])
    if per_device is not None:
        return ctx.per_gpu(_NAME, per_device)
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


_HF = "Hugging Face Trainer"
_DICT_DECLARATIONS = (
    Declaration(
        trainer=_HF,
        versions="transformers 4.41-5.24 (include_num_input_tokens_seen)",
        example="{'loss': '4.59', 'grad_norm': '1.363', 'learning_rate': '2.5e-05', 'epoch': '0.6667', "
        "'num_input_tokens_seen': 256, 'train_runtime': '1.859', 'train_tokens_per_second': '137.7'}",
        key="num_input_tokens_seen",
        figure="tokens",
        scope="job",
        timing="count",
        sends="the counter's growth between two lines over their arrival times (gathered over the ranks: the job's)",
    ),
    Declaration(
        trainer=_HF,
        versions="transformers 4.52-5.24 (per-step dicts)",
        example="{'loss': '4.557', 'grad_norm': '1.376', 'learning_rate': '4.167e-05', 'epoch': '0.3333', "
        "'num_input_tokens_seen': 128, 'train_runtime': '0.3491', 'train_tokens_per_second': '366.7'}",
        key="train_tokens_per_second",
        figure="tokens/s",
        scope="job",
        timing="cumulative",
        sends="the first per-step line only (its average since the start is the first interval's rate); later "
        "lines send the counter's interval rate instead",
    ),
    Declaration(
        trainer=_HF,
        versions="transformers 4.36-4.57 (include_tokens_per_second, end of training)",
        example="{'train_runtime': 83.4512, 'train_samples_per_second': 8.021, 'train_steps_per_second': 1.003, "
        "'train_tokens_per_second': 4106.752, 'train_loss': 2.2231, 'epoch': 1.0}",
        key="train_tokens_per_second",
        figure="tokens/s",
        scope="device",
        timing="run",
        sends="x GPUs, once at the end; not read where the dict also has num_input_tokens_seen (with max_steps it "
        "extrapolates the first batch, and the counter already gave the job's rate)",
    ),
    Declaration(
        trainer=_HF,
        versions="transformers 4.36-5.24 (end of training)",
        example="{'train_runtime': '2.03', 'train_samples_per_second': '11.82', 'train_steps_per_second': '2.956', "
        "'train_loss': '4.566', 'epoch': '1', 'num_input_tokens_seen': 384}",
        key="train_samples_per_second",
        figure="samples/s",
        scope="job",
        timing="run",
        sends="x the sequence length, once at the end (an upper bound where rows are shorter than it)",
    ),
    Declaration(
        trainer="TRL",
        versions="TRL 0.16-0.26 (SFT, DPO, GRPO ...; transformers 4.5x-5.x)",
        example="{'loss': 0.083, 'grad_norm': 1.0651044845581055, 'learning_rate': 0.00014539904997395468, "
        "'entropy': 2.05564696341753, 'num_tokens': 11421.0, 'mean_token_accuracy': 0.9687499888241291, 'epoch': 0.02}",
        key="num_tokens",
        figure="tokens",
        scope="job",
        timing="count",
        sends="the non-padding tokens' growth between two lines over their arrival times, where HF's "
        "num_input_tokens_seen is off (that counter is read first)",
    ),
    Declaration(
        trainer="Axolotl",
        versions="Axolotl 0.13.0 (transformers 4.57)",
        example="{'loss': 1.2345, 'grad_norm': 0.456, 'learning_rate': 0.0002, 'ppl': 3.43671, "
        "'tokens_per_second_per_gpu': 2865.12, 'total_tokens': 1843200, 'epoch': 0.05}",
        key="tokens_per_second_per_gpu",
        figure="tokens/s",
        scope="device",
        timing="current",
        sends="x GPUs (rank 0's trainable tokens over the logging interval)",
    ),
    Declaration(
        trainer="Axolotl",
        versions="Axolotl 0.13.1-0.17 (tokens/total printed before tokens/trainable)",
        example="{'train_runtime': '158.8', 'train_samples_per_second': '26.2', 'train_steps_per_second': '1.638', "
        "'train_loss': '1.567', 'epoch': '1', 'tokens/train_per_sec_per_gpu': '0'}",
        key="tokens/train_per_sec_per_gpu",
        figure="tokens/s",
        scope="unsettled",
        timing="current",
        sends="only with --rate-scope: the whole job's last micro-batch in 0.13.1-0.14 (job), per data-parallel "
        "rank in 0.15-0.17 (device); both right only with gradient_accumulation_steps 1; the stale 0 of the "
        "end-of-run dict is never read",
        needs=("gradient_accumulation_steps 1",),
    ),
    Declaration(
        trainer="Axolotl",
        versions="Axolotl 0.18 (tokens/trainable printed before tokens/total)",
        example="{'loss': '0.7157', 'grad_norm': '12.79', 'learning_rate': '0', 'ppl': '2.046', "
        "'tokens/trainable': 93, 'tokens/total': 512, 'epoch': '0.1333'}",
        key="tokens/train_per_sec_per_gpu",
        figure="tokens/s",
        scope="device",
        timing="current",
        sends="x GPUs (the logging interval's trainable tokens per GPU; absent from the first dict)",
    ),
    Declaration(
        trainer="Liger-Kernel",
        versions="EfficiencyCallback (examples/, 2024-08 to 2026-08) on transformers 4.41-5.x",
        example="{'loss': 74.5029, 'grad_norm': 8.809615135192871, 'learning_rate': 9.729086208503174e-06, "
        "'epoch': 1.5, 'num_input_tokens_seen': 98304, 'step_tokens_per_second': 18835.9, "
        "'avg_tokens_per_second': 18818.86}",
        key="step_tokens_per_second",
        figure="tokens/s",
        scope="job",
        timing="current",
        sends="as it is (this step's growth of the gathered token counter over its time); avg_tokens_per_second "
        "(since the warm-up) is not read",
    ),
)

_BLOCK_DECLARATIONS = (
    Declaration(
        trainer=_HF,
        versions="transformers 4.36-4.57 (include_tokens_per_second)",
        example="***** train metrics *****",
        key="train_tokens_per_second",
        figure="tokens/s",
        scope="device",
        timing="run",
        sends="x GPUs, once at the end (else train_samples_per_second x the sequence length); not read where the "
        "block has num_input_tokens_seen",
    ),
    Declaration(
        trainer="LLaMA-Factory",
        versions="LLaMA-Factory 0.9.1-0.9.4 (include_effective_tokens_per_second)",
        example="  effective_tokens_per_sec =  4960.7278",
        key="effective_tokens_per_sec",
        figure="tokens/s",
        scope="device",
        timing="run",
        sends="x GPUs (the dataset's unpadded tokens x epochs / runtime / world size), once at the end",
    ),
)

FORMATS = (
    Format("hf_trainer", _HF, "{'", _DICT, _dict_line, _DICT_DECLARATIONS),
    Format("hf_trainer_block", _HF, " metrics *****", _BLOCK_HEADER, _block, _BLOCK_DECLARATIONS),
)
