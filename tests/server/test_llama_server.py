"""llama.cpp's server routes on a real `llamay serve`, through httpx as editor plugins and
scripts call them: /completion and /infill (whole and streamed, their answers field by field,
the same tokens the engine gives), /tokenize, /detokenize, /apply-template, /props, and the
slots with their snapshots. The models are the synthetic Qwen 2 with FIM tokens named by text
(as Qwen2.5-Coder files have them), the same named by metadata keys, and without any."""

from __future__ import annotations

import json

import httpx
import pytest

import llamay
from llamay.tokenizer.fim import fim_prompt

from helpers.fim_models import write_models
from helpers.serving import start_server, stop_server

PREFIX = "This program is free software"
SUFFIX = "WITHOUT ANY WARRANTY"
FINAL_FIELDS = {
    "index",
    "content",
    "tokens",
    "id_slot",
    "stop",
    "model",
    "tokens_predicted",
    "tokens_evaluated",
    "generation_settings",
    "prompt",
    "has_new_line",
    "truncated",
    "stop_type",
    "stopping_word",
    "tokens_cached",
    "timings",
}
TIMINGS = {
    "cache_n",
    "prompt_n",
    "prompt_ms",
    "prompt_per_token_ms",
    "prompt_per_second",
    "predicted_n",
    "predicted_ms",
    "predicted_per_token_ms",
    "predicted_per_second",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    models = write_models(tmp_path_factory.mktemp("fim-models"))
    slots = tmp_path_factory.mktemp("slots")
    running = start_server(
        tmp_path_factory.mktemp("home"),
        "--models-dir",
        str(models),
        "--default-model",
        str(models / "coder.gguf"),
        "--slot-save-path",
        str(slots),
    )
    running.models, running.slots = models, slots
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def coder(server):
    """The served model, loaded in this process too: the engine's answers to compare with."""
    with llamay.load(server.models / "coder.gguf", n_ctx=1024, threads=2) as model:
        yield model


def post(server, path: str, **body) -> httpx.Response:
    return httpx.post(server.url(path), json=body, timeout=120)


def greedy(model, ids: list[int], n: int) -> str:
    generation = model.generate(ids, max_tokens=n, temperature=0)
    text = "".join(piece.text for piece in generation.pieces())
    generation.context.close()
    return text


def events(response: httpx.Response) -> list[dict]:
    lines = [line for line in response.text.split("\n\n") if line]
    assert all(line.startswith("data: ") for line in lines), response.text
    return [json.loads(line[len("data: ") :]) for line in lines]


# --- /infill -------------------------------------------------------------------------------------


def test_infill_answers_the_engines_middle_in_llama_servers_shape(server, coder):
    answer = post(
        server, "/infill", input_prefix=PREFIX, input_suffix=SUFFIX, n_predict=12, temperature=0
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == FINAL_FIELDS
    ids = fim_prompt(coder.tokenizer, PREFIX, SUFFIX, extra=[], n_ctx=1024, reserve=12)
    assert body["content"] == greedy(coder, ids, 12) != ""
    assert body["prompt"] == (
        f"<|repo_name|>myproject\n<|file_sep|>filename\n<|fim_prefix|>{PREFIX}"
        f"<|fim_suffix|>{SUFFIX}<|fim_middle|>"
    )
    assert body["tokens_evaluated"] == len(ids) and body["tokens_predicted"] == 12
    assert body["stop"] is True and body["stop_type"] == "limit" and body["tokens"] == []
    assert body["model"] == str(server.models / "coder.gguf")
    assert set(body["timings"]) == TIMINGS and body["timings"]["predicted_n"] == 12
    assert body["generation_settings"]["n_predict"] == 12
    assert body["generation_settings"]["temperature"] == 0
    assert 0 <= body["id_slot"] < 4


def test_infill_streams_data_events_then_the_final_object(server):
    whole = post(
        server, "/infill", input_prefix=PREFIX, input_suffix=SUFFIX, n_predict=12, temperature=0
    ).json()
    streamed = post(
        server,
        "/infill",
        input_prefix=PREFIX,
        input_suffix=SUFFIX,
        n_predict=12,
        temperature=0,
        stream=True,
    )
    assert streamed.headers["content-type"].startswith("text/event-stream")
    chunks = events(streamed)
    *tokens, final = chunks
    assert [set(c) for c in tokens] == [
        {"index", "content", "tokens", "stop", "id_slot", "tokens_predicted", "tokens_evaluated"}
    ] * len(tokens)
    assert [c["tokens_predicted"] for c in tokens] == list(range(1, 13))
    assert all(c["stop"] is False and len(c["tokens"]) == 1 for c in tokens)
    assert "".join(c["content"] for c in tokens) == whole["content"]
    assert final["stop"] is True and final["content"] == "" and set(final) == FINAL_FIELDS


def test_input_extra_and_prompt_go_where_llama_server_puts_them(server, coder):
    extra = [{"filename": "notice.txt", "text": "Copyright (C) 2007"}]
    body = post(
        server,
        "/infill",
        input_prefix=PREFIX,
        input_suffix=SUFFIX,
        input_extra=extra,
        prompt=", and",
        n_predict=6,
        temperature=0,
    ).json()
    assert body["prompt"] == (
        "<|repo_name|>myproject\n<|file_sep|>notice.txt\nCopyright (C) 2007"
        f"<|file_sep|>filename\n<|fim_prefix|>{PREFIX}, and<|fim_suffix|>{SUFFIX}<|fim_middle|>"
    )
    ids = fim_prompt(
        coder.tokenizer,
        PREFIX,
        SUFFIX,
        middle=", and",
        extra=[("notice.txt", "Copyright (C) 2007")],
        n_ctx=1024,
        reserve=6,
    )
    assert body["content"] == greedy(coder, ids, 6)


def test_fim_tokens_named_by_metadata_keys_serve_too(server):
    body = post(
        server,
        "/infill",
        model=str(server.models / "keyed.gguf"),
        input_prefix=PREFIX,
        input_suffix=SUFFIX,
        n_predict=4,
        temperature=0,
    ).json()
    # no repository tokens: the single-file layout
    assert body["prompt"] == f"<fill-start>{PREFIX}<fill-hole>{SUFFIX}<fill-end>"
    assert body["tokens_predicted"] == 4


def test_a_model_without_fim_tokens_is_a_400_naming_what_it_lacks(server):
    plain = str(server.models / "plain.gguf")
    answer = post(server, "/infill", model=plain, input_prefix="a", input_suffix="b")
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert message.startswith(f"Infill is not supported by this model: {plain} has no")
    assert "prefix, suffix and middle tokens" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_prefix", 3),
        ("input_suffix", ["x"]),
        ("input_extra", "x"),
        ("input_extra", [3]),
        ("input_extra", [{"filename": "a", "text": 3}]),
        ("n_predict", -2),
        ("n_predict", "ten"),
        ("temperature", -1),
        ("n_probs", 21),
        ("id_slot", 4),
        ("mirostat", 2),
        ("dry_multiplier", 0.8),
        ("lora", [{"id": 0, "scale": 1}]),
        ("response_fields", "content"),
        ("logit_bias", [[1]]),
        ("grammar", 'root ::= "a'),
    ],
)
def test_bad_fields_are_400s_naming_them(server, field, value):
    body = {"input_prefix": "a", "input_suffix": "b", "n_predict": 1, field: value}
    answer = post(server, "/infill", **body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == field or field in error["message"], error


def test_an_edit_near_the_cursor_reuses_the_cached_prefix(server):
    lines = [f"line {i}: {PREFIX}, {SUFFIX}.\n" for i in range(40)]
    prefix, suffix = "".join(lines[:36]), "".join(lines[36:])
    first = post(server, "/infill", input_prefix=prefix, input_suffix=suffix, n_predict=1).json()
    edited = prefix.replace("line 34:", "line 34 (edited):")
    second = post(server, "/infill", input_prefix=edited, input_suffix=suffix, n_predict=1).json()
    assert second["tokens_evaluated"] > first["tokens_evaluated"] > 300
    # every full page before the edit came from the prefix cache; only the rest was computed
    assert second["tokens_cached"] >= 300 and second["tokens_cached"] % 32 == 0
    assert second["timings"]["prompt_n"] == second["tokens_evaluated"] - second["tokens_cached"]
    assert second["timings"]["prompt_n"] < second["tokens_evaluated"] // 4


# --- /completion ---------------------------------------------------------------------------------


def test_completion_of_text_tokens_and_both_mixed(server, coder):
    ids = coder.tokenize(PREFIX)
    expected = greedy(coder, ids, 8)
    for prompt in (PREFIX, ids, [*ids[:2], coder.detokenize(ids[2:])]):
        body = post(server, "/completion", prompt=prompt, n_predict=8, temperature=0).json()
        assert body["content"] == expected, prompt
        assert body["tokens_evaluated"] == len(ids)
    several = post(server, "/completion", prompt=[PREFIX, SUFFIX], n_predict=4, temperature=0)
    assert [b["index"] for b in several.json()] == [0, 1]
    assert several.json()[1]["content"] == greedy(coder, coder.tokenize(SUFFIX), 4)


def test_completion_stops_tokens_probabilities_and_fields(server, coder):
    full = post(server, "/completion", prompt=PREFIX, n_predict=12, temperature=0).json()
    stop = full["content"][4:7]
    body = post(
        server,
        "/completion",
        prompt=PREFIX,
        n_predict=12,
        temperature=0,
        stop=[stop],
        return_tokens=True,
        n_probs=3,
    ).json()
    assert body["content"] == full["content"][: full["content"].index(stop)]
    assert body["stop_type"] == "word" and body["stopping_word"] == stop
    assert coder.detokenize(body["tokens"]).startswith(body["content"])
    probabilities = body["completion_probabilities"]
    assert [p["id"] for p in probabilities] == body["tokens"]
    first = probabilities[0]
    assert set(first) == {"id", "token", "bytes", "logprob", "top_logprobs"}
    assert len(first["top_logprobs"]) == 3 and first["top_logprobs"][0]["id"] == first["id"]
    assert bytes(first["bytes"]).decode() == first["token"]
    banned = body["tokens"][0]
    other = post(
        server, "/completion", prompt=PREFIX, n_predict=1, temperature=0,
        logit_bias=[[banned, False]], return_tokens=True,
    ).json()  # fmt: skip
    assert other["tokens"] != [banned]
    fields = ["content", "timings/prompt_n", "tokens_cached"]
    projected = post(
        server, "/completion", prompt=PREFIX, n_predict=2, response_fields=fields
    ).json()
    assert set(projected) == set(fields)


def test_n_predict_zero_fills_the_cache_and_n_indent_cuts_a_line(server):
    long = " ".join([PREFIX] * 20)
    warm = post(server, "/completion", prompt=long, n_predict=0).json()
    assert warm["tokens_predicted"] == 0 and warm["content"] == ""
    again = post(server, "/completion", prompt=long + " and", n_predict=1).json()
    assert again["tokens_cached"] >= warm["tokens_evaluated"] // 32 * 32 > 0
    body = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 12, "temperature": 0}
    text = post(server, "/infill", **body).json()["content"]
    first_line, rest = text.split("\n", 1)
    indent = len(rest) - len(rest.lstrip(" "))
    cut = post(server, "/infill", **body, n_indent=indent + 1).json()
    assert cut["content"] == first_line + "\n" and cut["stop_type"] == "limit"


