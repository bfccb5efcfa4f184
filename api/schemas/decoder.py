"""A faster decoder for a request model, derived from the model itself: no second declaration to keep in step.

pydantic validates a node push in about as long as ``json.loads`` takes to parse it; msgspec decodes it into typed
structs, constraints checked, in about half that (``bench/decode_push.py``). The push is nearly every request the
aggregator gets, so :class:`FastDecoder` builds msgspec structs from the pydantic model once, at import:

- **types and constraints** from the model's JSON schema (the one the OpenAPI document shows): ``number``,
  ``integer``, ``string`` (``pattern``, lengths), ``boolean``, string ``enum``, ``array`` (item counts), nested
  objects (``$ref``), each optionally ``null``; every object closed (``additionalProperties: false``). A keyword it
  does not know fails the build, so a new kind of constraint can never be skipped silently;
- **defaults** from the model's fields; **rules** JSON Schema cannot state from the model's own field validators,
  called with the same arguments pydantic gives them; a free-text field (:class:`~mfumon.api.schemas._common.Text`)
  stripped as pydantic strips it; the model's own properties and methods (``key``, ``counters()``) copied, so a
  struct reads like the model everywhere the aggregator reads a push.

**Never wider than the model.** The decoder answers None wherever it is unsure (any error, a form msgspec is
stricter about, such as ``8.0`` for an integer), and the caller then validates with the model, whose answer, taken
or refused with its errors, is the one given. So the fast path can only decline more than the model, never take
what the model refuses or take it differently: ``tests/api/openapi/test_fast_decoder.py`` decodes generated and
mutated bodies both ways and compares every field and type.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from mfumon.api.schemas._common import BLANKS, Text

__all__ = ["FastDecoder"]

M = TypeVar("M", bound=BaseModel)

# Keywords that say nothing about what is accepted.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
_KEYWORDS: dict[str, frozenset[str]] = {
    "number": frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "integer": frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}),
    "string": frozenset({"type", "pattern", "minLength", "maxLength", "enum"}),
    "boolean": frozenset({"type"}),
    "array": frozenset({"type", "items", "minItems", "maxItems"}),
}
_BOUNDS = {"minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt"}
# Escapes whose meaning differs between JSON Schema's regular expressions (ECMA 262, as pydantic-core's Rust regex
# reads them: Unicode-aware) and Python's: refused rather than translated.
_UNSURE_ESCAPES = re.compile(r"\\[dDwWsSbB]")


class _Info:
    """What a field validator may read of pydantic's ``ValidationInfo``: the fields validated before its own
    (``data``, gathered from the struct only if the validator reads it)."""

    __slots__ = ("_before", "_struct", "field_name")

    def __init__(self, struct: Any, before: tuple[str, ...], field_name: str) -> None:
        self._struct = struct
        self._before = before
        self.field_name = field_name

    @property
    def data(self) -> dict[str, Any]:
        return {name: getattr(self._struct, name) for name in self._before}

    context = None
    config = None
    mode = "json"


@dataclass(frozen=True, slots=True)
class _Validator:
    field: str
    call: Callable[[Any, _Info], Any]
    none_passes: bool  # the validator hands None back unchanged: not called for None


class FastDecoder(Generic[M]):
    """Decodes a JSON body into structs that read like ``model``'s instances, or None where the model must decide."""

    def __init__(self, model: type[M]) -> None:
        self.model = model
        schema = model.model_json_schema(mode="validation")
        self._defs: dict[str, Any] = schema.get("$defs", {})
        self._built: dict[type[BaseModel], type[msgspec.Struct]] = {}
        self.struct = self._struct(model, schema)
        self._decoder = msgspec.json.Decoder(self.struct)

    def decode(self, body: bytes) -> M | None:
        """``body`` as structs, or None: not JSON, not valid, or a form only the model decides on."""
        try:
            return typing.cast(M, self._decoder.decode(body))
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None

    # --- building ---------------------------------------------------------------------------------------------

    def _struct(self, model: type[BaseModel], schema: dict[str, Any]) -> type[msgspec.Struct]:
        if model in self._built:
            return self._built[model]
        if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
            raise TypeError(f"{model.__name__}: only closed objects (additionalProperties: false) are decoded fast")
        if model.__pydantic_decorators__.model_validators:
            raise TypeError(f"{model.__name__}: model validators are not supported by the fast decoder")
        required = set(schema.get("required", ()))
        fields: list[tuple[Any, ...]] = []
        patterns: dict[str, str] = {}  # a string field's pattern, checked in __post_init__ (see _Known)
        stripped: list[str] = []
        for name, info in model.model_fields.items():
            if info.alias is not None and info.alias != name:
                raise TypeError(f"{model.__name__}.{name}: aliases are not supported by the fast decoder")
            field_schema = schema["properties"][name]
            text = _string_of(field_schema)
            if text is not None and "pattern" in text:
                patterns[name] = _python_pattern(text["pattern"])
                field_schema = _without_pattern(field_schema)
            kind = self._type(model, name, field_schema, info)
            if _is_text(model, name, info):
                stripped.append(name)
            if name in required:
                fields.append((name, kind))
            else:
                if not isinstance(info.default, str | int | float | bool | type(None)):
                    raise TypeError(f"{model.__name__}.{name}: only immutable defaults are decoded fast")
                fields.append((name, kind, info.default))
        namespace = _own_members(model)
        namespace["__post_init__"] = _post_init(model, patterns, stripped, _validators(model))
        struct = msgspec.defstruct(
            model.__name__,
            fields,
            kw_only=True,
            forbid_unknown_fields=True,
            gc=False,  # never in a cycle: decoded, read, dropped
            namespace=namespace,
            module=__name__,
        )
        self._built[model] = struct
        return struct

    def _type(self, model: type[BaseModel], name: str, schema: dict[str, Any], info: FieldInfo) -> Any:
        options = schema.get("anyOf")
        if options is not None:
            rest = [o for o in options if o != {"type": "null"}]
            if len(rest) != 1 or len(options) != 2 or set(schema) - _ANNOTATIONS - {"anyOf"}:
                raise TypeError(f"{model.__name__}.{name}: only 'X or null' unions are decoded fast")
            return self._type(model, name, rest[0], info) | None
        if "$ref" in schema:
            ref = schema["$ref"].rsplit("/", 1)[-1]
            nested = _nested_model(info.annotation, ref)
            return self._struct(nested, self._defs[ref])
        kind = str(schema.get("type"))
        unknown = set(schema) - _ANNOTATIONS - _KEYWORDS.get(kind, frozenset())
        if kind not in _KEYWORDS or unknown:
            raise TypeError(f"{model.__name__}.{name}: {kind!r} with {sorted(unknown)} is not decoded fast")
        if kind == "boolean":
            return bool
        if kind == "array":
            items = self._type(model, name, schema["items"], info)
            meta = msgspec.Meta(min_length=schema.get("minItems"), max_length=schema.get("maxItems"))
            return Annotated[list[items], meta]  # type: ignore[valid-type]
        if kind == "string":
            if "enum" in schema:
                if set(schema) - _ANNOTATIONS - {"type", "enum"}:
                    raise TypeError(f"{model.__name__}.{name}: an enum with other constraints is not decoded fast")
                return Literal[tuple(schema["enum"])]
            meta = msgspec.Meta(
                pattern=_python_pattern(schema["pattern"]) if "pattern" in schema else None,
                min_length=schema.get("minLength"),
                max_length=schema.get("maxLength"),
            )
            return Annotated[str, meta]
        bounds = {_BOUNDS[k]: v for k, v in schema.items() if k in _BOUNDS}
        if kind == "integer":
            return Annotated[int, msgspec.Meta(**bounds)]
        if "le" not in bounds and "lt" not in bounds:
            bounds["le"] = sys.float_info.max  # finite: 1e999 parses as infinity, which no number field takes
        return Annotated[float, msgspec.Meta(**bounds)]


