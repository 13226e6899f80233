"""Scoring through /v1/completions as lm-evaluation-harness does it: echo with logprobs.

lm-eval's `local-completions` model sends each (context, continuation) as token ids with
`echo: true, logprobs: 1, max_tokens: 1` and sums `token_logprobs[ctxlen:-1]`. Its answers here
must equal the log-likelihoods `Context.feed(all_logits=True)` gives for the same tokens, bit
for bit (the determinism contract makes the server's logits those of any other context).

lm-eval tokenizes on the client; it has no llamay backend, so the test gives it llamay's own
tokenizer through the interface its tiktoken backend uses (encode, decode, eot_token).
"""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

import llamay
from llamay.engine.sampling import log_probabilities

QUESTIONS = [
    {
        "question": "What color is the sky on a clear day?",
        "choices": ["blue", "green", "red"],
        "answer": 0,
    },
    {"question": "How many legs does a cat have?", "choices": ["two", "four", "six"], "answer": 1},
    {"question": "Which is a fruit?", "choices": ["carrot", "potato", "apple"], "answer": 2},
    {"question": "What is frozen water called?", "choices": ["ice", "steam"], "answer": 0},
]
TASK = """task: llamay_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
"""


class _Tokenizer:
    """llamay's tokenizer in the shape lm-eval's tiktoken backend calls."""

    def __init__(self, model) -> None:
        self.model = model
        self.eot_token = model.tokenizer.eos_id

    def encode(self, text):
        if isinstance(text, list):
            return [self.encode(t) for t in text]
        return self.model.tokenize(text, add_bos=False, special=False)

    def decode(self, ids):
        return self.model.detokenize(ids)

    def decode_batch(self, batch):
        return [self.decode(ids) for ids in batch]


@pytest.fixture(scope="module")
def model(gemma_path):
    loaded = llamay.load(str(gemma_path))
    yield loaded
    loaded.close()


def _loglikelihood(model, context_ids, continuation_ids):
    """Sum of log p(continuation token | everything before it), from Context.feed."""
    ids = context_ids + continuation_ids
    context = model.context()
    try:
        rows = context.feed(ids, all_logits=True)
    finally:
        context.close()
    total = 0.0
    for position in range(len(context_ids), len(ids)):
        logprob, _ = log_probabilities(rows[position - 1], ids[position], 0)
        # the same figure, computed here independently in float64
        row = rows[position - 1].astype(np.float64)
        independent = row[ids[position]] - (row.max() + np.log(np.exp(row - row.max()).sum()))
        assert abs(logprob - independent) < 1e-9
        total += logprob
    return total


def test_lm_eval_local_completions_scores_equal_context_feed(server, model, tmp_path, monkeypatch):
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.models.openai_completions import LocalCompletionsAPI
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    data = tmp_path / "mc.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    (tmp_path / "llamay_mc.yaml").write_text(TASK.format(data=data))
    lm = LocalCompletionsAPI(
        model="gemma3:270m",
        base_url=server.url("/v1/completions"),
        tokenizer_backend=None,
        max_retries=1,
    )
    lm.tokenizer_backend = "tiktoken"  # its client-side tokenizer calls, on llamay's tokenizer
    lm.tokenizer = _Tokenizer(model)
    lm.tokenized_requests = True  # token ids, as lm-eval sends them with a tokenizer
    results = lm_eval.simple_evaluate(
        model=lm,
        tasks=["llamay_mc"],
        task_manager=TaskManager(include_path=str(tmp_path)),
        log_samples=True,
    )
    samples = sorted(results["samples"]["llamay_mc"], key=lambda s: s["doc_id"])
    correct = 0
    for sample, question in zip(samples, QUESTIONS, strict=True):
        context = f"Question: {question['question']}\nAnswer:"
        ours = []
        for choice in question["choices"]:
            context_ids, continuation_ids = lm._encode_pair(context, " " + choice)
            ours.append(_loglikelihood(model, context_ids, continuation_ids))
        theirs = [response[0][0] for response in sample["resps"]]
        assert theirs == ours  # equal, not close
        assert len(set(theirs)) == len(theirs)  # scored, not all 0.0
        correct += int(np.argmax(ours) == question["answer"])
    assert results["results"]["llamay_mc"]["acc,none"] == correct / len(QUESTIONS)


