"""Request shapes, declared once: each request body's fields, kinds, ranges and defaults.

Each API family declares the body of each of its requests as a `Shape` of `Field`s. A field has
a kind (what values it takes: a flag, a number in a range of the engine's table, a string, one
of some words, stop strings...), a default, and, where the pipeline calls it otherwise, what it
`feeds` (`max_completion_tokens` feeds `max_tokens`). The one declaration gives both sides of
the contract:

- `shape.read(body)` checks a body and returns its `Values`, every field present with its
  default filled in, or raises a 400 naming the first field at fault, in its kind's words;
- `shape.schema()` is the JSON schema of the body that `/openapi.json` gives.

Null is the same as leaving a field out (OpenAI's schemas make every option nullable), except
for a required field. Fields a family reads its own way (a conversation's messages) declare a
`Custom` kind: their reader beside their schema. What each family spells its own way (tools,
the tool choice, an output format) has kinds of its own (concepts.py), read by the chat
layer's readers (llamay/chat/spellings.py), which Model.chat reads OpenAI's spellings with.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llamay.engine import ranges
from llamay.errors import InvalidRequest
from llamay.server.errors import ApiError

MAX_STOP_STRINGS = 16


class Invalid(ValueError):
    """A value its kind refuses; `{name}` in the message stands for the field's name."""


class Kind:
    """What values a field takes. `read(value, values)` gets a value that is not None and the
    values of the fields declared before it, and returns the value as the request means it,
    or raises Invalid; `schema()` is its JSON schema, without null."""

    # whether the value is one of model.generate's keyword arguments (Shape.sampling)
    sampling = False
    # whether a value read is the value as sent (so that a default is one the schema can give)
    as_sent = True

    def read(self, value: Any, values: Mapping[str, Any]) -> Any:
        return value

    def absent(self, default: Any, values: Mapping[str, Any]) -> Any:
        """The value of a field the body leaves out (or sends as null)."""
        return default

    def schema(self) -> dict[str, Any]:
        return {}


class Flag(Kind):
    """true or false."""

    def read(self, value: Any, values: Mapping[str, Any]) -> bool:
        if not isinstance(value, bool):
            raise Invalid("{name} must be true or false")
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}


@dataclass(frozen=True)
class Number(Kind):
    """A number in `allowed` (a range of the engine's table, or one of the field's own)."""

    allowed: ranges.Range
    sampling: bool = False

    def read(self, value: Any, values: Mapping[str, Any]) -> int | float:
        return self.allowed.check(value, "{name}")

    def absent(self, default: Any, values: Mapping[str, Any]) -> Any:
        return self.allowed.default if default is None else default

    def schema(self) -> dict[str, Any]:
        allowed = self.allowed
        schema: dict[str, Any] = {"type": "integer" if allowed.kind is int else "number"}
        if allowed.default is not None:
            schema["default"] = allowed.default
        for bound, is_open, inclusive, exclusive in (
            (allowed.low, allowed.low_open, "minimum", "exclusiveMinimum"),
            (allowed.high, allowed.high_open, "maximum", "exclusiveMaximum"),
        ):
            if math.isfinite(bound):
                schema[exclusive if is_open else inclusive] = bound
        return schema


def param(name: str, *, low: float | None = None) -> Number:
    """Generation parameter `name` as the engine's range table (llamay/engine/ranges.py) has
    it, `low` raised where an API asks for more; one of model.generate's arguments unless
    only requests carry it (`n`, `top_logprobs`)."""
    allowed = ranges.RANGES[name]
    if low is not None:
        allowed = dataclasses.replace(allowed, low=low, low_open=False)
    return Number(allowed, sampling=name not in ranges.REQUEST_ONLY)


def integer(low: int = 0) -> Number:
    """An integer of at least `low`."""
    return Number(ranges.Range(int, low, ranges.INF))


@dataclass(frozen=True)
class Text(Kind):
    """A string; `nonempty`: not ""."""

    nonempty: bool = False

    def read(self, value: Any, values: Mapping[str, Any]) -> str:
        if not isinstance(value, str) or (self.nonempty and not value):
            raise Invalid(
                "{name} must be a non-empty string" if self.nonempty else "{name} must be a string"
            )
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1} if self.nonempty else {"type": "string"}


