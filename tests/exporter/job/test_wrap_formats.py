"""``mfumon wrap``'s built-in formats, on lines as each project prints them (``fixtures/logs``, sources in its README).

Every expected rate is computed here from the numbers in the fixture by the rule the format documents, so a test
fails when a parser reads the wrong field, applies the wrong per-device/whole-job semantics or loses a line.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from mfumon.exporter.job.wrap.cmdline import micro_batch_from_command, seq_len_from_command
from mfumon.exporter.job.wrap.patterns import LogParser, Observation, ParseContext, compile_user_pattern, to_number
from mfumon.exporter.job.wrap.relay import Relay

LOGS = Path(__file__).parent / "fixtures" / "logs"


def read(name: str, *, seconds_per_line: float = 1.0, **context: Any) -> tuple[list[Observation], ParseContext]:
    """Feed a fixture through a parser the way ``mfumon wrap`` does (lines split at ``\\n`` and ``\\r``)."""
    ctx = ParseContext(**context)
    parser = LogParser(ctx)
    observed: list[Observation] = []
    lines = [line for line in re.split(r"[\r\n]", (LOGS / name).read_text(encoding="utf-8")) if line]
    for index, line in enumerate(lines):
        observed += parser.feed(line, now=index * seconds_per_line)
    observed += parser.close()
    return observed, ctx


def rates(observed: list[Observation]) -> list[float]:
    return [o.tokens_per_second for o in observed if o.tokens_per_second is not None]


def test_fixture_readme_lists_every_log() -> None:
    """Every log's source is stated: in the README's table, or in its trainer's ``<trainer>.yml`` declaration."""
    readme = (LOGS / "README.md").read_text(encoding="utf-8")
    declared = {f["file"] for path in LOGS.glob("*.yml") for f in yaml.safe_load(path.read_text())["fixtures"]}
    unsourced = [p.name for p in sorted(LOGS.glob("*.log")) if f"`{p.name}`" not in readme and p.name not in declared]
    assert unsourced == []


# -- Megatron-LM and derived trainers --------------------------------------------------------------------------------


def test_megatron_lm_iterations_seq_length_from_the_argument_dump_and_timers() -> None:
    observed, ctx = read("megatron_lm.log", num_gpus=64)
    assert ctx.seq_len == 4096  # "  seq_length ........ 4096" printed at start-up
    iterations = [o for o in observed if o.pattern == "megatron"]
    assert [o.step for o in iterations] == [10, 20, 30, 40]
    assert rates(iterations) == [512 * 4096 / 1.25] * 4
    assert [o.flops_per_second_per_gpu for o in iterations] == [187.5e12] * 3 + [None]  # no --log-throughput
    timers = [(o.comm_seconds, o.data_wait_seconds) for o in observed if o.pattern == "megatron_timers"]
    # minmax: midpoints of all-grads-sync (40, 60) + layernorm (0.02, 0.04) + embedding (0.03, 0.05) all-reduces
    assert timers[0] == pytest.approx((0.050 + 0.00003 + 0.00004, 0.003))
    assert timers[1] == pytest.approx((0.050, 0.004))  # --timing-log-option max
    assert timers[2] == pytest.approx((0.050, 0.003))  # --timing-log-option all: the mean of every rank


def test_megatron_line_without_seq_length_or_tflops_says_what_is_missing() -> None:
    line = (LOGS / "megatron_lm.log").read_text().splitlines()[-1]
    (observed,) = LogParser(ParseContext(num_gpus=8)).feed(line, now=0.0)
    assert observed.tokens_per_second is None and observed.missing == ("seq_len",)
    assert observed.step_seconds == 1.25


def test_megatron_deepspeed_reads_its_seq_length_and_leaves_deepspeeds_line_as_fallback() -> None:
    observed, ctx = read("megatron_deepspeed.log", num_gpus=32)
    megatron = [o for o in observed if o.pattern == "megatron"]
    assert rates(megatron) == pytest.approx([768 * 4096 / 14.2875, 768 * 4096 / 14.5414])
    assert [o.flops_per_second_per_gpu for o in megatron] == [None, None]  # "TFLOPs:" counts recomputation
    deepspeed = [o for o in observed if o.pattern == "deepspeed"]
    assert deepspeed[0].missing == ("seq_len",)  # before Megatron printed "actual seqlen"
    assert deepspeed[1].tokens_per_second == pytest.approx(58.75503515561452 * 4096)
    assert ctx.seq_len == 4096


