"""The runner the pipeline chooses for a remote provider's model (llamay/server/remote.py): what
it refuses, naming the client's field, before anything is sent. The provider here points at the
discard port, so a request that got as far as sending would fail with a 502 instead."""

from __future__ import annotations

import pytest

from llamay.chat.spellings import OutputFormat
from llamay.providers import Provider, ProviderConfig, ProviderError
from llamay.server import pipeline
from llamay.server.errors import ApiError
from llamay.server.openai_fields import CHAT

HELLO = [{"role": "user", "content": "Hi"}]
TOOL = {"type": "function", "function": {"name": "f"}}


def provider(api: str) -> Provider:
    config = ProviderConfig("nowhere", api, "http://127.0.0.1:9", None, {"far": "x"})
    return Provider(config, "far")


def refusal(request: pipeline.GenerationRequest) -> ApiError:
    with pytest.raises(ApiError) as refused:
        pipeline.start(request)
    assert refused.value.status == 400
    return refused.value


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"prompts": ["Once"]}, "prompt"),
        ({"tools": [TOOL], "tool_choice": "auto"}, "tools"),
        ({"output": OutputFormat("json_object")}, "output"),
        ({"sampling": {"logprobs": 0}}, "logprobs"),
        ({"n": 3}, "n"),
        ({"template_kwargs": {"enable_thinking": False}}, "template_kwargs"),
        ({"truncate": True}, "truncate"),
        ({"sampling": {"min_p": 0.1}}, "min_p"),
        ({"messages": [*HELLO, {"role": "tool", "content": "sunny"}]}, "messages"),
    ],
)
def test_what_cannot_be_passed_on_is_refused(options, field):
    request = pipeline.GenerationRequest(provider("openai"), **{"messages": HELLO, **options})
    refused = refusal(request)
    assert refused.param == field
    assert refused.message.startswith(f"{field} cannot be passed on to the remote provider")
    assert "'nowhere'" in refused.message and "serves far" in refused.message


def test_a_refusal_names_the_field_as_the_client_spelled_it():
    values = CHAT.read(
        {
            "model": "far",
            "messages": HELLO,
            "response_format": {"type": "json_object"},
            "reasoning_effort": "low",
        }
    )
    request = pipeline.GenerationRequest(
        provider("openai"), HELLO, output=values["response_format"], spelling=values.spelling
    )
    assert refusal(request).param == "response_format"
    request.output = None
    request.template_kwargs = {"reasoning_effort": "low"}
    assert refusal(request).param == "reasoning_effort"


@pytest.mark.parametrize(("api", "option"), [("openai", "seed"), ("anthropic", "top_k")])
def test_the_options_a_providers_api_takes_are_sent(api, option):
    """Nothing is refused: the request goes out, and meets the discard port."""
    sampling = {"max_tokens": 4, "temperature": 0.0, "stop": ["x"], option: 1}
    request = pipeline.GenerationRequest(provider(api), HELLO, sampling=sampling)
    with pytest.raises(ProviderError, match="cannot reach"):
        pipeline.start(request)


@pytest.mark.parametrize(
    ("api", "option", "off"), [("anthropic", "presence_penalty", 0.0), ("openai", "top_k", 0)]
)
def test_an_option_that_switches_its_stage_off_asks_for_nothing(api, option, off):
    """Clients send some options at their neutral value by default: left out, not refused;
    any other value is refused."""
    request = pipeline.GenerationRequest(provider(api), HELLO, sampling={option: off})
    with pytest.raises(ProviderError, match="cannot reach"):
        pipeline.start(request)
    request.sampling = {option: 1}
    assert refusal(request).param == option
