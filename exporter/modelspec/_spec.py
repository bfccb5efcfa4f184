"""`ModelSpec`: the ``model`` object of a job report, with the FLOPs formula a job side needs.

The aggregator owns the authoritative formula; the copy here (`flops_per_token_for`) exists only so that
``mfumon wrap`` can turn a log line that prints achieved TFLOP/s (Megatron-LM) back into tokens/s.
Shared by the job side and the node agent (which describes the models of the serving engines it reads).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

# PaLM App. B: 6 = 3 (fwd + two bwd matmuls) x 2 (mul + add); forward only for inference.
_PARAM_FLOPS_FACTOR = {"training": 6, "inference": 2}
_ATTENTION_FLOPS_FACTOR = {"training": 12, "inference": 4}


@dataclass(frozen=True)
class ModelSpec:
    """Model size and shape as the report's ``model`` object expects it; every field is optional.

    ``params`` is the total count of unique parameters, ``active_params`` the part a token goes through in a
    mixture of experts (left empty for dense models). The attention term of the FLOPs formula needs all of
    ``layers``, ``heads``, ``head_dim`` and ``seq_len``; ``flops_per_token`` overrides the formula.
    ``kv_heads`` (grouped-query attention) sizes the KV cache of a serving job, for MBU.
    """

    params: int | None = None
    active_params: int | None = None
    layers: int | None = None
    heads: int | None = None
    head_dim: int | None = None
    seq_len: int | None = None
    flops_per_token: float | None = None
    name: str | None = None
    kv_heads: int | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name != "name" and value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"ModelSpec.{field.name} must be a finite number > 0, got {value!r}")
        if self.params is not None and self.active_params is not None and self.active_params > self.params:
            raise ValueError(f"active_params ({self.active_params}) exceeds params ({self.params})")

    def to_dict(self) -> dict[str, Any]:
        """The report's ``model`` object: known fields only (``None`` means "not known", never sent)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def replace(self, **changes: Any) -> ModelSpec:
        """A copy with some fields changed, e.g. ``spec.replace(seq_len=4096)``."""
        return dataclasses.replace(self, **changes)

    def flops_per_token_for(self, kind: str = "training") -> float | None:
        """FLOPs per token (6N + 12LHQT; inference 2N + 4LHQT); None if unknown."""
        if self.flops_per_token is not None:
            return float(self.flops_per_token)
        matmul_params = self.active_params if self.active_params is not None else self.params
        if matmul_params is None:
            return None
        shape = (self.layers, self.heads, self.head_dim, self.seq_len)
        attention = math.prod(shape) if all(f is not None for f in shape) else 0  # type: ignore[arg-type]
        return float(_PARAM_FLOPS_FACTOR[kind] * matmul_params + _ATTENTION_FLOPS_FACTOR[kind] * attention)