def test_deepspeed_throughput_timer_is_global_samples() -> None:
    observed, _ = read("deepspeed.log", seq_len=2048)
    assert rates(observed) == pytest.approx([61.35304005128382 * 2048, 58.75503515561452 * 2048])
    assert [o.step for o in observed] == [199, 200]
    assert {o.missing for o in read("deepspeed.log")[0]} == {("seq_len",)}


def test_deepspeed_before_0_8_epoch_and_step_without_global_step() -> None:
    # before 0.6: "E/S, SamplesPerSec=" (the running average since start_step), 2020 logger format
    observed, _ = read("deepspeed_2020.log", seq_len=1024)
    assert rates(observed) == [13.19749106827976 * 1024, 13.198177991591365 * 1024]
    assert [o.step for o in observed] == [2650, 2700]
    # 0.6: MemAllocated added; its log_dist "step=40" lines are not timer lines
    observed, _ = read("deepspeed_0.6.log", seq_len=128)
    assert rates(observed) == [83.48609168106144 * 128, 83.73838805358588 * 128]
    assert [o.step for o in observed] == [40, 50]
    # 0.7: RunningAvg and Curr, still "E/S, " before 0.8's epoch=/micro_step=/global_step=
    observed, _ = read("deepspeed_0.7.log", seq_len=384)
    assert rates(observed) == [227.48090316379353 * 384, 227.45044884073528 * 384, 227.7217889790298 * 384]
    assert [o.step for o in observed] == [20, 30, 40]
    assert {o.missing for o in read("deepspeed_0.7.log")[0]} == {("seq_len",)}


def test_gpt_neox_samples_per_second() -> None:
    observed, _ = read("gpt_neox.log", seq_len=2048)
    assert rates(observed) == [to_number(f"{32 / 1.2345:.3f}") * 2048, to_number(f"{32 / 1.25:.3f}") * 2048]
    assert [o.flops_per_second_per_gpu for o in observed] == [None, None]  # "approx flops per GPU" counts recompute
    assert {o.missing for o in read("gpt_neox.log")[0]} == {("seq_len",)}


# -- Hugging Face Trainer ---------------------------------------------------------------------------------------------


def test_hf_trainer_5_24_captured_counter_rate_and_summary() -> None:
    observed, _ = read("hf_trainer_5.24.log", seq_len=16, num_gpus=2)
    # first line: the Trainer's own whole-job rate; then the token counter's progress between lines (1 s apart)
    assert rates(observed) == pytest.approx([366.7, 128.0, 128.0, 11.82 * 16, 11.823 * 16])


def test_hf_trainer_4_57_per_step_rate_is_global() -> None:
    observed, _ = read("hf_trainer_4.57_tokens_seen.log", num_gpus=8)
    assert rates(observed) == [65536 / 8.0, 65536.0, 65536.0]  # never multiplied by the GPUs


def test_hf_trainer_4_46_summary_tokens_are_per_device() -> None:
    observed, _ = read("hf_trainer_4.46.log", num_gpus=4, seq_len=512)
    assert [o.missing for o in observed[:2]] == [("hf_token_counter",)] * 2  # per-step lines carry no token count
    assert rates(observed) == [4106.752 * 4, 4106.752 * 4]  # the dict, then the log_metrics block; eval block ignored
    observed, _ = read("hf_trainer_4.46.log", seq_len=512)  # GPU count unknown: global samples/s x seq_len
    assert rates(observed) == [8.021 * 512, 8.021 * 512]
    observed, _ = read("hf_trainer_4.46.log")
    assert [o.missing for o in observed][-2:] == [("seq_len",), ("seq_len",)]


# -- torch-native trainers ---------------------------------------------------------------------------------------------


def test_torchtitan_tps_is_per_device_one_line_per_rank() -> None:
    observed, ctx = read("torchtitan.log", num_gpus=8)
    assert rates(observed) == [12345 * 8, 12655 * 8]  # two ranks' lines: each one device's figure, not a sum
    assert [o.step for o in observed] == [10, 10]  # the validate line is not read
    assert ctx.seq_len == 8192  # "Training starts at step 1, ... sequence length 8192"


def test_torchtitan_2024_wps() -> None:
    observed, _ = read("torchtitan_2024.log", num_gpus=16)
    assert rates(observed) == [1000 * 16, 5678 * 16]
    assert {o.missing for o in read("torchtitan_2024.log")[0]} == {("num_gpus",)}


def test_nanogpt_skips_warm_up_iterations() -> None:
    observed, _ = read("nanogpt.log")
    assert rates(observed) == [pytest.approx(491_520 / 0.12345)]
    (only,) = LogParser(ParseContext()).feed("iter 100: loss 2.3000, time 500.00ms, mfu 1.00%", now=0.0)
    assert only.missing == ("tokens_per_step",)
    (given,) = LogParser(ParseContext(tokens_per_step=1000)).feed("iter 5: loss 2.3, time 500.00ms, mfu 1.0%", 0.0)
    assert given.tokens_per_second == 2000


