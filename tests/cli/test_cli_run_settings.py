"""The settings of `llamay run`: flags over a pulled model's params layer over the defaults, /set,
and what a remote provider is sent."""

from __future__ import annotations

import pytest

from llamay.cli.run_settings import PARAMETERS, Settings, remote_kwargs, seeded
from llamay.engine.sampling import SamplingParams
from llamay.errors import LlamayError


def test_the_defaults_are_the_engines():
    kwargs = Settings().generate_kwargs()
    sampling = SamplingParams()
    for name in ("temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty"):
        assert kwargs[name] == getattr(sampling, name)
    assert kwargs["max_tokens"] is None and kwargs["stop"] == () and kwargs["seed"] is None
    assert set(kwargs) == {parameter.keyword for parameter in PARAMETERS.values()}


def test_flags_override_the_params_layer_which_overrides_the_defaults():
    layer = {"temperature": 0.2, "top_k": 7, "stop": ["<end>"], "num_predict": -1, "num_ctx": 512}
    settings = Settings.layered(layer, {"temperature": 1.1}, "Be brief.")
    assert settings.values["temperature"] == 1.1  # the flag
    assert settings.values["top_k"] == 7 and settings.values["stop"] == ("<end>",)  # the layer
    assert settings.values["num_predict"] is None  # Ollama's -1: no limit
    assert settings.values["min_p"] == SamplingParams().min_p  # the default
    assert settings.explicit == {"temperature", "top_k", "stop", "num_predict"}
    assert settings.system == "Be brief."


def test_a_bad_params_layer_is_an_error_naming_it():
    with pytest.raises(
        LlamayError, match="the model's params layer: top_p must be a number in \\[0, 1\\]"
    ):
        Settings.layered({"top_p": 3}, {}, None)


def test_set_parses_checks_and_restores():
    settings = Settings()
    settings.set("stop", '"two words" END')
    assert settings.values["stop"] == ("two words", "END")
    assert settings.shown("stop") == "'two words' END"
    settings.set("seed", "42")
    settings.set("seed", "none")
    assert settings.values["seed"] is None and "seed" in settings.explicit
    settings.set("temperature", "0.3")
    settings.set("temperature", "")
    assert settings.values["temperature"] == 0.8 and "temperature" not in settings.explicit
    for name, text, problem in (
        ("top_k", "many", "top_k 'many': not an integer"),
        ("repeat_penalty", "0", r"repeat_penalty must be a number in \(0, 100\]"),
        ("num_predict", "-3", "must be 0 or more"),
        ("warmth", "1", "no parameter 'warmth'"),
    ):
        with pytest.raises(ValueError, match=problem):
            settings.set(name, text)
    assert settings.values["repeat_penalty"] == 1.0  # a refused value changes nothing
    settings.set("system", "You are a cat.")
    assert settings.system == "You are a cat."
    settings.set("system", "")
    assert settings.system is None


def test_a_seed_is_drawn_for_sampling_and_none_for_greedy():
    kwargs, seed = seeded(Settings())
    assert seed is not None and kwargs["seed"] == seed
    assert seeded(Settings({"seed": 5})) == (Settings({"seed": 5}).generate_kwargs(), 5)
    kwargs, seed = seeded(Settings({"temperature": 0}))
    assert seed is None and kwargs["seed"] is None


def test_a_remote_provider_is_sent_only_what_was_set_and_its_api_takes():
    settings = Settings({"temperature": 0, "num_predict": 9, "top_k": 3, "min_p": 0.2})
    settings.set("stop", "###")
    assert remote_kwargs("openai", settings) == {
        "temperature": 0,
        "max_tokens": 9,
        "stop": ["###"],
    }
    assert remote_kwargs("anthropic", settings) == {
        "temperature": 0,
        "max_tokens": 9,
        "top_k": 3,
        "stop": ["###"],
    }
