"""The generation settings of `llamay run`: one table of parameters, set by flags, by a pulled
model's params layer (its defaults, which flags override), and by `/set` in a chat.

Parameter names are Ollama's (`num_predict`, `repeat_penalty`...), the names of a params layer
and of Ollama's `/set parameter`, so a model pulled from an Ollama registry and a user coming from
Ollama both speak them. Defaults are llama.cpp's, as model.generate has them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llamay.engine.sampling import SamplingParams, new_seed
from llamay.errors import LlamayError
from llamay.providers.wire import WIRES
from llamay.server.ollama_options import OLLAMA_OPTIONS

_SAMPLING = SamplingParams()


def _number(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except ValueError:
            raise ValueError("not an integer" if kind is int else "not a number") from None

    return parse


def _none_or(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    return lambda text: None if text.lower() in ("none", "-1") else parse(text)


def _count(text: str) -> int:
    value = _number(int)(text)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


@dataclass(frozen=True)
class Parameter:
    name: str  # Ollama's name: `/set NAME VALUE`, the params layer's key
    default: Any
    # From the text typed after /set; ValueError says what is wrong. The ranges are checked by
    # SamplingParams, the one place that knows them.
    parse: Callable[[str], Any]
    help: str

    @property
    def keyword(self) -> str:
        """model.generate's keyword argument for this parameter."""
        return OLLAMA_OPTIONS[self.name]


PARAMETERS = {
    p.name: p
    for p in (
        Parameter(
            "num_predict",
            None,
            _none_or(_count),
            "most tokens per answer (none: until the turn ends or the context is full)",
        ),
        Parameter(
            "temperature",
            _SAMPLING.temperature,
            _number(float),
            "0 is greedy",
        ),
        Parameter("top_k", _SAMPLING.top_k, _number(int), "0 is off"),
        Parameter("top_p", _SAMPLING.top_p, _number(float), "1 is off"),
        Parameter("min_p", _SAMPLING.min_p, _number(float), "0 is off"),
        Parameter("typical_p", _SAMPLING.typical_p, _number(float), "1 is off"),
        Parameter("repeat_penalty", _SAMPLING.repeat_penalty, _number(float), "1 is off"),
        Parameter(
            "repeat_last_n",
            _SAMPLING.repeat_last_n,
            _number(int),
            "tokens the penalties look back over (-1: the whole context)",
        ),
        Parameter("presence_penalty", _SAMPLING.presence_penalty, _number(float), "0 is off"),
        Parameter("frequency_penalty", _SAMPLING.frequency_penalty, _number(float), "0 is off"),
        Parameter("seed", None, _none_or(_number(int)), "none: a fresh seed per answer"),
        Parameter("stop", (), lambda text: tuple(shlex.split(text)), "stop strings"),
    )
}


class Settings:
    """The current value of every parameter, and the system prompt. `explicit` names the
    parameters that were set (by a flag, a params layer or /set) rather than left at default:
    a remote provider is sent only those, and keeps its own defaults for the rest."""

    def __init__(self, values: Mapping[str, Any] | None = None, system: str | None = None):
        self.values = {name: p.default for name, p in PARAMETERS.items()} | dict(values or {})
        self.explicit = set(values or {})
        self.system = system

    @classmethod
    def layered(
        cls, params_layer: Mapping[str, Any], flags: Mapping[str, Any], system: str | None
    ) -> Settings:
        """A model's params layer as defaults, under the flags given on the command line.

        The layer's keys that are not generation parameters (num_ctx, mirostat, ...) are
        skipped here; num_ctx is read where the model is loaded.
        """
        try:
            layer = {
                name: _from_layer(name, value)
                for name, value in params_layer.items()
                if name in PARAMETERS
            }
            _check(layer)
        except ValueError as exc:
            raise LlamayError(f"the model's params layer: {exc}") from None
        return cls(layer | dict(flags), system)

    def set(self, name: str, text: str) -> None:
        """`/set NAME VALUE`; an empty VALUE restores the default. ValueError names the problem."""
        if name == "system":
            self.system = text or None
            return
        parameter = PARAMETERS.get(name)
        if parameter is None:
            raise ValueError(f"no parameter {name!r}; /set alone lists them")
        if not text:
            self.values[name] = parameter.default
            self.explicit.discard(name)
            return
        try:
            value = parameter.parse(text)
            _check(self.values | {name: value})
        except ValueError as exc:
            raise ValueError(f"{name} {text!r}: {exc}") from None
        self.values[name] = value
        self.explicit.add(name)

    def generate_kwargs(self) -> dict[str, Any]:
        """The settings as model.generate's keyword arguments."""
        return {PARAMETERS[name].keyword: value for name, value in self.values.items()}

    def shown(self, name: str) -> str:
        """A parameter's value as /set takes it."""
        value = self.values[name]
        if name == "stop":
            return " ".join(map(shlex.quote, value))
        return "none" if value is None else str(value)

    def lines(self) -> list[str]:
        """One line per parameter: name, value, and what it means, for /set and /show."""
        width = max(len(name) for name in PARAMETERS)
        return [
            f"  {name:<{width}}  {self.shown(name):<10}  {parameter.help}"
            for name, parameter in PARAMETERS.items()
        ]


def _check(values: Mapping[str, Any]) -> None:
    """ValueError unless the sampling values are ones SamplingParams takes."""
    fields = SamplingParams.__dataclass_fields__
    SamplingParams(**{name: value for name, value in values.items() if name in fields})


def _from_layer(name: str, value: Any) -> Any:
    """A params layer value (JSON: numbers, a list of stop strings) in the settings' types."""
    if name == "stop":
        return tuple(value) if isinstance(value, list) else (str(value),)
    if name in ("num_predict", "seed") and isinstance(value, int) and value < 0:
        return None  # Ollama's "no limit" / "a random seed"
    return PARAMETERS[name].parse(str(value))


# What each remote API is sent, of the parameters a user sets (the options its wire carries);
# the rest only apply here.
_OLLAMA_NAMES = {keyword: name for name, keyword in OLLAMA_OPTIONS.items()}
REMOTE_PARAMETERS = {
    api: tuple(_OLLAMA_NAMES[keyword] for keyword in wire.options) for api, wire in WIRES.items()
}


def seeded(settings: Settings) -> tuple[dict[str, Any], int | None]:
    """model.generate's keyword arguments, with a fresh seed drawn when none is set (so that it
    can be shown), and the seed when sampling uses one."""
    kwargs = settings.generate_kwargs()
    if kwargs["temperature"] == 0:
        return kwargs, None
    if kwargs["seed"] is None:
        kwargs["seed"] = new_seed()
    return kwargs, kwargs["seed"]


def remote_kwargs(api: str, settings: Settings) -> dict[str, Any]:
    """The settings a user set that a remote API takes, as Provider.chat's arguments."""
    kwargs = {}
    for name in REMOTE_PARAMETERS[api]:
        if name in settings.explicit:
            value = settings.values[name]
            kwargs[PARAMETERS[name].keyword] = list(value) if name == "stop" else value
    return kwargs
