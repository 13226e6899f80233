"""Remote providers against a real HTTP upstream on loopback (tests/upstream.py): the config file,
both APIs plain and streamed, keys, and the errors a user sees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamay import providers
from llamay.providers import ProviderError, find, load_providers

from helpers.upstream import start_upstream


@pytest.fixture
def upstream():
    server = start_upstream(key="sekrit")
    yield server
    server.close()


def write_config(text: str) -> Path:
    path = Path(os.environ["LLAMAY_HOME"]) / "config.toml"
    path.write_text(text)
    return path


def configure(upstream, api: str = "openai", key_env: str | None = "UPSTREAM_KEY") -> None:
    base_url = upstream.url + ("/v1" if api == "openai" else "")
    key_line = f'api_key_env = "{key_env}"\n' if key_env else ""
    write_config(
        f'[[providers]]\nname = "up"\napi = "{api}"\nbase_url = "{base_url}"\n{key_line}'
        'models = { "remote-tiny" = "tiny:latest", "remote-broken" = "broken" }\n'
    )


HELLO = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hello there"}]


# --- the config file -----------------------------------------------------------------------------


def test_without_a_config_file_every_name_is_local():
    assert load_providers() == []
    assert find("remote-tiny") is None


def test_a_listed_name_finds_its_provider_and_others_stay_local(upstream):
    configure(upstream)
    provider = find("remote-tiny")
    assert provider.api == "openai" and provider.upstream_model == "tiny:latest"
    assert provider.url == upstream.url + "/v1/chat/completions"
    assert find("gemma3:270m") is None


def entry(**fields: str | None) -> str:
    """A [[providers]] table: a valid one, with `fields` (TOML values; None: left out) changed."""
    table = {"name": '"x"', "api": '"openai"', "base_url": '"http://h/v1"', "models": '{a = "b"}'}
    table |= fields
    return "[[providers]]\n" + "".join(f"{k} = {v}\n" for k, v in table.items() if v is not None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[providers]\nname = 1", "not valid TOML"),
        (entry(models=None), "missing 'models'"),
        (entry(api='"cohere"'), "api must be one of openai, anthropic, not 'cohere'"),
        (entry(base_url='"h:80/v1"'), "base_url must be an http:// or https:// URL"),
        (entry(base_url=None, **{"base-url": '"http://h/v1"'}), "unknown key 'base-url'"),
        (entry(models='["a"]'), "models must map local names to upstream model names"),
        (entry(api_key_env="3"), "api_key_env must be a non-empty string, not 3"),
        ("providers = 3\n", "'providers' must be an array of tables"),
        ("[provider]\nname = 'x'\n", "unknown top-level key 'provider'"),
        (
            entry() + entry(name='"y"', models='{a = "c"}'),
            "model 'a' is listed by both provider 'x' and provider 'y'",
        ),
    ],
)
def test_a_bad_config_file_is_an_error_naming_the_file_and_the_problem(text, problem):
    path = write_config(text)
    with pytest.raises(ProviderError) as caught:
        find("a")
    assert str(caught.value).startswith(f"{path}: ")
    assert problem in str(caught.value)


# --- the two APIs --------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_plain_request_is_one_item_of_text(upstream, api, monkeypatch):
    monkeypatch.setenv("UPSTREAM_KEY", "sekrit")
    configure(upstream, api)
    reply = find("remote-tiny").chat(HELLO, max_tokens=50, temperature=0.5)
    assert list(reply) == ["you said: hello there"]
    assert (reply.finish_reason, reply.n_prompt, reply.n_generated) == ("stop", 7, 4)
    sent = upstream.requests[-1]
    assert sent.body["model"] == "tiny:latest" and sent.body["stream"] is False
    assert sent.body["max_tokens"] == 50 and sent.body["temperature"] == 0.5
    if api == "openai":
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == "Bearer sekrit"
        assert sent.body["messages"] == HELLO
    else:
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == "sekrit"
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.body["system"] == "Be terse."
        assert sent.body["messages"] == HELLO[1:]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_streamed_request_yields_each_delta_as_it_comes(upstream, api, monkeypatch):
    monkeypatch.setenv("UPSTREAM_KEY", "sekrit")
    configure(upstream, api)
    reply = find("remote-tiny").chat(HELLO, max_tokens=3, stream=True)
    assert list(reply) == ["you", " said:", " hello"]
    assert reply.finish_reason == "length"
    assert upstream.requests[-1].body["stream"] is True
    assert "temperature" not in upstream.requests[-1].body  # None: the upstream's default


def test_extra_options_go_into_the_body_with_stop_renamed_for_anthropic(upstream, monkeypatch):
    monkeypatch.setenv("UPSTREAM_KEY", "sekrit")
    configure(upstream, "anthropic")
    list(find("remote-tiny").chat(HELLO, stop=["\n"], top_p=0.9, top_k=None))
    body = upstream.requests[-1].body
    assert body["stop_sequences"] == ["\n"] and body["top_p"] == 0.9
    assert "stop" not in body and "top_k" not in body
    assert body["max_tokens"] == providers.wire.ANTHROPIC_DEFAULT_MAX_TOKENS


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_upstream_error_names_the_status_and_the_upstream_message(upstream, api, monkeypatch):
    monkeypatch.setenv("UPSTREAM_KEY", "sekrit")
    configure(upstream, api)
    for stream in (False, True):
        with pytest.raises(ProviderError, match="HTTP 500: the upstream broke"):
            find("remote-broken").chat(HELLO, stream=stream)


def test_a_wrong_key_is_the_upstreams_401(upstream, monkeypatch):
    monkeypatch.setenv("UPSTREAM_KEY", "wrong")
    configure(upstream)
    with pytest.raises(ProviderError, match=r"provider 'up' \(.*\): HTTP 401: invalid api key"):
        find("remote-tiny").chat(HELLO)


def test_an_unset_key_variable_is_named_before_anything_is_sent(upstream, monkeypatch):
    monkeypatch.delenv("UPSTREAM_KEY", raising=False)
    configure(upstream)
    with pytest.raises(ProviderError, match=r"\$UPSTREAM_KEY, which is not set"):
        find("remote-tiny").chat(HELLO)
    assert upstream.requests == []


def test_no_key_configured_sends_no_key(upstream):
    upstream.key = None
    configure(upstream, key_env=None)
    assert list(find("remote-tiny").chat(HELLO)) == ["you said: hello there"]
    assert "authorization" not in upstream.requests[-1].headers


def test_an_unreachable_upstream_is_a_provider_error(upstream):
    url = upstream.url
    upstream.close()  # nothing listens on that port any more
    write_config(
        f'[[providers]]\nname = "gone"\napi = "openai"\nbase_url = "{url}/v1"\n'
        'models = { "m" = "m" }\n'
    )
    with pytest.raises(ProviderError, match=r"provider 'gone' .*cannot reach the upstream"):
        find("m").chat(HELLO)
