"""One table of generation parameter ranges: whatever the server lets through, the engine takes.

The server checked top_p, typical_p and repeat_penalty as [0, 1] / [0, 100] and the engine as
(0, 1] / (0, 100]: `top_p: 0` passed the server and failed in the engine, a 500.
"""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from llamay.engine.ranges import RANGES
from llamay.engine.sampling import SamplingParams
from llamay.server.errors import ApiError
from llamay.server.fields import Field, param


def checked(name: str, value: object) -> object:
    """The value as a request's field of that name reads it (the declarations every API's
    requests are read from: llamay/server/fields.py)."""
    return Field(name, param(name)).read({name: value}, {})


# The parameters SamplingParams takes that the table bounds.
SAMPLING = {item.name for item in fields(SamplingParams) if item.name in RANGES}


def probes(name: str) -> list:
    allowed = RANGES[name]
    values = [0, 1, -1, 0.5, 2, 3.5, 1e300, -1e300, math.nan, math.inf, True, "1", 10**400]
    for bound in (allowed.low, allowed.high):
        if math.isfinite(bound):
            values += [bound, bound - 1e-9, bound + 1e-9, int(bound)]
    return values


@pytest.mark.parametrize("name", sorted(SAMPLING))
def test_the_server_accepts_exactly_what_the_engine_accepts(name):
    for value in probes(name):
        try:
            SamplingParams(**{name: value})
            engine = True
        except (ValueError, TypeError):
            engine = False
        try:
            checked(name, value)
            server = True
        except ApiError as refused:
            assert refused.status == 400 and refused.param == name
            server = False
        assert server == engine, (name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    # (top_p 0 is taken now, by both: OpenAI's minimum, greedy)
    [("typical_p", 0), ("repeat_penalty", 0), ("max_tokens", math.nan)],
)
def test_the_values_that_were_500s_are_400s(name, value):
    with pytest.raises(ApiError) as refused:
        checked(name, value)
    assert refused.value.status == 400
    assert name in refused.value.message
