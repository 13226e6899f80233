"""Request shapes declared once (llamay/server/fields.py, concepts.py): what a body reads as,
what it is refused with, and the schema the OpenAPI document gives, from one declaration."""

from __future__ import annotations

import math

import pytest

from llamay.chat import spellings
from llamay.engine import ranges
from llamay.server import concepts
from llamay.server.errors import ApiError
from llamay.server.fields import (
    Anything,
    Field,
    Flag,
    LogitBias,
    OneOf,
    Refused,
    Shape,
    Stop,
    Text,
    integer,
    param,
)

MODEL = "model is required: the name of a model"
SHAPE = Shape(
    Field("model", Text(nonempty=True), required=MODEL, invalid=MODEL),
    Field("stream", Flag(), default=False),
    Field("max_completion_tokens", param("max_tokens"), feeds="max_tokens"),
    Field("max_tokens", param("max_tokens")),
    Field("temperature", param("temperature")),
    Field("n", param("n")),
    Field("stop", Stop()),
    Field("logit_bias", LogitBias()),
    Field("effort", OneOf(("low", "high"))),
    Field("background", Refused("background work is not supported")),
    Field("extra", Anything({"type": "object"})),
)


def refusal(shape: Shape, body: dict) -> ApiError:
    with pytest.raises(ApiError) as refused:
        shape.read(body)
    assert refused.value.status == 400
    return refused.value


def test_a_body_reads_as_its_values_with_defaults_filled_in():
    values = SHAPE.read({"model": "m", "temperature": 0.5, "stop": "x", "unknown": 1})
    assert values["model"] == "m" and values["stream"] is False
    assert values["temperature"] == 0.5 and values["stop"] == ["x"]
    assert values["n"] == 1  # the range table's default
    assert values["max_tokens"] is None and "unknown" not in values


def test_null_is_the_same_as_leaving_a_field_out():
    assert SHAPE.read({"model": "m", "stream": None, "n": None, "temperature": None}) == (
        SHAPE.read({"model": "m"})
    )


@pytest.mark.parametrize(
    ("body", "param_", "message"),
    [
        ({}, "model", MODEL),
        ({"model": ""}, "model", MODEL),
        ({"model": "m", "stream": "yes"}, "stream", "stream must be true or false"),
        (
            {"model": "m", "temperature": -1},
            "temperature",
            "temperature must be a number in [0, 100], not -1",
        ),
        (
            {"model": "m", "max_completion_tokens": 1.5},
            "max_completion_tokens",
            "max_completion_tokens must be an integer of at least 0, not 1.5",
        ),
        ({"model": "m", "n": 17}, "n", "n must be an integer in [1, 16], not 17"),
        ({"model": "m", "n": True}, "n", "n must be an integer in [1, 16], not True"),
        ({"model": "m", "stop": [1]}, "stop", "stop must be a string or a list of strings"),
        ({"model": "m", "stop": ["x"] * 17}, "stop", "at most 16 stop strings"),
        (
            {"model": "m", "logit_bias": {"a": 1}},
            "logit_bias",
            "logit_bias key 'a' is not a token id",
        ),
        (
            {"model": "m", "logit_bias": {"1": 101}},
            "logit_bias",
            "logit_bias values must be numbers from -100 to 100, not 101",
        ),
        ({"model": "m", "effort": "mid"}, "effort", "effort must be low or high"),
        ({"model": "m", "background": True}, "background", "background work is not supported"),
    ],
)
def test_a_refusal_names_the_field_in_its_kinds_words(body, param_, message):
    refused = refusal(SHAPE, body)
    assert (refused.param, refused.message) == (param_, message)


def test_logit_bias_reads_as_token_ids_and_minus_100_bans():
    values = SHAPE.read({"model": "m", "logit_bias": {"5": -100, 7: 2}})
    assert values["logit_bias"] == {5: -math.inf, 7: 2.0}


def test_the_first_field_given_feeds_what_two_fields_feed():
    both = SHAPE.read({"model": "m", "max_completion_tokens": 3, "max_tokens": 9})
    assert SHAPE.sampling(both) == {"max_tokens": 3}
    older = SHAPE.read({"model": "m", "max_tokens": 9, "temperature": 0})
    assert SHAPE.sampling(older) == {"max_tokens": 9, "temperature": 0.0}
    assert older.spelling["max_tokens"] == "max_tokens"
    assert both.spelling["max_tokens"] == "max_completion_tokens"
    assert SHAPE.read({"model": "m"}).spelling["max_tokens"] == "max_completion_tokens"


def test_only_generation_parameters_are_sampling():
    values = SHAPE.read({"model": "m", "n": 2, "stop": ["x"], "logit_bias": {"1": 1}})
    assert SHAPE.sampling(values) == {"stop": ["x"], "logit_bias": {1: 1.0}}