def test_litgpt_rate_from_the_iteration_counter_skipping_validation() -> None:
    observed, _ = read("litgpt.log", micro_batch_size=4, seq_len=2048, num_gpus=8)
    tokens_per_iteration = 4 * 2048 * 8
    # lines 1 s apart: iter 100 -> 200 in 1 s; validation and checkpoint lines restart the clock at iter 300
    assert rates(observed) == [100 * tokens_per_iteration, 100 * tokens_per_iteration]
    assert [o.step for o in observed if o.tokens_per_second] == [50, 100]
    assert {o.missing for o in read("litgpt.log", seq_len=2048)[0]} == {("tokens_per_step",)}


def test_litgpt_2023_format() -> None:
    observed, _ = read("litgpt_2023.log", tokens_per_step=65536, seconds_per_line=200.0)
    assert rates(observed) == [400 * 65536 / 200.0]


def test_litgpt_pretrain_summary_uses_total_tokens_over_training_time_when_tok_sec_disagrees() -> None:
    # LitGPT >= 0.5.3 pretrain prints Tok/sec = total tokens / the perf_counter() reading at the start: 60.93 here
    (observed,) = read("litgpt_pretrain_summary.log")[0]
    assert observed.tokens_per_second == 999_424 / 48.30
    assert observed.pattern == "litgpt" and observed.step is None
    assert "60.93" in observed.note and "Total tokens" in observed.note


def test_litgpt_finetune_summary_tok_sec_agrees_and_is_used() -> None:
    (observed,) = read("litgpt_finetune_summary.log")[0]
    assert pytest.approx(60.85, rel=0.01) == 2674 / 43.95  # the label agrees with total ÷ time
    assert (observed.tokens_per_second, observed.note) == (60.85, "")


def test_a_note_is_said_once_on_stderr(caplog: pytest.LogCaptureFixture) -> None:
    class Reporter:
        kind = "training"

        def __init__(self) -> None:
            self.recorded: list[float] = []

        def record_throughput(self, rate: float, **_: Any) -> None:
            self.recorded.append(rate)

    reporter = Reporter()
    relay = Relay(reporter, None, ParseContext(), kind_given=False)  # type: ignore[arg-type]
    observed, _ = read("litgpt_pretrain_summary.log")
    with caplog.at_level(logging.WARNING, logger="mfumon.exporter.job.wrap"):
        for obs in observed * 2:
            relay.observe(obs)
    assert reporter.recorded == [999_424 / 48.30] * 2
    assert [r.getMessage() for r in caplog.records] == [f"mfumon wrap: {observed[0].note}"]


# -- NeMo, Composer, MaxText, nanotron --------------------------------------------------------------------------------


def test_nemo2_global_batch_times_seq_length_over_step_time() -> None:
    observed, _ = read("nemo2.log", seq_len=8192)
    assert rates(observed) == pytest.approx([1 * 8192 / 2.193, 128 * 8192 / 12.64, 128 * 8192 / 12.64])
    assert [o.step_seconds for o in observed] == [2.193, 12.64, 12.64]
    assert {o.missing for o in read("nemo2.log")[0]} == {("seq_len",)}


def test_nemo2_tokens_per_gpu_and_tflops() -> None:
    tokens, flops = read("nemo2_flops.log", num_gpus=8)[0]
    assert tokens.tokens_per_second == pytest.approx(1.073e4 * 8)
    assert (flops.tokens_per_second, flops.flops_per_second_per_gpu) == (None, 865.7e12)


def test_nemo1_progress_bar() -> None:
    first, second, rounded = read("nemo1.log", seq_len=4096)[0]
    assert first.tokens_per_second == pytest.approx(12288 / 6 * 4096 / 49.5)  # consumed / (global_step + 1) = batch
    assert second.tokens_per_second == pytest.approx(256 * 4096 / 3.13)
    assert rounded.missing == ("tokens_per_step",)  # "global_step=2e+3": the batch cannot be derived exactly
    *_, given = read("nemo1.log", tokens_per_step=640 * 4096)[0]
    assert given.tokens_per_second == pytest.approx(640 * 4096 / 1.9)


def test_composer_console_block() -> None:
    observed, _ = read("composer.log")
    assert rates(observed) == [40448.0, 40960.0]
    assert [o.step for o in observed] == [10, 20]