# --- tokens, templates, properties ----------------------------------------------------------------


def test_tokenize_and_detokenize(server, coder):
    text = "Hello <|fim_prefix|> wörld"
    ids = post(server, "/tokenize", content=text).json()["tokens"]
    assert ids == coder.tokenize(text, add_bos=False, special=True)
    assert coder.tokenizer.vocab.token_id("<|fim_prefix|>") in ids
    plain = post(server, "/tokenize", content=text, parse_special=False).json()["tokens"]
    assert plain == coder.tokenize(text, add_bos=False, special=False)
    pieces = post(server, "/tokenize", content="wörld", with_pieces=True).json()["tokens"]
    assert [p["id"] for p in pieces] == coder.tokenize("wörld", add_bos=False)
    # a piece that is part of a character comes as its bytes
    joined = b"".join(
        p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces
    )
    assert joined.decode() == "wörld" and any(isinstance(p["piece"], list) for p in pieces)
    assert post(server, "/detokenize", tokens=ids).json() == {"content": text}
    assert post(server, "/detokenize", tokens=[coder.n_vocab]).status_code == 400
    assert post(server, "/tokenize").status_code == 400


def test_apply_template_gives_the_prompt_a_chat_would_get(server, coder):
    messages = [{"role": "user", "content": "Hi"}]
    answer = post(server, "/apply-template", messages=messages).json()
    assert answer == {"prompt": coder.chat_template.render(messages)}
    assert post(server, "/apply-template", messages=[]).status_code == 400