def test_a_strict_shape_refuses_unknown_fields_and_says_what_it_knows():
    strict = Shape(Field("prompt", Text()), Field("seed", param("seed")), strict=True)
    refused = refusal(strict, {"prompt": "x", "n": 2})
    assert refused.message == "unknown field 'n'; known: prompt, seed"
    assert strict.schema()["additionalProperties"] is False


def test_the_schema_comes_from_the_same_declaration():
    schema = SHAPE.schema()
    assert schema["required"] == ["model"]
    properties = schema["properties"]
    assert properties["model"] == {"type": "string", "minLength": 1}
    assert properties["stream"] == {"type": ["boolean", "null"], "default": False}
    assert properties["n"] == {
        "type": ["integer", "null"],
        "default": 1,
        "minimum": 1,
        "maximum": 16,
    }
    assert properties["temperature"]["maximum"] == ranges.RANGES["temperature"].high
    assert properties["effort"] == {"enum": ["low", "high", None]}
    assert {"type": "null"} in properties["stop"]["oneOf"]
    assert "additionalProperties" not in schema


def test_a_range_raised_for_one_api_is_checked_and_described():
    shape = Shape(Field("max_output_tokens", param("max_tokens", low=1), feeds="max_tokens"))
    refused = refusal(shape, {"max_output_tokens": 0})
    assert refused.param == "max_output_tokens" and "at least 1" in refused.message
    assert shape.schema()["properties"]["max_output_tokens"]["minimum"] == 1
    assert Shape(Field("top_n", integer(1))).schema()["properties"]["top_n"]["minimum"] == 1


# --- tools ---------------------------------------------------------------------------------------

OPENAI_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def tools_shape(tools: spellings.ToolSpelling, choice: spellings.ChoiceSpelling) -> Shape:
    return Shape(
        Field("tools", concepts.Tools(tools)), Field("tool_choice", concepts.Choice(choice))
    )


OPENAI = tools_shape(spellings.OPENAI_TOOLS, spellings.OPENAI_CHOICE)
ANTHROPIC = tools_shape(spellings.ANTHROPIC_TOOLS, spellings.ANTHROPIC_CHOICE)
FLAT = tools_shape(spellings.FLAT_TOOLS, spellings.FLAT_CHOICE)


def test_each_spelling_of_a_tool_reads_as_an_openai_function_tool():
    assert OPENAI.read({"tools": [OPENAI_TOOL]})["tools"] == [OPENAI_TOOL]
    anthropic = ANTHROPIC.read({"tools": [{"name": "f", "input_schema": {"type": "object"}}]})
    assert anthropic["tools"] == [
        {
            "type": "function",
            "function": {"name": "f", "description": "", "parameters": {"type": "object"}},
        }
    ]
    flat = FLAT.read({"tools": [{"type": "function", "name": "f", "description": "d"}]})
    assert flat["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": None, "description": "d"}}
    ]
    assert OPENAI.read({"tools": []})["tools"] is None


@pytest.mark.parametrize(
    ("shape", "tools"),
    [
        (OPENAI, {"f": 1}),
        (OPENAI, [{"type": "function"}]),
        (ANTHROPIC, [{"input_schema": {}}]),
        (FLAT, [{"type": "web_search"}]),
        (FLAT, [{"type": "function", "name": "f", "parameters": "x"}]),
    ],
)
def test_a_tool_in_no_spelling_is_refused_naming_tools(shape, tools):
    assert refusal(shape, {"tools": tools}).param == "tools"


@pytest.mark.parametrize(
    ("shape", "tool", "given", "mode", "name"),
    [
        (OPENAI, OPENAI_TOOL, None, "auto", None),
        (OPENAI, OPENAI_TOOL, "required", "required", None),
        (OPENAI, OPENAI_TOOL, {"type": "function", "function": {"name": "f"}}, "named", "f"),
        (OPENAI, OPENAI_TOOL, "none", "none", None),
        (ANTHROPIC, {"name": "f"}, {"type": "any"}, "required", None),
        (ANTHROPIC, {"name": "f"}, {"type": "tool", "name": "f"}, "named", "f"),
        (FLAT, {"type": "function", "name": "f"}, {"type": "function", "name": "f"}, "named", "f"),
        (FLAT, {"type": "function", "name": "f"}, "auto", "auto", None),
    ],
)
def test_each_spelling_of_a_tool_choice_reads_as_one_choice(shape, tool, given, mode, name):
    choice = shape.read({"tools": [tool], "tool_choice": given})["tool_choice"]
    assert (choice.mode, choice.name) == (mode, name)