def _string_of(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The string schema of a field that is a string, or a string or null; else None."""
    if schema.get("type") == "string":
        return schema
    options = schema.get("anyOf")
    if options is not None and len(options) == 2 and {"type": "null"} in options:
        rest = next(o for o in options if o != {"type": "null"})
        return rest if rest.get("type") == "string" else None
    return None


def _without_pattern(schema: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in schema:
        return {**schema, "anyOf": [_without_pattern(o) for o in schema["anyOf"]]}
    return {k: v for k, v in schema.items() if k != "pattern"}


def _python_pattern(pattern: str) -> str:
    """A JSON Schema pattern as Python's ``re.search`` must read it: ``$`` only at the very end (``\\Z``), where
    Python's also matches before a final newline."""
    if _UNSURE_ESCAPES.search(pattern):
        raise TypeError(f"pattern {pattern!r}: an escape that JSON Schema and Python read differently")
    body = pattern.removesuffix("$")
    if re.search(r"(?<!\\)\$", body):
        raise TypeError(f"pattern {pattern!r}: '$' only at the end is decoded fast")
    return body + r"\Z" if body != pattern else pattern


# String settings with which pydantic changes a value in a way its JSON schema does not show.
_STR_TRANSFORMS = ("strip_whitespace", "to_lower", "to_upper")


def _is_text(model: type[BaseModel], name: str, info: FieldInfo) -> bool:
    """Whether a field is free text (:class:`Text`), which pydantic strips of surrounding blanks once checked.

    The marker sits where pydantic leaves it: in ``info.metadata`` for a field whose annotation is ``Annotated``
    (``name: Label``: pydantic unwraps it, leaving ``str``), inside the annotation for any other (``Label | None``).
    A transformation the decoder cannot make (free text inside a list, ``to_lower``, ``str_strip_whitespace``) fails
    the build, so no field can be decoded differently in silence."""
    if any(model.model_config.get(f"str_{t}") for t in _STR_TRANSFORMS):
        raise TypeError(f"{model.__name__}: string transformations in the config are not decoded fast")
    found = [(m, False) for m in info.metadata] + list(_markers(info.annotation, inside=False))
    for marker, inside in found:
        if any(getattr(marker, t, None) for t in _STR_TRANSFORMS):
            raise TypeError(f"{model.__name__}.{name}: {marker!r} changes the string; not decoded fast")
        if isinstance(marker, Text) and inside:
            raise TypeError(f"{model.__name__}.{name}: free text inside a container is not decoded fast")
    return any(isinstance(marker, Text) for marker, _ in found)


def _markers(annotation: Any, inside: bool) -> typing.Iterator[tuple[Any, bool]]:
    """Each ``Annotated`` marker in ``annotation`` (a FieldInfo's own metadata too), and whether it sits inside a
    container (a list's items) rather than on the value itself, ``X | None`` included."""
    if typing.get_origin(annotation) is Annotated:
        for marker in annotation.__metadata__:
            yield marker, inside
            for nested in getattr(marker, "metadata", ()) if isinstance(marker, FieldInfo) else ():
                yield nested, inside
        yield from _markers(typing.get_args(annotation)[0], inside)
        return
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for arg in typing.get_args(annotation):
        yield from _markers(arg, inside or not union)


def _nested_model(annotation: Any, ref: str) -> type[BaseModel]:
    """The model class named ``ref`` inside a field's annotation (``list[GpuSample] | None``, ...)."""
    pending = [annotation]
    while pending:
        current = pending.pop()
        if isinstance(current, type) and issubclass(current, BaseModel) and current.__name__ == ref:
            return current
        pending.extend(typing.get_args(current))
    raise TypeError(f"no model {ref} in {annotation!r}")


def _own_members(model: type[BaseModel]) -> dict[str, Any]:
    """The model's own properties and public methods (``key``, ``counters``), for the struct to read alike."""
    members: dict[str, Any] = {}
    for name, value in vars(model).items():
        if name.startswith("_") or name in model.model_fields:
            continue
        if isinstance(value, property | types.FunctionType):
            members[name] = value
    return members


def _validators(model: type[BaseModel]) -> list[_Validator]:
    """The model's field validators, in field order (the order pydantic runs them); ``after`` ones only."""
    found: list[_Validator] = []
    for decorator in model.__pydantic_decorators__.field_validators.values():
        if decorator.info.mode != "after":
            raise TypeError(f"{model.__name__}: only 'after' field validators are decoded fast")
        func = decorator.func
        takes_info = len(inspect.signature(func).parameters) >= 2
        for field in decorator.info.fields:

            def call(value: Any, info: _Info, func: Any = func, takes_info: bool = takes_info) -> Any:
                return func(value, info) if takes_info else func(value)

            found.append(_Validator(field, call, _passes_none(call, field)))
    order = list(model.model_fields)
    return sorted(found, key=lambda v: order.index(v.field))


def _passes_none(call: Callable[[Any, _Info], Any], field: str) -> bool:
    try:
        return call(None, _Info(None, (), field)) is None
    except Exception:
        return False


class _Known:
    """Strings already found to match one pattern, each kept once: a push repeats its node's GPU uuids, names and
    job ids, so the pattern runs once per string, not once per push (and equal strings become one object). Bounded:
    emptied when full."""

    LIMIT = 1 << 17

    def __init__(self, pattern: str) -> None:
        self.search = re.compile(pattern).search
        self.seen: dict[str, str] = {}

    def check(self, text: str) -> str:
        held = self.seen.get(text)
        if held is not None:
            return held
        if self.search(text) is None:
            raise ValueError("does not match the pattern")
        if len(self.seen) >= self.LIMIT:
            self.seen.clear()
        self.seen[text] = text
        return text


def _post_init(
    model: type[BaseModel], patterns: dict[str, str], stripped: list[str], validators: list[_Validator]
) -> Callable[[Any], None]:
    """The struct's ``__post_init__``, written out for its fields (it runs for every GPU of every push): each
    pattern checked, free text stripped (after its pattern, as pydantic does), then the model's field validators
    in field order. A ValueError makes msgspec refuse the body."""
    order = list(model.model_fields)
    scope: dict[str, Any] = {"BLANKS": frozenset(BLANKS), "Info": _Info}
    lines = ["def __post_init__(self):"]
    for name in order:
        if name in patterns:
            scope[f"known_{name}"] = _Known(patterns[name])
            lines += [
                f"    v = self.{name}",
                "    if v is not None:",
                f"        self.{name} = v = known_{name}.check(v)",
            ]
        if name in stripped:
            lines += [
                f"    v = self.{name}",
                "    if v is not None and (v[0] in BLANKS or v[-1] in BLANKS):",
                f"        self.{name} = v.strip()",
            ]
    for k, validator in enumerate(validators):
        scope[f"validator_{k}"] = validator.call
        scope[f"before_{k}"] = tuple(order[: order.index(validator.field)])
        call = f"self.{validator.field} = validator_{k}(v, Info(self, before_{k}, {validator.field!r}))"
        lines.append(f"    v = self.{validator.field}")
        lines += ["    if v is not None:", f"        {call}"] if validator.none_passes else [f"    {call}"]
    if len(lines) == 1:
        lines.append("    pass")
    exec("\n".join(lines), scope)  # built from the model's field names, nothing from a request
    return scope["__post_init__"]  # type: ignore[no-any-return]
