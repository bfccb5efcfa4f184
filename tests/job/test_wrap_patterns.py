"""Built-in and user log patterns of ``mfumon wrap``, on lines in the format each project prints."""

from __future__ import annotations

import pytest

from exporter.job.wrap.cli import seq_len_from_command
from exporter.job.wrap.patterns import LogParser, ParseContext, compile_user_pattern, to_number

MEGATRON = (
    " [2025-04-13 23:41:12] iteration      100/    1000 | consumed samples:        51200 | elapsed time per "
    "iteration (ms): 1250.0 | throughput per GPU (TFLOP/s/GPU): 187.5 | learning rate: 1.000000E-04 | "
    "global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 1.234 | number of "
    "skipped iterations:   0 | number of nan iterations:   0 |"
)
TORCHTITAN = (
    "[rank0]:[titan] 2025-01-01 12:00:00,000 - root - INFO - \x1b[31mstep: 10  \x1b[32mloss:  8.12345  "
    "\x1b[33mgrad_norm:  1.2345  \x1b[34mmemory: 12.34GiB(15.67%)  \x1b[34mtps: 12,345  "
    "\x1b[36mtflops: 123.45  \x1b[35mmfu: 12.34%\x1b[39m"
)
VLLM_V1 = (
    "INFO 05-01 12:00:00 [loggers.py:116] Engine 001: Avg prompt throughput: 1024.3 tokens/s, Avg generation "
    "throughput: 512.7 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.2%, Prefix cache hit "
    "rate: 0.0%"
)
VLLM_V0 = (
    "INFO 07-12 10:00:00 metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 34.5 "
    "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%."
)


def _parser(**context: object) -> LogParser:
    return LogParser(ParseContext(**context))  # type: ignore[arg-type]


def test_megatron_tokens_from_batch_time_and_seq_length() -> None:
    obs = _parser(seq_len=4096, num_gpus=64).feed(MEGATRON, now=0.0)
    assert obs is not None and obs.pattern == "megatron" and obs.step == 100
    assert obs.tokens_per_second == 512 * 4096 / 1.25
    assert obs.flops_per_second_per_gpu == 187.5e12 and obs.step_seconds == 1.25


def test_megatron_without_seq_length_still_gives_flops() -> None:
    obs = _parser(num_gpus=8).feed(MEGATRON, now=0.0)
    assert obs is not None and obs.tokens_per_second is None and obs.flops_per_second_per_gpu == 187.5e12
    plain = MEGATRON.replace(" throughput per GPU (TFLOP/s/GPU): 187.5 |", "")
    assert _parser().feed(plain, now=0.0) is None  # neither tokens nor FLOPs can be known


def test_torchtitan_tps_is_per_device() -> None:
    obs = _parser(num_gpus=8).feed(TORCHTITAN, now=0.0)
    assert obs is not None and obs.tokens_per_second == 12_345 * 8 and obs.step == 10
    validation = "[titan] ... - validate step: 10  loss:  2.1  memory:  1.00GiB(1.00%)  tps: 9,999"
    assert _parser().feed(validation, now=0.0) is None


def test_nanogpt_uses_its_tokens_per_iteration_line() -> None:
    parser = _parser()
    assert parser.feed("tokens per iteration will be: 491,520", now=0.0) is None
    assert parser.feed("iter 0: loss 10.9876, time 31234.56ms, mfu -100.00%", now=1.0) is None  # warm-up
    obs = parser.feed("iter 100: loss 2.3000, time 123.45ms, mfu 35.20%", now=2.0)
    assert obs is not None and obs.tokens_per_second == pytest.approx(491_520 / 0.12345)
    assert obs.step == 100 and obs.step_seconds == pytest.approx(0.12345)
    assert _parser().feed("iter 100: loss 2.3000, time 123.45ms, mfu 35.20%", now=0.0) is None  # tokens unknown
    given = _parser(tokens_per_step=1000).feed("iter 5: loss 2.3000, time 500.00ms, mfu 1.00%", now=0.0)
    assert given is not None and given.tokens_per_second == 2000


def test_vllm_sums_prompt_and_generation_per_engine() -> None:
    v1 = _parser().feed(VLLM_V1, now=0.0)
    assert v1 is not None and v1.tokens_per_second == pytest.approx(1537.0)
    assert (v1.source, v1.kind) == ("engine001", "inference")
    v0 = _parser().feed(VLLM_V0, now=0.0)
    assert v0 is not None and v0.tokens_per_second == 34.5 and v0.source == "engine"