def test_without_tools_auto_is_none_and_a_forced_choice_is_refused():
    assert OPENAI.read({"tool_choice": "auto"})["tool_choice"].mode == "none"
    assert OPENAI.read({})["tool_choice"].mode == "none"
    refused = refusal(FLAT, {"tool_choice": "required"})
    assert (refused.param, refused.message) == ("tool_choice", "tool_choice 'required' needs tools")
    assert refusal(ANTHROPIC, {"tool_choice": {"type": "any"}}).param == "tool_choice"


def test_anthropics_choice_can_turn_parallel_calls_off():
    body = {
        "tools": [{"name": "f"}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    }
    assert ANTHROPIC.read(body)["tool_choice"].parallel is False
    assert ANTHROPIC.read({"tools": [{"name": "f"}]})["tool_choice"].parallel is None


@pytest.mark.parametrize(
    ("shape", "given"),
    [
        (OPENAI, "sometimes"),
        (OPENAI, {"type": "function", "function": {}}),
        (ANTHROPIC, "auto"),
        (ANTHROPIC, {"type": "tool"}),
        (FLAT, {"type": "function", "function": {"name": "f"}}),
    ],
)
def test_a_choice_in_no_spelling_is_refused_naming_it(shape, given):
    tools = {OPENAI: OPENAI_TOOL, ANTHROPIC: {"name": "f"}, FLAT: {"type": "function", "name": "f"}}
    refused = refusal(shape, {"tools": [tools[shape]], "tool_choice": given})
    assert refused.param == "tool_choice" and repr(given) in refused.message


# --- output formats ------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


def output(spelling: spellings.FormatSpelling, value):
    return Shape(Field("format", concepts.Format(spelling))).read({"format": value})["format"]


@pytest.mark.parametrize(
    ("spelling", "value", "kind"),
    [
        (
            spellings.OPENAI_FORMAT,
            {"type": "json_schema", "json_schema": {"schema": SCHEMA}},
            "json_schema",
        ),
        (spellings.OPENAI_FORMAT, {"type": "json_object"}, "json_object"),
        (spellings.OPENAI_FORMAT, {"type": "text"}, None),
        (spellings.OPENAI_FORMAT, {}, None),
        (
            spellings.FLAT_FORMAT,
            {"format": {"type": "json_schema", "schema": SCHEMA}},
            "json_schema",
        ),
        (spellings.FLAT_FORMAT, {}, None),
        (
            spellings.ANTHROPIC_FORMAT,
            {"format": {"type": "json_schema", "schema": SCHEMA}},
            "json_schema",
        ),
        (spellings.OLLAMA_FORMAT, "json", "json_object"),
        (spellings.OLLAMA_FORMAT, SCHEMA, "json_schema"),
        (spellings.OLLAMA_FORMAT, "", None),
        (spellings.SCHEMA_FORMAT, SCHEMA, "json_schema"),
    ],
)
def test_each_spelling_of_an_output_format_reads_as_one_format(spelling, value, kind):
    read = output(spelling, value)
    assert (read.kind if read else None) == kind
    if kind == "json_schema":
        assert read.schema == SCHEMA
    if read is not None:
        assert read.grammar() is not None


@pytest.mark.parametrize(
    ("spelling", "value", "param_"),
    [
        (spellings.OPENAI_FORMAT, "json", "format"),
        (spellings.OPENAI_FORMAT, {"type": "xml"}, "format"),
        (spellings.OPENAI_FORMAT, {"type": "json_schema", "json_schema": {}}, "format"),
        (spellings.FLAT_FORMAT, "json", "format"),
        (spellings.FLAT_FORMAT, {"format": {"type": "xml"}}, "format.format"),
        (spellings.ANTHROPIC_FORMAT, {"format": {"type": "json_object"}}, "format.format"),
        (spellings.OLLAMA_FORMAT, "yaml", "format"),
        (spellings.SCHEMA_FORMAT, ["x"], "format"),
    ],
)
def test_a_format_in_no_spelling_is_refused_naming_where(spelling, value, param_):
    with pytest.raises(ApiError) as refused:
        output(spelling, value)
    assert refused.value.status == 400 and refused.value.param == param_


def test_gbnf_is_a_format_too():
    read = Shape(Field("grammar", concepts.Gbnf())).read({"grammar": 'root ::= "a"'})["grammar"]
    assert read.kind == "gbnf" and read.grammar() is not None


def test_an_older_name_is_read_described_and_named_in_a_refusal():
    shape = Shape(Field("n_predict", integer(0), "tokens at most", also=("max_tokens",)))
    assert shape.read({"max_tokens": 3})["n_predict"] == 3
    assert shape.read({"n_predict": 2, "max_tokens": 3})["n_predict"] == 2
    refused = refusal(shape, {"max_tokens": -1})
    assert refused.param == "max_tokens" and refused.message.startswith("max_tokens must be")
    described = shape.schema()["properties"]["max_tokens"]
    assert described["description"] == "the older name of n_predict"
    assert described["minimum"] == 0
