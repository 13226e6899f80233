"""generate() and Generation on a small real model: what is yielded is what the context holds, and
each way a generation ends."""

from __future__ import annotations

from pathlib import Path

import pytest

import llamay
from llamay import gguf
from llamay.engine.generate import chat_prompt_ids, generate

from helpers.concurrency import StepGate

SYNTH = Path(__file__).parent.parent / "data" / "synth"
LLAMA2 = SYNTH / "llama2-spm-Q8_0.gguf"


@pytest.fixture(scope="module")
def model(backend):
    loaded = llamay.load(LLAMA2, backend=backend, n_ctx=64)
    yield loaded
    loaded.close()


def test_the_context_holds_the_prompt_and_every_token_yielded(model):
    prompt = model.tokenize("The license")
    generation = generate(model, "The license", max_tokens=10, temperature=0)
    tokens = list(generation)
    assert len(tokens) == generation.n_generated == 10
    assert generation.finish_reason == "length"
    assert generation.context.tokens == prompt + tokens
    generation.context.close()


def test_greedy_continues_with_the_argmax_of_each_step(model):
    generation = generate(model, "You may copy", max_tokens=6, temperature=0)
    tokens = list(generation)
    context = model.context()
    context.feed(model.tokenize("You may copy"))
    for token in tokens:
        assert token == int(context.logits().argmax())
        context.feed([token])
    context.close()
    generation.context.close()


def test_a_full_context_ends_with_length(model):
    prompt = model.tokenize("The license")
    generation = generate(model, prompt, temperature=0)  # no max_tokens: until the context is full
    tokens = list(generation)
    assert generation.finish_reason == "length"
    assert len(prompt) + len(tokens) == model.n_ctx
    generation.context.close()


def test_an_end_of_generation_token_stops_without_being_yielded(model, tmp_path, backend):
    first = generate(model, "The license", max_tokens=8, temperature=0)
    greedy = list(first)
    first.context.close()
    # The same weights, with the sixth greedy token declared the end-of-sequence token.
    source = gguf.read(LLAMA2)
    stop = greedy[5]
    path = gguf.write(
        tmp_path / "stop.gguf",
        {**source.metadata, "tokenizer.ggml.eos_token_id": stop},
        source.tensors,
    )
    with llamay.load(path, n_ctx=64, backend=backend) as stopping:
        assert stop in stopping.tokenizer.eog_ids
        generation = generate(stopping, "The license", max_tokens=8, temperature=0)
        assert list(generation) == greedy[:5]
        assert generation.finish_reason == "stop"
        assert generation.context.tokens == stopping.tokenize("The license") + greedy[:5]
        generation.context.close()


def test_cancel_ends_before_the_next_token_and_frees_the_pages_it_made(model):
    before = model.kv_stats()["pages_used"]
    with StepGate(model, steps=3) as gate:  # the scheduler stops after the third token
        generation = generate(model, "The license", max_tokens=20, temperature=0)
        taken = [next(generation) for _ in range(3)]
        generation.cancel()
        gate.open()
        rest = list(generation)
    assert generation.finish_reason == "cancelled"
    assert len(taken) + len(rest) < 20
    assert model.kv_stats()["pages_used"] - model.kv_stats()["pages_cached"] <= before


def test_cancel_leaves_a_context_the_caller_gave_open_and_whole(model):
    context = model.context()
    with StepGate(model, steps=3) as gate:
        generation = generate(model, "The license", max_tokens=20, temperature=0, context=context)
        taken = [next(generation) for _ in range(3)]
        generation.cancel()
        gate.open()
        taken += list(generation)
    assert generation.finish_reason == "cancelled"
    assert len(taken) < 20
    assert context.tokens == model.tokenize("The license") + taken
    context.close()


def test_a_generation_continues_a_context_from_where_it_stands(model):
    whole = generate(model, "The license", max_tokens=12, temperature=0)
    expected = list(whole)
    whole.context.close()
    context = model.context()
    first = list(generate(model, "The license", max_tokens=5, temperature=0, context=context))
    rest = list(generate(model, [], max_tokens=7, temperature=0, context=context))
    assert first + rest == expected
    assert context.tokens == model.tokenize("The license") + expected
    context.close()


