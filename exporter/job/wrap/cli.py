"""``mfumon wrap [options] -- CMD ARGS...``: run a training or inference command and report its throughput.

The command's output is passed through unchanged while its log lines are read for throughput (the formats in
:mod:`.patterns`, or ``--pattern``) by :mod:`.relay`; a background `JobReporter` posts it to the aggregator, and the
job is ended with the command's exit status, which ``mfumon wrap`` also exits with.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence

from mfumon.exporter.cliopts import add_log_level_option, add_token_file_option
from mfumon.exporter.job import fingerprint
from mfumon.exporter.job.models import ModelSpec, from_hf_config
from mfumon.exporter.job.reporter import JobReporter
from mfumon.exporter.job.reporter._env import default_world_size, read_token
from mfumon.exporter.job.wrap.cmdline import micro_batch_from_command, seq_len_from_command
from mfumon.exporter.job.wrap.explain import explain
from mfumon.exporter.job.wrap.patterns import RATE_GROUPS, LogParser, ParseContext, compile_user_pattern, to_number
from mfumon.exporter.job.wrap.proc import run_child
from mfumon.exporter.job.wrap.relay import Relay
from mfumon.mfu import DTYPES, PeakTable
from mfumon.startup import aggregator_url_problem, fail

logger = logging.getLogger("mfumon.exporter.job.wrap")


def _whole(text: str) -> int:
    """A whole number >= 1, as users write it (``4096``, ``4,096``)."""
    try:
        value = to_number(text)
    except ValueError:
        value = 0.0
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(value)


def _tag(text: str) -> tuple[str, str]:
    """``key=value`` for ``--tag``."""
    try:
        return fingerprint.parse_tag(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> float:
    """A number > 0: ``15``, ``0.5``, ``989e12``, ``989T``."""
    try:
        value = to_number(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number > 0")
    return value


def _count(text: str) -> int:
    """A parameter count written any usual way: ``8030261248``, ``8,030,261,248``, ``8.03e9``, ``8B``, ``125M``."""
    cleaned = text.strip()
    if cleaned[-1:] in ("b", "m", "k", "t"):
        cleaned = cleaned[:-1] + cleaned[-1].upper()
    try:
        value = to_number(cleaned)
    except ValueError:
        value = 0.0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a parameter count; write it like 8030261248, 8.03e9 or 8B")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mfumon wrap",
        description="Run a command, pass its output through, and report the throughput its logs show.",
        epilog="example: mfumon wrap --num-gpus 8 --model config.json -- torchrun --nproc-per-node 8 t.py",
    )
    conn = parser.add_argument_group("aggregator")
    conn.add_argument("--url", help="aggregator URL (env MFUMON_URL, default http://127.0.0.1:8000)")
    add_token_file_option(conn)
    conn.add_argument("--interval", type=_positive, default=15.0, help="seconds between reports (default 15)")
    job = parser.add_argument_group("job")
    job.add_argument("--job-id", help="default: MFUMON_JOB_ID, SLURM_JOB_ID, TORCHELASTIC_RUN_ID, ... or generated")
    job.add_argument("--kind", choices=("training", "inference"), help="default training (inference for vLLM)")
    job.add_argument(
        "--num-gpus", type=_whole, help="GPUs of the whole job (default WORLD_SIZE or CUDA_VISIBLE_DEVICES)"
    )
    job.add_argument("--gpu-model", help='e.g. "NVIDIA H100 80GB HBM3" or "h100-sxm" (default: exporters attribute)')
    job.add_argument("--dtype", choices=DTYPES, help="precision of the dense peak (default bf16)")
    job.add_argument("--peak-flops-per-gpu", type=_positive, help="dense peak FLOP/s of one device (e.g. 989e12)")
    job.add_argument("--gpus-requested", type=_whole, help="GPUs the job asked the scheduler for")
    job.add_argument("--recompute-activations", action="store_true", default=None, help="full activation recompute")
    for label, meaning in (("name", "a readable name"), ("team", "the owning team"), ("pool", "the GPU pool")):
        job.add_argument(f"--{label}", help=f"the job's label: {meaning}")
    job.add_argument(
        "--tag",
        action="append",
        type=_tag,
        default=[],
        metavar="KEY=VALUE",
        help="a label of your own for the job's software fingerprint (repeatable), e.g. --tag image=train:v42",
    )
    model = parser.add_argument_group("model")
    model.add_argument("--model", help="HF config.json (or its folder), or a JSON object of model fields")
    for label in ("params", "active-params"):
        model.add_argument(f"--{label}", type=_count, help="e.g. 8030261248, 8.03e9 or 8B")
    for label in ("layers", "heads", "head-dim"):
        model.add_argument(f"--{label}", type=_whole, help=f"model {label} (attention FLOPs need all three)")
    model.add_argument("--flops-per-token", type=_positive, help="explicit FLOPs per token; overrides the formula")
    model.add_argument("--seq-len", type=_whole, help="default: the command's --seq-length/--max_seq_length/...")
    logs = parser.add_argument_group("log parsing")
    logs.add_argument(
        "--tokens-per-step", type=_whole, help="whole-job tokens of one iteration (nanoGPT, LitGPT, it/s lines)"
    )
    logs.add_argument(
        "--pattern",
        action="append",
        default=[],
        help="regex whose named group says what its number is: " + ", ".join(RATE_GROUPS[:2]) + ", "
        "tokens and seconds, " + ", ".join(RATE_GROUPS[3:]) + r"; \N matches a number (12,345 or 14.2K)",
    )
    logs.add_argument("--no-builtin-patterns", action="store_true", help="use only --pattern")
    logs.add_argument(
        "--rate-scope",
        choices=("job", "device"),
        help="what a figure whose meaning the trainer changed between versions is: the whole job's or one GPU's",
    )
    logs.add_argument(
        "--explain",
        nargs="?",
        const="-",
        metavar="LOG",
        help="print, for each line of LOG (default stdin), which format read it and what wrap would send; "
        "runs nothing, contacts no aggregator",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every report and the aggregator's answer")
    parser.add_argument("-q", "--quiet", action="store_true", help="no messages of our own on stderr")
    add_log_level_option(parser, None)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    return parser


def _model_spec(args: argparse.Namespace) -> ModelSpec | None:
    """The model from --model and the per-field flags; ``ValueError`` with a message in the user's terms."""
    spec: ModelSpec | None = None
    if args.model:
        text = args.model.strip()
        if text.startswith("{"):
            try:
                fields = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"--model {text!r} is not valid JSON ({exc})") from None
            try:
                spec = ModelSpec(**fields)
            except TypeError:
                known = "params, active_params, layers, heads, head_dim, seq_len, flops_per_token, name"
                raise ValueError(f"--model {text!r} has a field mfumon does not know; the fields are {known}") from None
        else:
            if not os.path.exists(text):
                raise ValueError(
                    f"--model {text!r}: no such file or folder (give a HF config.json, the model folder holding "
                    "it, or a JSON object such as '{\"params\": 7e9}')"
                )
            try:
                spec = from_hf_config(text)
            except (OSError, ValueError, KeyError) as exc:
                raise ValueError(f"--model {text!r} is not a Hugging Face config mfumon can read ({exc})") from None
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


