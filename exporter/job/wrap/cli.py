"""``mfumon wrap [options] -- CMD ARGS...``: run a training or inference command and report its throughput.

The command's output is passed through unchanged while its log lines are read for throughput (Megatron-LM,
Hugging Face Trainer, torchtitan, nanoGPT, vLLM, or ``--pattern``); a background `JobReporter` posts it to the
aggregator, and the job is ended with the command's exit status, which ``mfumon wrap`` also exits with.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
from collections.abc import Sequence

from exporter.job.models import ModelSpec, from_hf_config
from exporter.job.reporter import JobReporter
from exporter.job.reporter._env import default_world_size, read_token
from exporter.job.wrap.patterns import LogParser, Observation, ParseContext, compile_user_pattern
from exporter.job.wrap.proc import run_child

logger = logging.getLogger(__name__)

# Flags through which trainers take their sequence length (Megatron, HF examples, nanoGPT, torchtitan, ...).
_SEQ_LEN_FLAGS = (
    "--seq-length",
    "--seq_length",
    "--seq-len",
    "--seq_len",
    "--max-seq-length",
    "--max_seq_length",
    "--max_seq_len",
    "--block_size",
    "--block-size",
    "--training.seq_len",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mfumon wrap",
        description="Run a command, pass its output through, and report the throughput its logs show.",
        epilog="example: mfumon wrap --num-gpus 8 --model config.json -- torchrun --nproc-per-node 8 t.py",
    )
    conn = parser.add_argument_group("aggregator")
    conn.add_argument("--url", help="aggregator URL (env MFUMON_URL, default http://127.0.0.1:8000)")
    conn.add_argument("--token-file", help="file holding the ingest token (default: env MFUMON_TOKEN)")
    conn.add_argument("--interval", type=float, default=15.0, help="seconds between reports (default 15)")
    job = parser.add_argument_group("job")
    job.add_argument("--job-id", help="default: MFUMON_JOB_ID, SLURM_JOB_ID, TORCHELASTIC_RUN_ID, ... or generated")
    job.add_argument("--kind", choices=("training", "inference"), help="default training (inference for vLLM)")
    job.add_argument("--num-gpus", type=int, help="GPUs of the whole job (default WORLD_SIZE or CUDA_VISIBLE_DEVICES)")
    job.add_argument("--gpu-model", help='e.g. "NVIDIA H100 80GB HBM3" or "h100-sxm" (default: exporters attribute)')
    job.add_argument("--dtype", choices=("bf16", "fp16", "fp8", "tf32", "fp32"))
    job.add_argument("--peak-flops-per-gpu", type=float, help="dense peak FLOP/s of one device (overrides the table)")
    job.add_argument("--gpus-requested", type=int)
    job.add_argument("--recompute-activations", action="store_true", default=None, help="full activation recompute")
    for label in ("name", "team", "pool"):
        job.add_argument(f"--{label}")
    model = parser.add_argument_group("model")
    model.add_argument("--model", help="HF config.json (or its folder), or a JSON object of model fields")
    for label in ("params", "active-params"):
        model.add_argument(f"--{label}", type=_count, help="e.g. 8030261248 or 8.03e9")
    for label in ("layers", "heads", "head-dim"):
        model.add_argument(f"--{label}", type=int)
    model.add_argument("--flops-per-token", type=float)
    model.add_argument("--seq-len", type=int, help="default: the command's --seq-length/--max_seq_length/...")
    logs = parser.add_argument_group("log parsing")
    logs.add_argument("--tokens-per-step", type=int, help="whole-job tokens of one iteration (nanoGPT, custom)")
    logs.add_argument(
        "--pattern",
        action="append",
        default=[],
        help="regex with a named group tokens_per_second, tokens_per_second_per_gpu, or tokens and seconds",
    )
    logs.add_argument("--no-builtin-patterns", action="store_true", help="use only --pattern")
    parser.add_argument("-v", "--verbose", action="store_true", help="also log what is reported, to stderr")
    parser.add_argument("-q", "--quiet", action="store_true", help="no messages of our own on stderr")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    return parser


def _count(text: str) -> int:
    """A parameter count written either way: ``8030261248`` or ``8.03e9``."""
    return int(float(text))


def seq_len_from_command(command: Sequence[str]) -> int | None:
    """The sequence length in the command line (``--seq-length 4096``, ``--block_size=1024``)."""
    for index, arg in enumerate(command):
        flag, _, value = arg.partition("=")
        if flag in _SEQ_LEN_FLAGS:
            if not value and index + 1 < len(command):
                value = command[index + 1]
            if value.isdigit() and int(value) > 0:
                return int(value)
    return None


def _model_spec(args: argparse.Namespace) -> ModelSpec | None:
    spec: ModelSpec | None = None
    if args.model:
        text = args.model.strip()
        spec = ModelSpec(**json.loads(text)) if text.startswith("{") else from_hf_config(text)
    explicit = {
        "params": args.params,
        "active_params": args.active_params,
        "layers": args.layers,
        "heads": args.heads,
        "head_dim": args.head_dim,
        "flops_per_token": args.flops_per_token,
        "seq_len": args.seq_len,
    }
    explicit = {k: v for k, v in explicit.items() if v is not None}
    if spec is None and not ({"params", "flops_per_token"} & explicit.keys()):
        return None
    return spec.replace(**explicit) if spec is not None else ModelSpec(**explicit)


def _num_gpus(args: argparse.Namespace) -> int | None:
    if args.num_gpus:
        return int(args.num_gpus)
    world = default_world_size()
    if world:
        return world
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    devices = [d for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    return len(devices) or None


class _Relay:
    """Turns parsed observations into reporter calls, filling in what a line alone cannot say."""

    def __init__(self, reporter: JobReporter, model: ModelSpec | None, num_gpus: int, kind_given: bool):
        self.reporter = reporter
        self.model = model
        self.num_gpus = num_gpus
        self.kind = reporter.kind
        self._kind_given = kind_given
        self._warned: set[str] = set()

    def observe(self, obs: Observation) -> None:
        if obs.kind and obs.kind != self.kind and not self._kind_given:
            self.kind = obs.kind
            self.reporter.update(kind=obs.kind)
        rate = obs.tokens_per_second
        flops = obs.flops_per_second_per_gpu
        if rate is None and flops is not None:
            per_token = self.model.flops_per_token_for(self.kind) if self.model else None
            if not per_token:
                self._warn_once("flops", "log shows FLOP/s but not tokens: pass --seq-len or describe the model")
                return
            rate = flops * self.num_gpus / per_token
        elif rate and flops and self.model is None:
            # Megatron printed both: its own FLOPs per token stands in for a model nobody described.
            self.model = ModelSpec(flops_per_token=flops * self.num_gpus / rate)
            self.reporter.update(model=self.model)
        if rate is not None and rate >= 0:
            self.reporter.record_throughput(rate, step_seconds=obs.step_seconds, source=obs.source, step=obs.step)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning("mfumon wrap: %s", message)


def main(argv: Sequence[str] | None = None) -> int:
    """``mfumon wrap``: returns the command's exit status (128 + N if killed by signal N)."""
    argv = list(argv or [])
    options, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = build_parser()
    args = parser.parse_args(options)
    command = command or list(args.command)
    if not command:
        parser.error("no command given; usage: mfumon wrap [options] -- CMD ARGS...")
    level = logging.CRITICAL + 1 if args.quiet else logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s mfumon wrap %(levelname)s: %(message)s")
    try:
        patterns = tuple(compile_user_pattern(p) for p in args.pattern)
        model = _model_spec(args)
    except (ValueError, OSError, TypeError, re.error) as exc:
        parser.error(str(exc))
    seq_len = args.seq_len or (model.seq_len if model else None) or seq_len_from_command(command)
    if model is not None and seq_len and model.seq_len is None:
        model = model.replace(seq_len=seq_len)
    num_gpus = _num_gpus(args)
    if model is None:
        logger.warning(
            "no model described (--model, --params or --flops-per-token): the aggregator refuses reports "
            "without one, unless the log states FLOP/s too (Megatron-LM --log-throughput)"
        )
    reporter = JobReporter(
        args.job_id,
        url=args.url,
        token=read_token(args.token_file),
        kind=args.kind or "training",
        model=model,
        num_gpus=num_gpus,
        gpu_model=args.gpu_model,
        dtype=args.dtype,
        peak_flops_per_gpu=args.peak_flops_per_gpu,
        recompute_activations=args.recompute_activations,
        name=args.name,
        team=args.team,
        pool=args.pool,
        gpus_requested=args.gpus_requested,
        interval_seconds=args.interval,
    )
    context = ParseContext(seq_len=seq_len, num_gpus=num_gpus or 1, tokens_per_step=args.tokens_per_step)
    log_parser = LogParser(context, patterns, builtin=not args.no_builtin_patterns)
    relay = _Relay(reporter, model, num_gpus or 1, kind_given=args.kind is not None)

    def on_line(line: str, now: float) -> None:
        observation = log_parser.feed(line, now)
        if observation is not None:
            relay.observe(observation)

    env = {**os.environ, "MFUMON_JOB_ID": reporter.job_id}
    # A Python child writing to a pipe would otherwise buffer its logs in 8 KiB blocks.
    env.setdefault("PYTHONUNBUFFERED", "1")
    if reporter.active:
        logger.info("reporting job %s to %s every %gs", reporter.job_id, reporter.url, args.interval)
    try:
        status = run_child(command, on_line, env=env)
    except OSError as exc:
        logger.error("cannot run %s: %s", command[0], exc)
        status = 126 if isinstance(exc, PermissionError) else 127
    reporter.close(exit_code=status)
    return status