def test_stop_strings_end_the_text_where_they_begin_across_tokens(model):
    plain = generate(model, "The license", max_tokens=12, temperature=0)
    list(plain)
    text = plain.text
    plain.context.close()
    # a stop string that spans a token boundary, somewhere in the middle of the text
    cut = len(text) // 2
    stop = text[cut - 2 : cut + 2]
    assert len(stop) == 4 and text.index(stop) == cut - 2
    stopped = generate(model, "The license", max_tokens=12, temperature=0, stop=["zzz", stop])
    pieces = list(stopped.pieces())
    assert "".join(p.text for p in pieces) == stopped.text == text[: cut - 2]
    assert stopped.finish_reason == "stop"
    stopped.context.close()


def test_held_back_text_is_released_when_no_stop_string_follows(model):
    plain = generate(model, "The license", max_tokens=8, temperature=0)
    list(plain)
    plain.context.close()
    # the text ends with the first character of a stop string that never completes
    stopped = generate(
        model, "The license", max_tokens=8, temperature=0, stop=[plain.text[-1] + "\x00"]
    )
    assert "".join(p.text for p in stopped.pieces()) == plain.text
    assert stopped.finish_reason == "length"
    stopped.context.close()


def test_logprobs_are_the_log_softmax_of_the_raw_logits(model):
    import numpy as np

    generation = generate(model, "The license", max_tokens=3, temperature=0, logprobs=2)
    pieces = [p for p in generation.pieces() if p.token is not None]
    context = model.context()
    context.feed(model.tokenize("The license"))
    for piece in pieces:
        row = context.logits().astype(np.float64)
        logp = row - (row.max() + np.log(np.exp(row - row.max()).sum()))
        assert piece.logprob == pytest.approx(logp[piece.token], abs=1e-9)
        assert [t for t, _ in piece.top_logprobs] == list(np.argsort(-logp, kind="stable")[:2])
        assert piece.top_logprobs[0][0] == piece.token  # greedy picks the most likely
        context.feed([piece.token])
    context.close()
    generation.context.close()


def test_seeded_sampling_depends_on_seed_and_sequence_only(model):
    def sampled(seed: int, sequence: int) -> list[int]:
        generation = generate(
            model,
            "The license",
            max_tokens=16,
            temperature=1.5,
            top_k=0,
            min_p=0,
            seed=seed,
            sequence=sequence,
        )
        tokens = list(generation)
        generation.context.close()
        return tokens

    assert sampled(3, 0) == sampled(3, 0)
    assert sampled(3, 0) != sampled(4, 0)
    assert sampled(3, 0) != sampled(3, 1)


def test_an_unseeded_generation_reports_the_seed_it_drew(model):
    generation = generate(model, "The license", max_tokens=4)
    tokens = list(generation)
    generation.context.close()
    again = generate(model, "The license", max_tokens=4, seed=generation.sampler.seed)
    assert list(again) == tokens
    again.context.close()


def test_prompts_that_leave_no_room_or_have_no_tokens_are_refused(model):
    with pytest.raises(llamay.ContextOverflow, match="the context holds 64"):
        generate(model, list(range(3, 67)))
    with pytest.raises(llamay.LlamayError, match="no tokens"):
        generate(model, [])


def test_chat_prompt_ids_has_one_bos_whoever_writes_it(model):
    bos = model.tokenizer.bos_id
    with_bos = model.chat_template.render([{"role": "user", "content": "Hi"}])
    assert with_bos.startswith("<s>")  # the llama2 template writes BOS itself
    ids = chat_prompt_ids(model, with_bos)
    assert ids[0] == bos and ids[1] != bos
    assert chat_prompt_ids(model, "[INST] Hi [/INST]") == model.tokenize("[INST] Hi [/INST]")
