"""What the wrapped command's own arguments say about the job: its sequence length and micro batch size.

Trainers take these as flags (Megatron ``--seq-length 4096``, HF examples ``--max_seq_length``, nanoGPT
``--block_size=1024``, torchtitan ``--training.seq_len``, LitGPT ``--train.max_seq_length``) or, with Hydra and
MaxText, as ``key=value`` overrides (NeMo ``model.encoder_seq_length=4096``, MaxText ``max_target_length=2048``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

SEQ_LEN_FLAGS = (
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
    "--train.max_seq_length",
)
SEQ_LEN_KEYS = (
    "model.encoder_seq_length",
    "model.seq_length",
    "model.data.seq_length",
    "max_target_length",
    "seq_length",
    "seq_len",
)
MICRO_BATCH_FLAGS = ("--train.micro_batch_size", "--micro_batch_size", "--micro-batch-size")


def _positive(value: str) -> int | None:
    return int(value) if value.isdigit() and int(value) > 0 else None


def flag_value(command: Sequence[str], flags: Iterable[str]) -> int | None:
    """The positive integer after one of ``flags`` (``--flag 4096`` or ``--flag=4096``), else None."""
    flags = tuple(flags)
    for index, arg in enumerate(command):
        flag, sep, value = arg.partition("=")
        if flag in flags:
            if not sep and index + 1 < len(command):
                value = command[index + 1]
            found = _positive(value)
            if found is not None:
                return found
    return None


def override_value(command: Sequence[str], keys: Iterable[str]) -> int | None:
    """The positive integer of a ``key=value`` override (Hydra's ``++key=value`` too), else None."""
    keys = tuple(keys)
    for arg in command:
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key in keys:
            found = _positive(value)
            if found is not None:
                return found
    return None


def seq_len_from_command(command: Sequence[str]) -> int | None:
    """The sequence length the command line gives its trainer, if it gives one."""
    return flag_value(command, SEQ_LEN_FLAGS) or override_value(command, SEQ_LEN_KEYS)


def micro_batch_from_command(command: Sequence[str]) -> int | None:
    """The per-GPU micro batch size of the command line (LitGPT's ``--train.micro_batch_size``)."""
    return flag_value(command, MICRO_BATCH_FLAGS)