def _complete(server, **body):
    body = {"model": "gemma3:270m", "temperature": 0} | body
    return httpx.post(server.url("/v1/completions"), json=body, timeout=120)


def test_echo_logprobs_cover_the_prompt(server, model):
    prompt = "The capital of France is"
    answer = _complete(server, prompt=prompt, max_tokens=3, echo=True, logprobs=2).json()
    [choice] = answer["choices"]
    ids = model.tokenize(prompt)
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == len(ids) + 3
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    assert all(isinstance(v, float) for v in logprobs["token_logprobs"][1:])
    assert all(len(top) == 2 for top in logprobs["top_logprobs"][1:])
    assert choice["text"].startswith(prompt)
    # each token's text lies at its offset in the echoed text
    for token, offset in zip(logprobs["tokens"], logprobs["text_offset"], strict=True):
        assert choice["text"][offset : offset + len(token)] == token
    expected = _loglikelihood(model, ids[:1], ids[1:])
    assert sum(logprobs["token_logprobs"][1 : len(ids)]) == pytest.approx(expected, abs=0)


def test_scoring_only_with_max_tokens_0(server):
    answer = _complete(
        server, prompt=["Hi there", "Good morning"], max_tokens=0, echo=True, logprobs=1
    )
    assert answer.status_code == 200
    texts = [c["text"] for c in answer.json()["choices"]]
    assert texts == ["Hi there", "Good morning"]
    assert answer.json()["usage"]["completion_tokens"] == 0
    for choice in answer.json()["choices"]:
        assert choice["finish_reason"] == "length"
        assert choice["logprobs"]["text_offset"][0] == 0


def test_max_tokens_0_without_echo_is_an_empty_completion(server):
    """OpenAI's minimum: nothing generated, cut by its length."""
    answer = _complete(server, prompt="Hi", max_tokens=0)
    assert answer.status_code == 200, answer.text
    [choice] = answer.json()["choices"]
    assert (choice["text"], choice["finish_reason"]) == ("", "length")
    assert answer.json()["usage"]["completion_tokens"] == 0


def test_max_tokens_null_is_16_and_n_null_is_1(server):
    answer = _complete(server, prompt="Count: 1, 2, 3,", max_tokens=None, n=None, stop=None)
    assert answer.status_code == 200
    body = answer.json()
    assert len(body["choices"]) == 1
    assert body["usage"]["completion_tokens"] <= 16
    assert body["choices"][0]["finish_reason"] in ("length", "stop")
    if body["choices"][0]["finish_reason"] == "length":
        assert body["usage"]["completion_tokens"] == 16


def test_streamed_text_offsets_continue_across_chunks(server):
    whole = _complete(server, prompt="Count: 1, 2, 3,", max_tokens=8, logprobs=0, echo=True).json()
    chunks = []
    with httpx.stream(
        "POST",
        server.url("/v1/completions"),
        json={
            "model": "gemma3:270m",
            "prompt": "Count: 1, 2, 3,",
            "max_tokens": 8,
            "logprobs": 0,
            "echo": True,
            "temperature": 0,
            "stream": True,
        },
        timeout=120,
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    offsets = [
        o for c in chunks for o in ((c["choices"][0]["logprobs"] or {}).get("text_offset") or [])
    ]
    assert offsets == whole["choices"][0]["logprobs"]["text_offset"]
    assert offsets == sorted(offsets) and offsets[-1] > 0
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]


def test_multi_prompt_offsets_start_at_each_choices_text(server):
    answer = _complete(
        server, prompt=["One two", "Three four five"], max_tokens=2, logprobs=0, echo=True
    )
    for choice in answer.json()["choices"]:
        logprobs = choice["logprobs"]
        assert logprobs["text_offset"][0] == 0
        for token, offset in zip(logprobs["tokens"], logprobs["text_offset"], strict=True):
            assert choice["text"][offset : offset + len(token)] == token
