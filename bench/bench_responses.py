"""Time to first token of a Responses API continuation, against a full recompute of the same
conversation, on a real `llamay serve`.

A stored response is a context (llamay/server/responses_store.py): a request with
`previous_response_id` feeds only the tokens its context lacks. The bench makes a conversation
of about `--history` tokens as one stored response, then, `--repeat` times each:

- continuation: `previous_response_id` + a short new user turn;
- recompute: the same conversation sent whole with `store: false`, under instructions that
  differ in their first words each time so that no cached prefix is reused (same length).

The time to first token is from sending the request to the first `response.output_text.delta`
event (streamed, greedy). Medians are printed, and the first continuation's time apart;
`--json` prints them as JSON.

`--stored ID` continues the stored response ID (a run before printed it) instead of making one:
run it against a server restarted on the same `--state-dir` (or `$LLAMAY_HOME`), and the first
continuation restores the response's context from its snapshot.

    python bench/bench_responses.py --base-url http://127.0.0.1:11435/v1 [--model gemma3:270m]
                                    [--history 800] [--repeat 5] [--stored ID] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import openai

TEXT = Path(__file__).parent.parent / "tests" / "data" / "texts" / "gpl-3.txt"


def first_token_s(client: openai.OpenAI, **request: object) -> tuple[float, object]:
    """Seconds to the first text delta, and the final usage."""
    start = time.perf_counter()
    first = usage = None
    with client.responses.stream(temperature=0, max_output_tokens=8, **request) as stream:
        for event in stream:
            if first is None and event.type == "response.output_text.delta":
                first = time.perf_counter() - start
            if event.type in ("response.completed", "response.incomplete"):
                usage = event.response.usage
    return (first if first is not None else float("nan")), usage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:11435/v1")
    parser.add_argument("--model", default="gemma3:270m")
    parser.add_argument("--history", type=int, default=800, help="about this many tokens")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--stored", help="continue this stored response (made by a run before)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="unused", max_retries=0)
    words = TEXT.read_text().split()
    history = " ".join(words[: int(args.history * 0.7)])  # about 1.4 tokens a word here
    question = f"Here is a text.\n\n{history}\n\nWhat is it about?"
    instructions = "Answer briefly."
    if args.stored:
        stored = client.responses.retrieve(args.stored)
    else:  # not streamed: the first response only has to exist, incomplete or not
        stored = client.responses.create(
            model=args.model,
            input=question,
            instructions=instructions,
            temperature=0,
            max_output_tokens=16,
        )
    turn = "Say it in one word."
    whole = [
        {"role": "user", "content": question},
        {"role": "assistant", "content": stored.output_text},
        {"role": "user", "content": turn},
    ]
    continued, recomputed = [], []
    cached = prompt = 0
    for index in range(args.repeat):
        seconds, usage = first_token_s(
            client,
            model=args.model,
            previous_response_id=stored.id,
            input=turn,
            instructions=instructions,
            store=False,
        )
        continued.append(seconds)
        if usage is not None:
            cached, prompt = usage.input_tokens_details.cached_tokens, usage.input_tokens
        seconds, _ = first_token_s(
            client,
            model=args.model,
            input=whole,
            instructions=f"Session {index}. {instructions}",  # no cached prefix
            store=False,
        )
        recomputed.append(seconds)
    result = {
        "stored": stored.id,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "first_continuation_ttft_s": continued[0],
        "continuation_ttft_s": statistics.median(continued),
        "recompute_ttft_s": statistics.median(recomputed),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"stored response {stored.id}\n"
            f"prompt {prompt} tokens, {cached} from the stored response's context\n"
            f"continuation  TTFT {result['first_continuation_ttft_s'] * 1000:8.1f} ms (first)\n"
            f"continuation  TTFT {result['continuation_ttft_s'] * 1000:8.1f} ms (median)\n"
            f"recompute     TTFT {result['recompute_ttft_s'] * 1000:8.1f} ms (median)"
        )


if __name__ == "__main__":
    main()
