"""Constrained types shared by the request schemas: every number finite, every id bounded.

The bounds are what every supported database stores (SQLite and PostgreSQL): PostgreSQL's INTEGER is 32-bit and its
text cannot hold NUL, while SQLite takes both, so a value the schema admits must fit the stricter of the two. Use
these types for new fields (and :data:`Step`, :data:`Label` ... in new endpoints) rather than bare ``int``/``str``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

Kind = Literal["training", "inference"]
Dtype = Literal["bf16", "fp16", "fp8", "tf32", "fp32"]
StorageDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
"""How weights or the KV cache are stored, for MBU (bytes per element: 4, 2, 2, 1, 1, 0.5, 0.5)."""

INT32_MAX = 2**31 - 1
"""The largest value of a PostgreSQL INTEGER column (SQLite's are 64-bit): the bound of every int we store."""

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,127}$"
"""Job ids and node names: what schedulers and hostnames use, nothing that needs escaping, at most 128 chars."""

PRINTABLE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
"""No control characters: PostgreSQL text cannot store NUL, and a newline in a label breaks logs and alert text."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _printable(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("control characters (NUL, newline, tab, ...) are not allowed")
    return value


Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, strip_whitespace=True),
    AfterValidator(_printable),
    Field(json_schema_extra={"pattern": PRINTABLE_PATTERN}),
]
"""A free-text label (team, pool, GPU name, ...): 1-128 printable characters, surrounding blanks stripped."""

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Ratio = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
PositiveInt = Annotated[int, Field(ge=1, le=10_000_000)]
Count = Annotated[int, Field(ge=0, le=10**18)]
"""A count kept inside a JSON document (GPU error counters): JSON numbers have no 32-bit limit."""
Step = Annotated[int, Field(ge=0, le=10**18)]
"""A step or iteration counter, stored in a BIGINT column (an inference server's iterations pass 2^31)."""

MAX_TOKENS_PER_SECOND = 1e15
"""Far above any job (10^5 GPUs x 10^5 tokens/s is 10^10); keeps every FLOP/s product finite."""
TokensPerSecond = Annotated[float, Field(gt=0, le=MAX_TOKENS_PER_SECOND, allow_inf_nan=False)]
