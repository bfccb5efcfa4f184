"""Constrained types shared by the request schemas: every number finite and of its JSON type, every id bounded.

The bounds are what every supported database stores (SQLite and PostgreSQL): PostgreSQL's INTEGER is 32-bit and its
text cannot hold NUL, while SQLite takes both, so a value the schema admits must fit the stricter of the two. Use
these types for new fields (and :data:`Step`, :data:`Label` ... in new endpoints) rather than bare ``int``/``str``.

Types are strict (README, "HTTP API"): a number field takes a JSON number, never a boolean or a numeric string
(``true`` and ``"1000"`` are 422); an integer field takes a JSON integer or a number with no fractional part (``8``
or ``8.0``, which JSON Schema counts as the same integer), never ``8.5``, ``true`` or ``"8"``; a boolean field takes
``true``/``false`` only. Each type's JSON schema is exactly what it accepts, so the OpenAPI document and the server
agree (``tests/api/openapi/test_conformance.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler, Strict
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

Kind = Literal["training", "inference"]
Dtype = Literal["bf16", "fp16", "fp8", "tf32", "fp32", "fp4", "int8"]
"""The matmul precision whose dense peak is the MFU denominator: `mfumon.mfu.DTYPES`, in the same order."""
StorageDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
"""How weights or the KV cache are stored, for MBU (bytes per element: 4, 2, 2, 1, 1, 0.5, 0.5)."""

INT32_MAX = 2**31 - 1
"""The largest value of a PostgreSQL INTEGER column (SQLite's are 64-bit): the bound of every int we store."""

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,127}$"
"""Job ids and node names: what schedulers and hostnames use, nothing that needs escaping, at most 128 chars."""

_CONTROLS = r"\x00-\x1f\x7f-\x9f"
PRINTABLE_PATTERN = rf"^[^{_CONTROLS}]*$"
"""No control characters: PostgreSQL text cannot store NUL, and a newline in a label breaks logs and alert text."""

_CONTROL = re.compile(rf"[{_CONTROLS}]")
BLANKS = " \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
"""The printable characters ``str.strip()`` removes (every other one it strips is a control character)."""
_BLANK_CLASS = r" \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def text_pattern(max_length: int) -> str:
    """What :class:`Text` accepts as a regular expression (JSON Schema's dialect, Python's too): printable, and 1 to
    ``max_length`` characters once surrounding blanks are stripped (any number of those around them)."""
    blank, printable = f"[{_BLANK_CLASS}]", f"[^{_CONTROLS}]"
    solid = f"[^{_CONTROLS}{_BLANK_CLASS}]"
    return f"^{blank}*{solid}(?:{printable}{{0,{max_length - 2}}}{solid})?{blank}*$"


@dataclass(frozen=True, slots=True)
class Text:
    """A free-text string: no control characters, surrounding blanks stripped, then 1 to ``max_length`` characters.

    ``Annotated[str, Text(128)]``. One pattern states it (:func:`text_pattern`), in the document and in the check,
    which runs in pydantic-core (Rust's regex, then its trim: the same blanks), with no Python call per value.
    """

    max_length: int

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        checked = core_schema.str_schema(strict=True, pattern=text_pattern(self.max_length))
        message = f"a string of 1 to {self.max_length} characters (blanks around them aside), no control character"
        return core_schema.chain_schema(
            [
                core_schema.custom_error_schema(checked, custom_error_type="string_text", custom_error_message=message),
                core_schema.str_schema(strip_whitespace=True),
            ]
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "pattern": text_pattern(self.max_length)}


def _whole(value: Any) -> int:
    """A JSON number with a fractional part of zero, as the int it is (an int never gets here: the strict branch
    takes every one in range, and one out of range must stay out, not round into it as a float)."""
    if type(value) is not float or not value.is_integer():
        raise ValueError("not a whole number")
    return int(value)


@dataclass(frozen=True, slots=True)
class Whole:
    """An integer from ``ge`` to ``le``: ``Annotated[int, Whole(0, 4096)]`` (see the module's docstring).

    A JSON integer is checked by pydantic-core alone (nearly every value: as fast as a plain ``int``); a number
    with a fractional part of zero takes a Python call; anything else fails with one error naming the range.
    """

    ge: int
    le: int

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        bounded = core_schema.int_schema(ge=self.ge, le=self.le, strict=True)
        integral = core_schema.chain_schema([core_schema.no_info_plain_validator_function(_whole), bounded])
        either = core_schema.union_schema([bounded, integral], mode="left_to_right")
        message = f"Input should be an integer from {self.ge} to {self.le}"
        return core_schema.custom_error_schema(either, custom_error_type="int_range", custom_error_message=message)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "integer", "minimum": self.ge, "maximum": self.le}


@dataclass(frozen=True, slots=True)
class ZeroOr:
    """A number that is 0, or from ``ge`` to ``le``: ``Annotated[float, ZeroOr(1e-3, 1e9)]``. For a duration that
    divides (a busy time): 0 means "none", and a tiny positive one would make the quotient overflow."""

    ge: float
    le: float

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        zero = core_schema.float_schema(strict=True, ge=0, le=0)
        span = core_schema.float_schema(strict=True, ge=self.ge, le=self.le, allow_inf_nan=False)
        message = f"Input should be 0, or a number from {self.ge:g} to {self.le:g}"
        either = core_schema.union_schema([zero, span])
        return core_schema.custom_error_schema(either, custom_error_type="number_range", custom_error_message=message)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": 0},
                {"type": "number", "minimum": self.ge, "maximum": self.le},
            ]
        }


