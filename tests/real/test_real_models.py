"""Real trained models (the `real` tier): Qwen2.5-Coder 0.5B and 1.5B Instruct, Q4_K_M, as
bench/real_models.py fetches them. What synthetic weights cannot show: a trained model's
answers, its agreement with llama.cpp where the distributions are peaked, and a draft model
that guesses well."""

from __future__ import annotations

import numpy as np
import pytest

import llamay
from llamay.verify import run_checks

from helpers.llama_cpp import assert_teacher_forced_agreement

CODE_REQUEST = "Write a Python function `add(a, b)` that returns the sum of a and b."


def chat_ids(model: llamay.engine.Model, text: str) -> list[int]:
    rendered = model.chat_template.render(
        [{"role": "user", "content": text}], add_generation_prompt=True
    )
    return model.tokenize(rendered, add_bos=False)


def test_llamay_verify_passes_on_a_real_model(qwen_coder_05b):
    checks = list(run_checks(str(qwen_coder_05b)))
    assert [c.name for c in checks if not c.passed] == []


def test_a_real_model_writes_the_function_asked_for(qwen_coder_05b):
    with llamay.load(qwen_coder_05b, n_ctx=1024) as model:
        generation = model.generate(chat_ids(model, CODE_REQUEST), max_tokens=96, temperature=0)
        text = model.detokenize(list(generation))
        generation.context.close()
    assert "def add(a, b)" in text
    assert "return a + b" in text


@pytest.mark.parametrize("seed", [None, 7])  # greedy, then seeded sampling
def test_a_real_draft_model_changes_no_token(qwen_coder_15b, qwen_coder_05b, seed):
    sampling = {"temperature": 0} if seed is None else {"temperature": 0.8, "seed": seed}
    with llamay.load(qwen_coder_15b, n_ctx=1024, draft=str(qwen_coder_05b)) as model:
        ids = chat_ids(model, CODE_REQUEST)
        plain = model.generate(ids, max_tokens=48, draft=False, **sampling)
        expected = list(plain)
        plain.context.close()
        drafted = model.generate(ids, max_tokens=48, draft=True, **sampling)
        assert list(drafted) == expected
        # the small coder guesses the large one's code well: the draft really was used
        assert drafted.drafter.accepted > 0
        assert drafted.draft_accepted == drafted.drafter.accepted
        drafted.context.close()


def test_a_real_model_agrees_with_llama_cpp(qwen_coder_05b):
    llama_cpp = pytest.importorskip("llama_cpp", reason="the bench extra (llama-cpp-python)")
    theirs = llama_cpp.Llama(
        model_path=str(qwen_coder_05b), n_ctx=512, logits_all=True, verbose=False, n_threads=2
    )
    with llamay.load(qwen_coder_05b, n_ctx=512) as model:
        cases = []
        for text in (CODE_REQUEST, "Explain what a Python list comprehension is."):
            prompt_ids = chat_ids(model, text)
            theirs.reset()
            theirs.eval(prompt_ids)
            steps, output_ids = [], []
            for _ in range(24):
                logits = np.asarray(theirs.scores[theirs.n_tokens - 1], np.float64)
                logprobs = logits - np.logaddexp.reduce(logits)
                top = np.argsort(-logprobs)[:5]
                steps.append({"top": [(int(t), float(logprobs[t])) for t in top]})
                output_ids.append(int(top[0]))
                theirs.eval([int(top[0])])
            cases.append(
                {"prompt": text, "prompt_ids": prompt_ids, "output_ids": output_ids, "steps": steps}
            )

        def logits_of(ids: list[int]) -> np.ndarray:
            context = model.context()
            rows = context.feed(ids, all_logits=True)
            context.close()
            return rows

        assert_teacher_forced_agreement(cases, logits_of)
    theirs.close()