def test_composer_epoch_header_with_metric_lines_indented_by_spaces() -> None:
    # Composer 0.21.3 on 16 GPUs, copied from a blog: "[epoch=1][batch=5/5]:", the tab of each line become spaces
    (observed,) = read("composer_0.21_spaces.log")[0]
    assert (observed.tokens_per_second, observed.step) == (20082.8418, 5)


def test_nemo_automodel_tps_is_the_whole_job() -> None:
    for context in ({}, {"num_gpus": 8}):  # "(821.81/gpu)" is tps / (dp x cp): never scaled by the GPUs
        observed, _ = read("nemo_automodel.log", **context)
        assert rates(observed) == [6574.51, 10144.41, 10021.50]
        assert [o.step for o in observed] == [13, 14, 15]
        assert {o.pattern for o in observed} == {"nemo_automodel"}


def test_maxtext_tokens_per_device_skipping_the_compile_step() -> None:
    observed, _ = read("maxtext.log", num_gpus=8)
    assert rates(observed) == pytest.approx([6638.574 * 8, 6638.574 * 8])
    assert [(o.step, o.step_seconds, o.flops_per_second_per_gpu) for o in observed] == [
        (10, 1.234, 345.678e12),
        (11, 1.234, 345.678e12),
    ]


def test_nanotron_human_format_and_the_old_exponent_format() -> None:
    observed, _ = read("nanotron.log")
    assert rates(observed) == pytest.approx([426e3, 14.2e3, 426123.0])
    assert [o.flops_per_second_per_gpu for o in observed] == pytest.approx([123e12, 123e12, 123.4e12])
    assert observed[0].step_seconds == pytest.approx(1.23)


# -- vLLM --------------------------------------------------------------------------------------------------------------


def test_vllm_engine_lines_per_engine_and_v0() -> None:
    observed, _ = read("vllm_engine.log")
    assert [(o.tokens_per_second, o.source, o.kind) for o in observed] == [
        (pytest.approx(1537.0), "engine000", "inference"),
        (1500.0, "engine001", "inference"),
    ]
    (v0,) = read("vllm_engine_v0.log")[0]
    assert (v0.tokens_per_second, v0.source) == (34.5, "engine")


@pytest.mark.parametrize(
    ("name", "rate"),
    [
        ("vllm_bench_throughput.log", 5678.90),
        ("vllm_bench_throughput_0.4.log", 5678.90),
        ("vllm_bench_serve.log", 25393.81),
    ],
)
def test_vllm_benchmark_scripts(name: str, rate: float) -> None:
    (observed,) = read(name)[0]
    assert (observed.tokens_per_second, observed.kind) == (rate, "inference")


# -- what every format must survive ---------------------------------------------------------------------------------


def test_unrelated_and_hostile_lines() -> None:
    parser = LogParser(ParseContext(seq_len=1024, num_gpus=8))
    for line in (
        "",
        "Epoch 1/10",
        "loss: nan",
        "step: x tps: ,",
        "iteration 5/ 10 | elapsed time per iteration (ms): .",
        "{'loss': ",
        "***** train metrics *****",
        "  train_samples_per_second = fast",
        "[batch=1/2]:",
        "\t Train throughput/tokens_per_sec: 1e999999",
        "x" * 100_000,
        "completed step: 1, seconds: 0.000, TFLOP/s/device: 1.0, Tokens/s/device: 1.0, total_weights: 1, loss: 1",
    ):
        for observed in parser.feed(line, now=0.0):
            assert observed.tokens_per_second is None or observed.tokens_per_second >= 0
    parser.close()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12,345", 12345),
        ("12_345", 12345),
        ("'3319'", 3319),
        ("1.5e+03", 1500),
        ("14.2K", 14200),
        ("1.07M", 1.07e6),
        ("3G", 3e9),
        ("2B", 2e9),
        ("0.5T", 5e11),
        ("426K", 426e3),
        ("4.260000E+05", 426000.0),
    ],
)
def test_numbers_as_logs_print_them(text: str, value: float) -> None:
    assert to_number(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "K", "fast", "1.2.3", "12 apples"])
def test_what_is_not_a_number(text: str) -> None:
    with pytest.raises(ValueError):
        to_number(text)