_MANTISSA = r"(0*[1-9][0-9]{0,14}(\.[0-9]{1,15})?|0+\.[0-9]{0,14}[1-9][0-9]{0,14})"
PARAM_COUNT_PATTERN = rf"^{_MANTISSA}([eE](\+?(1[0-5]|0?[0-9])|-[0-9]{{1,2}})|[KMBT])?$"
r"""A parameter count as ``mfumon wrap --params`` takes it: ``7B``, ``8.03e9``, ``125M``, ``8030261248``. The form is
``^\d+(\.\d+)?([eE][+-]?\d+)?[KMBT]?$`` (K, M, B, T: thousand, million, billion, trillion) bounded so that every
string it admits is a count above 0 and at most 1e30: at most 15 digits either side of the point, not all zero, and
either an exponent from -99 to 15 or a suffix."""
_SCALES = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
_PARAM_COUNT = re.compile(PARAM_COUNT_PATTERN)


def _parse_param_count(text: str) -> float:
    """``"7B"`` -> ``7e9`` (the pattern has been checked; the assertion guards a caller that did not)."""
    assert _PARAM_COUNT.match(text) is not None
    scale = _SCALES.get(text[-1], 1.0)
    return float(text[:-1] if text[-1] in _SCALES else text) * scale


def param_count(value: float | str) -> float:
    """The number a :class:`ParamCount` value stands for (a number stays itself); for comparing raw bodies."""
    return _parse_param_count(value) if isinstance(value, str) else float(value)


@dataclass(frozen=True, slots=True)
class ParamCount:
    """A parameter count: a JSON number above 0 and at most 1e30, or a string such as ``7B`` or ``8.03e9``
    (:data:`PARAM_COUNT_PATTERN`), the forms ``mfumon wrap --params`` takes; read as the number it stands for.

    The one exception to "a number field takes no string" (module docstring): what a person types for a model size
    on the command line is what they type in curl too. Its JSON schema admits exactly these forms.
    """

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        number = core_schema.float_schema(strict=True, gt=0, le=1e30, allow_inf_nan=False)
        text = core_schema.chain_schema(
            [
                core_schema.str_schema(strict=True, pattern=PARAM_COUNT_PATTERN),
                core_schema.no_info_plain_validator_function(_parse_param_count),
            ]
        )
        either = core_schema.union_schema([number, text], mode="left_to_right")
        message = "Input should be a number above 0 and at most 1e30, or a string like 7B, 125M or 8.03e9"
        return core_schema.custom_error_schema(either, custom_error_type="param_count", custom_error_message=message)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": 1e30},
                {"type": "string", "pattern": PARAM_COUNT_PATTERN},
            ],
            "description": "a number, or a string such as 7B, 125M, 1.2T or 8.03e9 (K, M, B, T: 1e3, 1e6, 1e9, 1e12)",
        }


Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
"""A finite JSON number (an integer is one too); never a boolean or a string. Add bounds with ``Field``."""
Flag = Annotated[bool, Strict()]
"""``true`` or ``false``; never ``1``, ``"true"`` or ``"yes"``."""

Label = Annotated[str, Text(128)]
"""A free-text label (team, pool, GPU name, ...): 1-128 printable characters, surrounding blanks stripped."""

PositiveFloat = Annotated[Number, Field(gt=0)]
NonNegativeFloat = Annotated[Number, Field(ge=0)]
Seconds = Annotated[Number, Field(ge=0, le=1e7)]
"""A duration a job reports (a step, its parts): at most 1e7 s (115 days), so that every product stays finite."""
Ratio = Annotated[Number, Field(ge=0, le=1)]
PositiveInt = Annotated[int, Whole(1, 10_000_000)]
Count = Annotated[int, Whole(0, 10**18)]
"""A count kept inside a JSON document (GPU error counters): JSON numbers have no 32-bit limit."""
Step = Annotated[int, Whole(0, 10**18)]
"""A step or iteration counter, stored in a BIGINT column (an inference server's iterations pass 2^31)."""
ExitCode = Annotated[int, Whole(-1024, 1024)]
"""A process exit code as shells and schedulers give it (negative: killed by a signal)."""
Timestamp = Annotated[Number, Field(gt=0, lt=1e11)]
"""Unix seconds, from 1970 to 5138."""
CLOCK_SKEW_RULE = (
    "Unix seconds, the sender's clock. At most MFUMON_MAX_CLOCK_SKEW_SECONDS (default 300) ahead of the "
    "aggregator's clock: a time further ahead is 422 naming this field (check the sender's NTP)."
)
"""The description of every client timestamp :func:`mfumon.api.services.ingest.reject_future_timestamp` checks."""

MAX_TOKENS_PER_SECOND = 1e15
"""Far above any job (10^5 GPUs x 10^5 tokens/s is 10^10); keeps every FLOP/s product finite."""
TokensPerSecond = Annotated[Number, Field(gt=0, le=MAX_TOKENS_PER_SECOND)]


def null(*names: str) -> dict[str, Any]:
    """JSON Schema: each of ``names`` absent or null (how the request schemas say "not given")."""
    return {"properties": {name: {"type": "null"} for name in names}}


def given(*names: str, **types: str) -> dict[str, Any]:
    """JSON Schema: each of ``names`` present and not null (``types`` gives a name's JSON type, default any)."""
    properties = {name: {"type": types[name]} if name in types else {"not": {"type": "null"}} for name in names}
    return {"required": list(names), "properties": properties}
