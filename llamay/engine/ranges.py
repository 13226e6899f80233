"""The one table of generation parameter ranges: what `model.generate` accepts, and what the
server checks a request against before it gets there.

The engine (SamplingParams, generate) and the server (the request shapes of
llamay/server/fields.py) both check with these ranges, so a value the server lets through is one
the engine takes: a request can never reach the engine with a value it refuses (which would be
the server's error, a 5xx).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """Numbers of `kind` (int or float) from `low` to `high`; an open end excludes its bound.
    `nullable`: a request may send null for it, meaning the default (OpenAI's schema makes
    every sampling parameter nullable); `default`, where the APIs' default is not the
    engine's (None: the engine's)."""

    kind: type
    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    nullable: bool = True
    default: float | None = None

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def check(self, value: float, label: str) -> int | float:
        """`value` as this range takes it (an int or a float), or ValueError naming `label` and
        the range. A bool, a non-number, NaN, an infinity or a fraction for an integer range
        are refused."""
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or (not isinstance(value, numbers.Integral) and not math.isfinite(value))
            or (self.kind is int and value != int(value))
            or value not in self
        ):
            raise ValueError(f"{label} must be {self}, not {value!r}")
        return int(value) if self.kind is int else float(value)

    def __str__(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        if math.isinf(self.low) and math.isinf(self.high):
            return what
        if math.isinf(self.high):
            return f"{what} {'above' if self.low_open else 'of at least'} {_plain(self.low)}"
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        return f"{what} in {left}{_plain(self.low)}, {_plain(self.high)}{right}"


INF = math.inf

# Name -> range, with what the notable values mean. temperature 0 and top_p 0 are greedy (top_p 0,
# OpenAI's minimum, keeps only the most likely token); max_tokens 0 generates nothing; the values
# in OFF switch their stage off; repeat_last_n -1 looks at the whole context.
RANGES: dict[str, Range] = {
    "max_tokens": Range(int, 0, INF),
    "temperature": Range(float, 0.0, 100.0),
    "top_k": Range(int, 0, INF),
    "top_p": Range(float, 0.0, 1.0),
    "min_p": Range(float, 0.0, 1.0),
    "typical_p": Range(float, 0.0, 1.0, low_open=True),
    "repeat_penalty": Range(float, 0.0, 100.0, low_open=True),
    "repeat_last_n": Range(int, -1, INF),
    "presence_penalty": Range(float, -2.0, 2.0),
    "frequency_penalty": Range(float, -2.0, 2.0),
    "logprobs": Range(int, 0, 20),
    "seed": Range(int, -INF, INF),
    "lookup": Range(int, 0, 64),  # draft tokens per step (lookup.py); more cannot pay
    # request parameters the server reads with the same table (not model.generate's)
    "n": Range(int, 1, 16, default=1),  # choices per prompt: each one a sequence in the batch
    "top_logprobs": Range(int, 0, 20),
}

# The value that switches each sampling stage off: a request that sends it asks for nothing.
OFF: dict[str, float] = {
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "repeat_penalty": 1.0,
    "repeat_last_n": 0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}

# Names in RANGES that only requests carry (model.generate takes the others).
REQUEST_ONLY = ("n", "top_logprobs")

# The sampling parameters a request may carry by these names, as model.generate takes them.
SAMPLING = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "seed",
)


def check(name: str, value: float) -> int | float:
    """`value` as parameter `name` takes it (Range.check against its range)."""
    return RANGES[name].check(value, name)


def _plain(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)
