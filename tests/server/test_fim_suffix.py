"""A `suffix` on OpenAI's /v1/completions and Ollama's /api/generate, through their official
clients: the prompt is the code before the cursor, and a fill-in-the-middle model answers what
goes between it and the suffix (so two suffixes give two greedy middles); a model without FIM
tokens refuses a suffix, but for an empty one."""

from __future__ import annotations

import pytest

import llamay
from llamay.tokenizer.fim import fim_prompt

from helpers.fim_models import write_models
from helpers.serving import start_server, stop_server

PREFIX = "This program is free software"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    models = write_models(tmp_path_factory.mktemp("fim-models"))
    running = start_server(tmp_path_factory.mktemp("home"), "--models-dir", str(models))
    running.models = models
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def coder(server):
    with llamay.load(server.models / "coder.gguf", n_ctx=1024, threads=2) as model:
        yield model


def engine_middle(model, suffix: str, n: int) -> str:
    """The greedy middle the engine gives for PREFIX and `suffix` (single-file layout)."""
    ids = fim_prompt(model.tokenizer, PREFIX, suffix, n_ctx=model.n_ctx, reserve=n)
    generation = model.generate(ids, max_tokens=n, temperature=0)
    text = "".join(piece.text for piece in generation.pieces())
    generation.context.close()
    return text


def test_suffix_on_openai_completions_fills_the_middle(server, coder):
    from openai import BadRequestError, OpenAI

    client = OpenAI(base_url=server.url("/v1"), api_key="unused")
    model = str(server.models / "coder.gguf")

    def middle(suffix):
        return (
            client.completions.create(
                model=model, prompt=PREFIX, suffix=suffix, max_tokens=10, temperature=0
            )
            .choices[0]
            .text
        )

    first, second = middle(" to share and change it."), middle(" of the GNU General License.")
    assert first != second
    assert first == engine_middle(coder, " to share and change it.", 10)
    assert middle(None) != first  # no suffix: a plain continuation
    plain = str(server.models / "plain.gguf")
    with pytest.raises(BadRequestError, match="Infill is not supported by this model"):
        client.completions.create(model=plain, prompt=PREFIX, suffix="x", max_tokens=2)
    # an empty suffix on a model that cannot fill in: nothing after the cursor, a continuation
    assert client.completions.create(model=plain, prompt=PREFIX, suffix="", max_tokens=2)


def test_suffix_on_ollama_generate_fills_the_middle(server, coder):
    import ollama

    client = ollama.Client(host=server.base_url)
    model = str(server.models / "coder.gguf")
    options = {"temperature": 0, "num_predict": 10}
    first = client.generate(model=model, prompt=PREFIX, suffix=" to share", options=options)
    second = client.generate(model=model, prompt=PREFIX, suffix=" of the GNU", options=options)
    assert first.response != second.response
    assert first.response == engine_middle(coder, " to share", 10)
    with pytest.raises(ollama.ResponseError, match="Infill is not supported"):
        client.generate(model=str(server.models / "plain.gguf"), prompt=PREFIX, suffix="x")
    with pytest.raises(ollama.ResponseError, match="context and suffix"):
        client.generate(model=model, prompt=PREFIX, suffix="x", context=[1, 2])


def test_ollama_show_lists_insert_for_a_fim_model(server):
    import ollama

    client = ollama.Client(host=server.base_url)
    for name in ("coder", "plain"):
        client.create(model=f"{name}-test", from_=str(server.models / f"{name}.gguf"))
    assert "insert" in client.show("coder-test").capabilities
    assert "insert" not in client.show("plain-test").capabilities