def test_props_describe_the_default_model(server, coder):
    props = httpx.get(server.url("/props"), timeout=60).json()
    settings = props["default_generation_settings"]
    assert settings["n_ctx"] == 1024 and settings["is_processing"] is False
    assert settings["params"]["temperature"] == 0.8 and settings["params"]["n_predict"] == -1
    assert props["total_slots"] == 4
    assert props["model_path"] == str(server.models / "coder.gguf")
    assert props["chat_template"] == coder.chat_template.source
    assert props["build_info"] == f"llamay {llamay.__version__}"
    other = httpx.get(server.url("/props"), params={"model": "no-such-model"}, timeout=60)
    assert other.status_code == 404


# --- slots ---------------------------------------------------------------------------------------


def test_slots_save_restore_and_erase(server):
    body = {"input_prefix": PREFIX * 3, "input_suffix": SUFFIX, "n_predict": 6, "temperature": 0}
    first = post(server, "/infill", **body, id_slot=2).json()
    slots = httpx.get(server.url("/slots"), timeout=60).json()
    assert [s["id"] for s in slots] == [0, 1, 2, 3]
    assert slots[2]["n_tokens"] == first["tokens_evaluated"] + 6
    assert slots[2]["is_processing"] is False and slots[2]["holds_kv"] is False
    assert slots[2]["next_token"]["n_decoded"] == 6

    saved = post(server, "/slots/2?action=save", filename="infill.bin").json()
    assert saved["id_slot"] == 2 and saved["filename"] == "infill.bin"
    assert saved["n_saved"] == slots[2]["n_tokens"]
    assert saved["n_written"] == (server.slots / "infill.bin").stat().st_size

    restored = post(server, "/slots/3?action=restore", filename="infill.bin").json()
    assert restored["n_restored"] == saved["n_saved"] and restored["n_read"] == saved["n_written"]
    assert httpx.get(server.url("/slots"), timeout=60).json()[3]["holds_kv"] is True
    # the restored slot continues its context: the same answer, the prompt's KV from the file
    again = post(server, "/infill", **body, id_slot=3).json()
    assert again["content"] == first["content"]
    assert again["tokens_cached"] == again["tokens_evaluated"] - 1

    assert post(server, "/slots/3?action=erase").json() == {
        "id_slot": 3,
        "n_erased": again["tokens_evaluated"] + 6,
    }
    assert httpx.get(server.url("/slots"), timeout=60).json()[3]["n_tokens"] == 0