@dataclass(frozen=True)
class OneOf(Kind):
    """One of some words."""

    words: tuple[str, ...]

    def read(self, value: Any, values: Mapping[str, Any]) -> str:
        if value not in self.words:
            raise Invalid(f"{{name}} must be {either(self.words)}")
        return value

    def schema(self) -> dict[str, Any]:
        return {"enum": list(self.words)}


class Stop(Kind):
    """Stop strings: one string or a list of them (empty ones dropped)."""

    sampling = True
    as_sent = False

    def read(self, value: Any, values: Mapping[str, Any]) -> list[str]:
        strings = [value] if isinstance(value, str) else value
        if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
            raise Invalid("{name} must be a string or a list of strings")
        if len(strings) > MAX_STOP_STRINGS:
            raise Invalid(f"at most {MAX_STOP_STRINGS} stop strings")
        return [s for s in strings if s]

    def schema(self) -> dict[str, Any]:
        many = {"type": "array", "items": {"type": "string"}, "maxItems": MAX_STOP_STRINGS}
        return {"oneOf": [{"type": "string"}, many]}


class LogitBias(Kind):
    """Token ids (ints, or their strings as JSON keys are) to a bias from -100 to 100; -100
    bans the token. Whether each id is in the vocabulary is the model's to tell
    (inference.vocabulary_checked)."""

    sampling = True
    as_sent = False

    def read(self, value: Any, values: Mapping[str, Any]) -> dict[int, float] | None:
        if not isinstance(value, Mapping):
            raise Invalid("{name} must map token ids to numbers")
        bias = {}
        for key, number in value.items():
            try:
                token = int(key)
            except ValueError:
                raise Invalid(f"{{name}} key {key!r} is not a token id") from None
            if (
                isinstance(number, bool)
                or not isinstance(number, (int, float))
                or not -100 <= number <= 100
            ):
                raise Invalid(f"{{name}} values must be numbers from -100 to 100, not {number!r}")
            bias[token] = -math.inf if number <= -100 else float(number)
        return bias or None

    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100},
        }


@dataclass(frozen=True)
class Object(Kind):
    """A JSON object, taken as it is (`described`: more of its schema)."""

    described: Mapping[str, Any] = field(default_factory=dict)

    def read(self, value: Any, values: Mapping[str, Any]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise Invalid("{name} must be an object")
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "object", **self.described}


@dataclass(frozen=True)
class Custom(Kind):
    """A field its family reads its own way: `reader(value)`, and the schema that says what it
    takes."""

    reader: Callable[[Any], Any]
    described: Mapping[str, Any] = field(default_factory=dict)
    as_sent = False

    def read(self, value: Any, values: Mapping[str, Any]) -> Any:
        return self.reader(value)

    def schema(self) -> dict[str, Any]:
        return dict(self.described)


@dataclass(frozen=True)
class Anything(Kind):
    """A field taken as it is (its family reads it later); `described`: what it should be."""

    described: Mapping[str, Any] = field(default_factory=dict)

    def schema(self) -> dict[str, Any]:
        return dict(self.described)


@dataclass(frozen=True)
class Refused(Kind):
    """A field this server cannot honour: 400 with `why` for any value but a false one, rather
    than ignoring it."""

    why: str

    def read(self, value: Any, values: Mapping[str, Any]) -> None:
        if value:
            raise Invalid(self.why)
        return None

    def schema(self) -> dict[str, Any]:
        return {"enum": [False], "description": self.why}