def _num_gpus(args: argparse.Namespace) -> tuple[int | None, str]:
    """The job's GPU count and where it came from."""
    if args.num_gpus:
        return int(args.num_gpus), "--num-gpus"
    world = default_world_size()
    if world:
        return world, "WORLD_SIZE"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    devices = [d for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    return (len(devices), "CUDA_VISIBLE_DEVICES") if devices else (None, "unknown")


def _explain(parser: argparse.ArgumentParser, args: argparse.Namespace, command: list[str]) -> int:
    """``--explain [LOG]``: the verdict on each line of a log; the options a wrapped run would get still apply."""
    try:
        patterns = tuple(compile_user_pattern(p) for p in args.pattern)
        model = _model_spec(args)
    except ValueError as exc:
        parser.error(str(exc))
    seq_len = args.seq_len or (model.seq_len if model else None) or seq_len_from_command(command)
    context = ParseContext(
        seq_len=seq_len,
        num_gpus=_num_gpus(args)[0],
        tokens_per_step=args.tokens_per_step,
        micro_batch_size=micro_batch_from_command(command),
        rate_scope=args.rate_scope,
    )
    log_parser = LogParser(context, patterns, builtin=not args.no_builtin_patterns)
    if args.explain == "-":
        explain(sys.stdin, context, log_parser, model=model, kind=args.kind or "training")
        return 0
    try:
        with open(args.explain, encoding="utf-8", errors="replace", newline="") as log:
            explain(_lines(log), context, log_parser, model=model, kind=args.kind or "training")
    except OSError as exc:
        parser.error(f"--explain {args.explain!r}: {exc.strerror or exc}")
    return 0


def _lines(log: Iterable[str]) -> Iterator[str]:
    """The log's lines split as a wrapped run splits its output: at ``\n`` and at ``\r`` (progress bars)."""
    for chunk in log:
        yield from (part for part in re.split(r"[\r\n]", chunk) if part)


def _gpu_model_problem(args: argparse.Namespace) -> str | None:
    """A ``--gpu-model`` the peak table does not know (and no ``--peak-flops-per-gpu``): every MFU would be missing."""
    if not args.gpu_model or args.gpu_model == "auto" or args.peak_flops_per_gpu is not None:
        return None
    if PeakTable().resolve(args.gpu_model) is not None:
        return None
    return (
        f"--gpu-model {args.gpu_model!r} is not a GPU model mfumon knows: give its device name "
        "(e.g. 'NVIDIA H100 80GB HBM3') or short name (h100-sxm), or its peak with --peak-flops-per-gpu"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``mfumon wrap``: returns the command's exit status (128 + N if killed by signal N)."""
    argv = list(argv or [])
    options, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = build_parser()
    args = parser.parse_args(options)
    command = command or list(args.command)
    if args.explain is not None:
        return _explain(parser, args, command)
    if not command:
        parser.error("no command given; usage: mfumon wrap [options] -- CMD ARGS...")
    level: int | str = logging.CRITICAL + 1 if args.quiet else logging.INFO if args.verbose else logging.WARNING
    if args.log_level and not args.quiet:
        level = args.log_level.upper()
    logging.basicConfig(level=level, format="%(asctime)s mfumon wrap %(levelname)s: %(message)s")
    if args.verbose:  # every report and the aggregator's answer (logged by the reporter at DEBUG)
        logging.getLogger("mfumon.exporter.job.reporter").setLevel(logging.DEBUG)
    try:
        patterns = tuple(compile_user_pattern(p) for p in args.pattern)
        model = _model_spec(args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        token = read_token(args.token_file)
    except OSError as exc:
        parser.error(f"cannot read the token file (--token-file or MFUMON_TOKEN_FILE): {exc}")
    problem = aggregator_url_problem(args.url or os.environ.get("MFUMON_URL")) or _gpu_model_problem(args)
    if problem is not None:
        return fail("mfumon wrap", problem, code=2)
    seq_from_command = seq_len_from_command(command)
    seq_len = args.seq_len or (model.seq_len if model else None) or seq_from_command
    if model is not None and seq_len and model.seq_len is None:
        model = model.replace(seq_len=seq_len)
    num_gpus, gpus_from = _num_gpus(args)
    if model is None:
        logger.warning(
            "no model described (--model, --params or --flops-per-token): the aggregator refuses reports "
            "without one, unless the log states FLOP/s too (Megatron-LM --log-throughput, NeMo, MaxText, nanotron)"
        )
    reporter = JobReporter(
        args.job_id,
        url=args.url,
        token=token,
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
        profile=False,  # the wrapper reads the job's logs; only a reporter inside the training process can profile
        tags=dict(args.tag),
        software_from="installed",  # the training runs in the child: what is installed here is what it runs
    )
    context = ParseContext(
        seq_len=seq_len,
        num_gpus=num_gpus,
        tokens_per_step=args.tokens_per_step,
        micro_batch_size=micro_batch_from_command(command),
        rate_scope=args.rate_scope,
    )
    log_parser = LogParser(context, patterns, builtin=not args.no_builtin_patterns)
    relay = Relay(reporter, model, context, kind_given=args.kind is not None)
    lines = 0

    def on_line(line: str, now: float) -> None:
        nonlocal lines
        lines += 1
        for observation in log_parser.feed(line, now):
            relay.observe(observation)

    env = {**os.environ, "MFUMON_JOB_ID": reporter.job_id}
    # A Python child writing to a pipe would otherwise buffer its logs in 8 KiB blocks.
    env.setdefault("PYTHONUNBUFFERED", "1")
    if reporter.active:
        logger.info("reporting job %s to %s every %gs", reporter.job_id, reporter.url, args.interval)
        logger.info(
            "GPUs: %s (%s); sequence length: %s; model: %s",
            num_gpus or "unknown",
            gpus_from,
            seq_len or "unknown",
            model.to_dict() if model else "none",
        )
    try:
        status = run_child(command, on_line, env=env)
    except OSError as exc:
        logger.error("cannot run %s: %s", command[0], exc)
        status = 126 if isinstance(exc, PermissionError) else 127
    for observation in log_parser.close():
        relay.observe(observation)
    if reporter.active:
        relay.finish(lines)
    reporter.close(exit_code=status)
    return status