def test_hf_trainer_rate_from_token_counter_between_lines() -> None:
    parser = _parser()
    first = (
        "{'loss': '2.345', 'grad_norm': '1.23', 'learning_rate': '5e-05', 'epoch': '0.5', "
        "'num_input_tokens_seen': 4096, 'train_runtime': '1.234', 'train_tokens_per_second': '3319'}"
    )
    second = first.replace("4096", "12288").replace("'3319'", "'4096'")
    obs = parser.feed(first, now=10.0)
    assert obs is not None and obs.tokens_per_second == 3319  # first line: the Trainer's own average
    obs = parser.feed(second, now=12.0)
    assert obs is not None and obs.tokens_per_second == (12288 - 4096) / 2.0
    summary = "{'train_runtime': '3.5', 'train_samples_per_second': '8', 'epoch': '1', 'num_input_tokens_seen': 12288}"
    assert parser.feed(summary, now=13.0) is None  # the counter did not move; samples need a seq_len


def test_hf_trainer_summary_samples_need_seq_len() -> None:
    summary = "{'train_runtime': 10.5, 'train_samples_per_second': 9.52, 'train_steps_per_second': 1.19, 'epoch': 1.0}"
    assert _parser().feed(summary, now=0.0) is None
    obs = _parser(seq_len=512).feed(summary, now=0.0)
    assert obs is not None and obs.tokens_per_second == pytest.approx(9.52 * 512)
    quoted = "{'train_runtime': '1.05e+04', 'train_tokens_per_second': '1.234e+04', 'epoch': '1'}"
    obs = _parser().feed(quoted, now=0.0)
    assert obs is not None and obs.tokens_per_second == 12340.0
    assert _parser().feed("{'eval_loss': 2.1, 'eval_samples_per_second': 99.0}", now=0.0) is None


def test_user_patterns_come_first_and_need_a_named_group() -> None:
    rate = compile_user_pattern(r"throughput=(?P<tokens_per_second>[\d.]+)")
    pair = compile_user_pattern(r"processed (?P<tokens>[\d,]+) tokens in (?P<seconds>[\d.]+)s")
    per_gpu = compile_user_pattern(r"tok/s/gpu: (?P<tokens_per_second_per_gpu>\d+)")
    parser = LogParser(ParseContext(num_gpus=4), (rate, pair, per_gpu))
    obs = parser.feed("step 3 throughput=123.5 (tps: 9,999)", now=0.0)
    assert obs is not None and obs.pattern == "custom" and obs.tokens_per_second == 123.5
    obs = parser.feed("processed 10,000 tokens in 2.5s", now=0.0)
    assert obs is not None and obs.tokens_per_second == 4000 and obs.step_seconds == 2.5
    obs = parser.feed("tok/s/gpu: 100", now=0.0)
    assert obs is not None and obs.tokens_per_second == 400
    with pytest.raises(ValueError, match="named group"):
        compile_user_pattern(r"tps=(\d+)")
    only_custom = LogParser(ParseContext(), (rate,), builtin=False)
    assert only_custom.feed(VLLM_V1, now=0.0) is None


def test_unrelated_and_hostile_lines() -> None:
    parser = _parser(seq_len=1024, num_gpus=8)
    for line in (
        "",
        "Epoch 1/10",
        "loss: nan",
        "step: x tps: ,",
        "iteration 5/ 10 | elapsed time per iteration (ms): .",
        "x" * 100_000,
    ):
        assert parser.feed(line, now=0.0) is None


def test_numbers_and_seq_len_flags() -> None:
    assert to_number("12,345") == 12345 and to_number("'1.5e+03'") == 1500
    assert seq_len_from_command(["python", "pretrain_gpt.py", "--seq-length", "4096"]) == 4096
    assert seq_len_from_command(["python", "train.py", "--block_size=1024"]) == 1024
    assert seq_len_from_command(["torchrun", "train.py", "--training.seq_len", "8192"]) == 8192
    assert seq_len_from_command(["python", "train.py", "--seq-length"]) is None
    assert seq_len_from_command(["python", "train.py"]) is None
