"""Constrained types shared by the request schemas: every number finite, every id bounded."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

Kind = Literal["training", "inference"]
Dtype = Literal["bf16", "fp16", "fp8", "tf32", "fp32"]
StorageDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
"""How weights or the KV cache are stored, for MBU (bytes per element: 4, 2, 2, 1, 1, 0.5, 0.5)."""

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,127}$"
"""Job ids and node names: what schedulers and hostnames use, nothing that needs escaping, at most 128 chars."""

Label = Annotated[str, StringConstraints(min_length=1, max_length=128, strip_whitespace=True)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Ratio = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
PositiveInt = Annotated[int, Field(ge=1, le=10_000_000)]
Count = Annotated[int, Field(ge=0, le=10**18)]