@dataclass(frozen=True)
class Field:
    """One field of a request body. `required`: the message when it is missing (None: it is
    optional, and `default` stands in); `invalid`: the message for a value its kind refuses,
    where the family words it its own way; `feeds`: what the pipeline calls it, where that is
    not its name; `also`: older names it is read under when it is absent."""

    name: str
    kind: Kind
    doc: str = ""
    default: Any = None
    required: str | None = None
    invalid: str | None = None
    feeds: str | None = None
    also: tuple[str, ...] = ()

    @property
    def concept(self) -> str:
        return self.feeds or self.name

    def given(self, body: Mapping[str, Any]) -> Any:
        """The body's value for this field (None when it gives none)."""
        return self._given(body)[1]

    def _given(self, body: Mapping[str, Any]) -> tuple[str, Any]:
        """(the name the body gives this field under, its value), or (name, None)."""
        for name in (self.name, *self.also):
            if body.get(name) is not None:
                return name, body[name]
        return self.name, None

    def read(self, body: Mapping[str, Any], values: Mapping[str, Any]) -> Any:
        name, value = self._given(body)
        if value is None:
            if self.required is not None:
                raise ApiError(400, self.required, self.name)
            return self.kind.absent(self.default, values)
        try:
            return self.kind.read(value, values)
        except InvalidRequest as error:  # the chat layer's readers name where, as "{name}..."
            message = self.invalid or str(error).replace("{name}", name)
            where = (error.param or "{name}").replace("{name}", name)
            raise ApiError(400, message, where) from None
        except ValueError as error:
            message = self.invalid or str(error).replace("{name}", name)
            raise ApiError(400, message, name) from None

    def schema(self) -> dict[str, Any]:
        schema = self.kind.schema()
        if self.required is None:
            schema = _nullable(schema)
        if self.doc:
            schema["description"] = self.doc
        if self.default is not None and self.kind.as_sent and "default" not in schema:
            schema["default"] = self.default
        return schema


class Values(dict[str, Any]):
    """A body's values by field name, every field of its shape present. `spelling`: for each
    thing the pipeline takes (what a field feeds), the field that gave it in this body, or
    else the first field that could have: what a refusal names (remote.py)."""

    spelling: dict[str, str]


class Shape:
    """The fields of one request body, in the order they are read (a field's kind sees the
    values of the fields before it). `strict`: an unknown field is refused (llamay's own API),
    as a mistyped option would otherwise do nothing; other APIs ignore what they do not know,
    as their own servers do. `schema_extra`: more of the body's JSON schema (a oneOf)."""

    def __init__(
        self,
        *fields: Field,
        strict: bool = False,
        schema_extra: Mapping[str, Any] | None = None,
    ) -> None:
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"a field is declared twice in {names}")
        self.fields = fields
        self.strict = strict
        self.schema_extra = dict(schema_extra or {})

    def __getitem__(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)

    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def replacing(self, *fields: Field) -> Shape:
        """This shape with some of its fields declared anew (by name)."""
        anew = {f.name: f for f in fields}
        mine = [anew.get(f.name, f) for f in self.fields]
        return Shape(*mine, strict=self.strict, schema_extra=self.schema_extra)

    def read(self, body: Mapping[str, Any]) -> Values:
        """The body's values, each checked (400 naming the first field at fault)."""
        if self.strict:
            unknown = sorted(set(body) - set(self.names()))
            if unknown:
                known = ", ".join(sorted(self.names()))
                raise ApiError(400, f"unknown field {unknown[0]!r}; known: {known}")
        values = Values()
        for f in self.fields:
            values[f.name] = f.read(body, values)
        values.spelling = {}
        for f in self.fields:  # the first field given names its concept, else the first declared
            if f.given(body) is not None:
                values.spelling.setdefault(f.concept, f.name)
        for f in self.fields:
            values.spelling.setdefault(f.concept, f.name)
        return values

    def sampling(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """model.generate's keyword arguments among the values, by the engine's names (the
        first field given wins where two feed one: max_completion_tokens over max_tokens)."""
        kwargs: dict[str, Any] = {}
        for f in self.fields:
            if f.kind.sampling and values.get(f.name) is not None:
                kwargs.setdefault(f.concept, values[f.name])
        return kwargs

    def schema(self) -> dict[str, Any]:
        """The body's JSON schema, as `/openapi.json` gives it."""
        properties = {}
        for f in self.fields:
            properties[f.name] = f.schema()
            for older in f.also:  # read where the field itself is absent
                properties[older] = {**f.schema(), "description": f"the older name of {f.name}"}
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        required = [f.name for f in self.fields if f.required is not None]
        if required:
            schema["required"] = required
        if self.strict:
            schema["additionalProperties"] = False
        return schema | self.schema_extra


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema`, null allowed too."""
    schema = dict(schema)
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        schema["type"] = [*kinds, "null"] if "null" not in kinds else kinds
    elif "enum" in schema:
        schema["enum"] = [*schema["enum"], None] if None not in schema["enum"] else schema["enum"]
    elif "oneOf" in schema:
        schema["oneOf"] = [*schema["oneOf"], {"type": "null"}]
    elif schema:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema


def either(words: Iterable[str]) -> str:
    """The words as "a, b or c"."""
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
