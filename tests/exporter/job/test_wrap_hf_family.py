"""The HF Trainer family (TRL, Axolotl, LLaMA-Factory, Liger-Kernel, Unsloth) and Lightning's ThroughputMonitor: the
traps of issue 57 on single lines (the real logs are in ``fixtures/logs/<trainer>.yml``)."""

from __future__ import annotations

from typing import Any

import pytest

from mfumon.exporter.job.wrap.patterns import (
    LogParser,
    Observation,
    ParseContext,
    hf,
    lightning,
    llama_factory,
    unsloth,
)

_SUMMARY_4_46 = (
    "{'train_runtime': 83.4512, 'train_samples_per_second': 8.021, 'train_steps_per_second': 1.003, "
    "'train_tokens_per_second': 4106.752, 'train_loss': 2.2231, 'epoch': 1.0}"
)
_UNSLOTH = r"\        /    Data Parallel GPUs = 2 | Total batch size (1 x 1 x 2) = 2"
_LF_WORLD = (
    "[INFO|2026-12-06 18:44:22] llamafactory.hparams.parser:465 >> Process rank: 0, world size: 2, device: cpu:0, "
    "distributed training: True, compute dtype: None"
)
_AXOLOTL_OLD_ORDER = (
    "{'loss': '0.8123', 'grad_norm': '0.3117', 'learning_rate': '0.000198', 'ppl': '2.253', "
    "'tokens/train_per_sec_per_gpu': '4312', 'tokens/total': 2457600, 'tokens/trainable': 1873211, 'epoch': '0.08'}"
)


def feed(lines: list[str], **context: Any) -> tuple[list[Observation], ParseContext]:
    ctx = ParseContext(**context)
    parser = LogParser(ctx)
    observed: list[Observation] = []
    for second, line in enumerate(lines, start=1):
        observed += parser.feed(line, float(second))
    observed += parser.close()
    return observed, ctx


def rates(observed: list[Observation]) -> list[float]:
    return [o.tokens_per_second for o in observed if o.tokens_per_second is not None]


@pytest.mark.parametrize("context_line", [_UNSLOTH, _LF_WORLD])
def test_context_lines_set_the_gpus_for_a_per_device_figure_and_the_flag_wins(context_line: str) -> None:
    observed, ctx = feed([context_line, context_line, _SUMMARY_4_46])  # printed by every rank: set once, not summed
    assert ctx.num_gpus == 2
    assert rates(observed) == [4106.752 * 2]
    observed, ctx = feed([context_line, _SUMMARY_4_46], num_gpus=8)
    assert ctx.num_gpus == 8
    assert rates(observed) == [4106.752 * 8]


@pytest.mark.parametrize(
    "line",
    [
        r"   \\   /|    NVIDIA A10. Num GPUs = 2. Max memory: 22.184 GB. Platform: Linux.",
        "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 2",
        "[INFO|2024-12-05 18:19:00] llamafactory.hparams.parser:355 >> Process rank: 0, device: cuda:0, n_gpu: 1, "
        "distributed training: True, compute dtype: torch.bfloat16",
    ],
)
def test_counts_that_are_not_the_world_size_are_not_read(line: str) -> None:
    assert feed([line])[1].num_gpus is None


def test_old_unsloth_banner_gives_the_world_size() -> None:
    assert feed(["==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 8"])[1].num_gpus == 8


def test_axolotl_figure_of_changed_meaning_needs_the_rate_scope() -> None:
    observed, _ = feed([_AXOLOTL_OLD_ORDER], num_gpus=8)
    assert [o.missing for o in observed] == [("rate_scope",)]
    assert rates(feed([_AXOLOTL_OLD_ORDER], num_gpus=8, rate_scope="job")[0]) == [4312.0]
    assert rates(feed([_AXOLOTL_OLD_ORDER], num_gpus=8, rate_scope="device")[0]) == [4312.0 * 8]