def test_slot_snapshots_refuse_other_weights_missing_files_and_hostile_names(server):
    keyed = str(server.models / "keyed.gguf")
    post(server, "/completion", model=keyed, prompt=PREFIX, n_predict=2, id_slot=0)
    post(server, "/slots/0?action=save", model=keyed, filename="keyed.bin").raise_for_status()
    other = post(server, "/slots/0?action=restore", filename="keyed.bin")
    assert other.status_code == 409 and "fingerprint" in other.json()["error"]["message"]
    assert post(server, "/slots/0?action=restore", filename="none.bin").status_code == 404
    for name in ("../escape.bin", "/tmp/x.bin", ".hidden"):
        answer = post(server, "/slots/0?action=save", filename=name)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "filename"
    assert not (server.slots.parent / "escape.bin").exists()
    assert post(server, "/slots/0?action=fly", filename="a.bin").status_code == 400
    assert post(server, "/slots/7?action=erase").status_code == 400


def test_the_routes_are_in_the_openapi_document(server):
    paths = httpx.get(server.url("/openapi.json"), timeout=60).json()["paths"]
    for path in ("/completion", "/infill", "/tokenize", "/detokenize", "/apply-template"):
        assert paths[path]["post"]["tags"] == ["llama-server"], path
        assert "requestBody" in paths[path]["post"]
    assert "text/event-stream" in paths["/infill"]["post"]["responses"]["200"]["content"]
    assert {"/props", "/slots", "/slots/{id_slot}"} <= set(paths)


def test_without_a_default_model_the_one_loaded_is_used(tmp_path_factory, server):
    running = start_server(
        tmp_path_factory.mktemp("home-no-default"), "--models-dir", str(server.models)
    )
    try:
        answer = post(running, "/tokenize", content="a")
        assert answer.status_code == 400 and "--default-model" in answer.json()["error"]["message"]
        post(running, "/tokenize", model=str(server.models / "plain.gguf"), content="a")
        assert post(running, "/tokenize", content="a").status_code == 200
        refused = post(running, "/slots/0?action=save", filename="a.bin")
        assert refused.status_code == 400 and "--slot-save-path" in refused.text
    finally:
        stop_server(running)
