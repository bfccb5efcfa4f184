"""Which parallelism a process group serves, from the name or description the framework gave it: shared by the
profile summary (job side) and the NCCL Inspector reader (node side).

PyTorch (2.2+) writes ``Process Group Name`` and ``Process Group Description`` into the trace for every collective;
the description is what the training code named the group (``mesh_tp`` for a torch DeviceMesh dimension ``tp``,
``TENSOR_MODEL_PARALLEL_GROUP`` in Megatron, ``default_pg`` for the world). Where it names no parallelism the group
is ``other``: a guess would put the wrong advice on the board.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

GROUPS: tuple[str, ...] = ("tp", "pp", "dp", "ep", "cp", "other")

# Words of a group's description, in the order they are looked for in it, and the parallelism each names.
_WORDS: Mapping[str, str] = {
    "tp": "tp",
    "tensor": "tp",
    "pp": "pp",
    "pipeline": "pp",
    "pipe": "pp",
    "dp": "dp",
    "data": "dp",
    "ddp": "dp",
    "fsdp": "dp",
    "hsdp": "dp",
    "shard": "dp",
    "replicate": "dp",
    "ep": "ep",
    "expert": "ep",
    "moe": "ep",
    "cp": "cp",
    "context": "cp",
}
_SPLIT = re.compile(r"[^a-z0-9]+")


def group_of(description: str | None, name: str | None = None, *, overrides: Mapping[str, str] | None = None) -> str:
    """The parallelism (one of `GROUPS`) a process group serves: the first word of its description that names one.

    ``overrides`` maps a group's name or description to a parallelism, for groups whose description says nothing.
    """
    for key in (name, description):
        if overrides and key is not None and overrides.get(key) in GROUPS:
            return overrides[key]
    for word in _SPLIT.split((description or "").lower()):
        if word in _WORDS:
            return _WORDS[word]
    return "other"