def test_axolotl_stale_zero_and_eval_dicts_are_not_read() -> None:
    lines = [
        "{'eval_loss': '1.2', 'eval_runtime': '3.1', 'eval_samples_per_second': '20', 'epoch': '1', "
        "'tokens/train_per_sec_per_gpu': '4312'}",
        "{'loss': '0.7', 'grad_norm': '1.2', 'learning_rate': '1e-05', 'tokens/train_per_sec_per_gpu': '0', "
        "'tokens/trainable': 93, 'tokens/total': 512, 'epoch': '0.1'}",
    ]
    observed, _ = feed(lines, num_gpus=8, rate_scope="device")
    assert rates(observed) == []


def test_liger_step_rate_is_read_once_and_a_zero_is_not_a_rate() -> None:
    line = (
        "{'loss': 1.0, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': 1.0, 'num_input_tokens_seen': %d, "
        "'step_tokens_per_second': %s, 'avg_tokens_per_second': 9999.0}"
    )
    observed, _ = feed([line % (1000, "500.0"), line % (3000, "700.0")], num_gpus=8)
    assert rates(observed) == [500.0, 700.0]  # not the counter's 2000/s as well, never x 8
    assert rates(feed([line % (0, "0.0"), line % (0, "0.0")])[0]) == []


def test_hf_average_since_the_start_is_sent_for_the_first_line_only() -> None:
    line = "{'loss': 2.3, 'learning_rate': 4e-05, 'num_input_tokens_seen': %d, 'train_runtime': %s, " + (
        "'train_tokens_per_second': %s}"
    )
    lines = [line % (8000, "8.0", "1000.0"), line % (8000, "9.0", "888.9"), line % (10000, "10.0", "1000.0")]
    # the second line's counter did not move (as after an evaluation): its average since the start is not sent as a
    # current rate, and the interval restarts there (2000 tokens in the 1 s after it)
    assert rates(feed(lines)[0]) == [1000.0, 2000.0]


def test_trl_num_tokens_only_where_hf_counter_is_off() -> None:
    line = "{'loss': 5.9, 'learning_rate': 3e-05, 'num_tokens': %s, 'epoch': 0.5, 'num_input_tokens_seen': %d}"
    assert rates(feed([line % ("100.0", 1000), line % ("200.0", 3000)])[0]) == [2000.0]  # HF's counter, once
    line = "{'loss': 5.9, 'learning_rate': 3e-05, 'num_tokens': %s, 'epoch': 0.5}"
    assert rates(feed([line % "100.0", line % "300.0"])[0]) == [200.0]


def test_llama_factory_echo_sends_nothing() -> None:
    echo = (
        " 20%|██        | 4/20 [00:00<00:01,  9.62it/s][INFO|2026-12-06 18:44:24] llamafactory.train.callbacks:143 >> "
        "{'loss': 6.0135, 'learning_rate': 8.0000e-05, 'epoch': 0.25, 'throughput': 12101.94}"
    )
    observed, _ = feed([echo, echo])
    assert observed == []


def test_lightning_validation_rates_are_not_read_and_the_unit_is_said() -> None:
    observed, _ = feed(["{'validate/device/items_per_sec': 100.0, 'validate/items_per_sec': 200.0}"], num_gpus=2)
    assert observed == []
    observed, _ = feed(["{'train|device|items_per_sec': 100.0, 'train|items_per_sec': 200.0}"], num_gpus=2)
    assert rates(observed) == [200.0]
    assert "length_fn" in observed[0].note


def test_every_format_here_is_declared_with_real_trainer_titles() -> None:
    formats = [*hf.FORMATS, *llama_factory.FORMATS, *unsloth.FORMATS, *lightning.FORMATS]
    assert all(fmt.declarations for fmt in formats)
    trainers = {d.trainer for fmt in formats for d in fmt.declarations}
    expected = {"Hugging Face Trainer", "TRL", "Axolotl", "LLaMA-Factory", "Liger-Kernel", "Unsloth"}
    assert expected | {"Lightning ThroughputMonitor"} == trainers