def test_seq_len_and_micro_batch_from_the_command_line() -> None:
    assert seq_len_from_command(["python", "pretrain_gpt.py", "--seq-length", "4096"]) == 4096
    assert seq_len_from_command(["python", "train.py", "--block_size=1024"]) == 1024
    assert seq_len_from_command(["torchrun", "train.py", "--training.seq_len", "8192"]) == 8192
    assert seq_len_from_command(["litgpt", "pretrain", "--train.max_seq_length", "2048"]) == 2048
    assert seq_len_from_command(["python", "megatron_gpt_pretraining.py", "model.encoder_seq_length=4096"]) == 4096
    assert seq_len_from_command(["python", "train.py", "++model.data.seq_length=512"]) == 512
    assert seq_len_from_command(["python3", "MaxText/train.py", "base.yml", "max_target_length=2048"]) == 2048
    assert seq_len_from_command(["python", "train.py", "--seq-length"]) is None
    assert seq_len_from_command(["python", "train.py", "--seq-length", "-1"]) is None
    assert seq_len_from_command(["python", "train.py"]) is None
    assert micro_batch_from_command(["litgpt", "pretrain", "--train.micro_batch_size", "4"]) == 4
    assert micro_batch_from_command(["python", "train.py"]) is None


# -- --pattern ---------------------------------------------------------------------------------------------------------


def _custom(regex: str, line: str, **context: Any) -> Observation:
    (observed,) = LogParser(ParseContext(**context), (compile_user_pattern(regex),), builtin=False).feed(line, 0.0)
    return observed


@pytest.mark.parametrize(
    ("regex", "line", "context", "rate"),
    [
        (r"throughput=(?P<tokens_per_second>\N)", "step 3 throughput=12,345.5", {}, 12345.5),
        (r"tok/s/gpu: (?P<tokens_per_second_per_gpu>\N)", "tok/s/gpu: 14.2K", {"num_gpus": 8}, 14200 * 8),
        (r"(?P<tokens>[\d,]+) tokens in (?P<seconds>[\d.]+)s", "10,000 tokens in 2.5s", {}, 4000),
        (r"(?P<samples_per_second>\N) samples/s", "31.5 samples/s", {"seq_len": 2048}, 31.5 * 2048),
        (
            r"(?P<samples_per_second_per_gpu>\N) samples/s/gpu",
            "4 samples/s/gpu",
            {"seq_len": 1024, "num_gpus": 8},
            32768,
        ),
        (
            r"(?P<iterations_per_second>[\d.]+)it/s",
            "50%|█████ | 50/100 [00:20<00:20, 2.50it/s]",
            {"tokens_per_step": 4096},
            10240,
        ),
        (
            r"(?P<seconds_per_iteration>[\d.]+)s/it",
            "50/100 [01:40<01:40, 2.00s/it]",
            {"tokens_per_step": 1_000_000},
            5e5,
        ),
        (r"step took (?P<milliseconds_per_iteration>\N) ms", "step took 1,250 ms", {"tokens_per_step": 1000}, 800),
        (r"rate (?P<tokens_per_second>\N)", "rate 1.2G", {}, 1.2e9),
    ],
)
def test_pattern_groups(regex: str, line: str, context: dict[str, Any], rate: float) -> None:
    observed = _custom(regex, line, **context)
    assert observed.pattern == "custom" and observed.tokens_per_second == pytest.approx(rate)


@pytest.mark.parametrize(
    ("regex", "line", "missing"),
    [
        (r"(?P<samples_per_second>\N) samples/s", "31.5 samples/s", ("seq_len",)),
        (r"(?P<samples_per_second_per_gpu>\N) samples/s", "31.5 samples/s", ("seq_len", "num_gpus")),
        (r"(?P<tokens_per_second_per_gpu>\N) tok/s", "100 tok/s", ("num_gpus",)),
        (r"(?P<iterations_per_second>[\d.]+)it/s", "2.50it/s", ("tokens_per_step",)),
    ],
)
def test_pattern_groups_say_what_they_miss(regex: str, line: str, missing: tuple[str, ...]) -> None:
    observed = _custom(regex, line)
    assert (observed.tokens_per_second, observed.missing) == (None, missing)


def test_pattern_step_group_and_precedence_over_builtin_formats() -> None:
    pattern = compile_user_pattern(r"step (?P<step>\d+) .*throughput=(?P<tokens_per_second>\N)")
    parser = LogParser(ParseContext(num_gpus=8), (pattern,))
    (observed,) = parser.feed("step 7 tps: 9,999 throughput=123.5", now=0.0)
    assert (observed.pattern, observed.tokens_per_second, observed.step) == ("custom", 123.5, 7)


@pytest.mark.parametrize(
    ("regex", "message"),
    [
        (r"tps=(\d+)", "needs a named group that says what its number is"),
        (r"(?P<tokens>\d+) tokens", "has a group 'tokens' but no group 'seconds'"),
        (r"(?P<tokens_per_second>[\d+", "is not a valid regular expression"),
    ],
)
def test_pattern_errors_say_what_is_wrong(regex: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        compile_user_pattern(regex)
