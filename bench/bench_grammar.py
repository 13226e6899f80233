"""Grammar-constrained decoding speed: the vocabulary mask per token.

Walks a JSON document token by token under a grammar (any JSON, and a JSON schema it validates
against), timing `matcher.allowed()` before each token, as generation calls it: first visits of a
state include building its transitions, and a state seen again reuses its mask. Then, in a few
fixed states, times the trie walk alone (what a state costs when it is new) and allowed(). Also
times building the token trie (once per tokenizer) and compiling the grammars.

Target (Gemma 3's 262,144-token vocabulary): a few ms per mask in typical JSON states.

    python bench/bench_grammar.py [--model gemma3:270m] [--repeat 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from llamay import load_tokenizer
from llamay.grammar import Grammar
from llamay.grammar.vocabulary import token_trie

DOCUMENT = {
    "name": "Ada Lovelace",
    "born": "1815-12-10",
    "languages": ["English", "French", "Mathematics"],
    "notes": "Wrote the first published algorithm for Babbage's Analytical Engine; née Byron.",
    "children": [{"name": "Byron", "age": 37}, {"name": "Anne Isabella", "age": 75}],
    "score": 99.5,
    "active": False,
}
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "born": {"type": "string", "format": "date"},
        "languages": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "notes": {"type": "string"},
        "children": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer", "minimum": 0},
                },
                "required": ["name", "age"],
            },
        },
        "score": {"type": "number", "minimum": 0, "maximum": 100},
        "active": {"type": "boolean"},
    },
    "required": ["name", "born", "languages", "notes", "children", "score", "active"],
    "additionalProperties": False,
}
# Prefixes of the document's text that leave the grammar in a typical state.
STATES = {
    "object start": '{"',
    "inside a string": '{"name": "Ada Lov',
    "after a key": '{"name": "Ada Lovelace", "born"',
    "inside a number": '{"name": "A", "born": "1815-12-10", "languages": [], "notes": "", '
    '"children": [], "score": 9',
}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def walk(grammar: Grammar, tokenizer, ids: list[int]) -> list[float]:
    """Seconds per allowed() call along `ids`, then once more for the end."""
    matcher = grammar.matcher(tokenizer)
    times = []
    for token in ids:
        start = time.perf_counter()
        allowed = matcher.allowed()
        times.append(time.perf_counter() - start)
        assert allowed[token], f"the document leaves the grammar at token {token}"
        matcher.accept(token)
    assert matcher.can_end
    return times


def fixed_state(grammar: Grammar, tokenizer, prefix: str, repeat: int) -> dict:
    """In the state after `prefix`: the median seconds of the trie walk alone (what a state
    costs when it is new) and of allowed() (which reuses the masks of recurring states)."""
    matcher = grammar.matcher(tokenizer)
    recognizer = grammar.recognizer()
    for token in tokenizer.tokenize(prefix, add_bos=False, special=False):
        matcher.accept(token)
        recognizer.feed(tokenizer.token_to_piece(token))
    trie = token_trie(tokenizer)
    mask = np.zeros(tokenizer.n_vocab, dtype=np.bool_)
    recognizer.mask(trie, mask)  # builds the state's transitions: timed in the walk
    walk_s, allowed_s = [], []
    for _ in range(repeat):
        mask[:] = False
        start = time.perf_counter()
        recognizer.mask(trie, mask)
        walk_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        matcher.allowed()
        allowed_s.append(time.perf_counter() - start)
    return {
        "trie_walk_ms": _ms(statistics.median(walk_s)),
        "allowed_ms": _ms(statistics.median(allowed_s)),
        "allowed": int(mask.sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3:270m", help="MODEL: a .gguf path or store name")
    parser.add_argument("--repeat", type=int, default=20, help="timed masks per fixed state")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    tokenizer = load_tokenizer(args.model)
    start = time.perf_counter()
    trie = token_trie(tokenizer)
    trie_s = time.perf_counter() - start
    start = time.perf_counter()
    grammars = {"any JSON": Grammar.any_json(), "JSON schema": Grammar.from_json_schema(SCHEMA)}
    compile_s = (time.perf_counter() - start) / len(grammars)

    text = json.dumps(DOCUMENT, ensure_ascii=False)
    ids = tokenizer.tokenize(text, add_bos=False, special=False)
    result: dict = {
        "model": args.model,
        "n_vocab": tokenizer.n_vocab,
        "trie_nodes": trie.n_nodes,
        "trie_build_ms": _ms(trie_s),
        "compile_ms": _ms(compile_s),
        "document_tokens": len(ids),
        "walk": {},
        "states": {},
    }
    for name, grammar in grammars.items():
        times = np.array(walk(grammar, tokenizer, ids))
        result["walk"][name] = {
            "mean_ms": _ms(times.mean()),
            "median_ms": _ms(float(np.median(times))),
            "p90_ms": _ms(float(np.percentile(times, 90))),
            "max_ms": _ms(times.max()),
        }
    for name, prefix in STATES.items():
        result["states"][name] = fixed_state(
            grammars["JSON schema"], tokenizer, prefix, args.repeat
        )

    if args.json:
        print(json.dumps(result))
        return
    print(f"vocabulary  {args.model}: {tokenizer.n_vocab} tokens, trie of {trie.n_nodes} nodes")
    print(f"trie build  {result['trie_build_ms']} ms (once per tokenizer)")
    print(f"compile     {result['compile_ms']} ms per grammar")
    print(f"walk        a {len(ids)}-token JSON document, allowed() before each token:")
    for name, stats in result["walk"].items():
        print(
            f"  {name:12} mean {stats['mean_ms']} ms, median {stats['median_ms']} ms, "
            f"p90 {stats['p90_ms']} ms, max {stats['max_ms']} ms"
        )
    print(f"states      in a fixed state, transitions built (median of {args.repeat}):")
    for name, stats in result["states"].items():
        print(
            f"  {name:17} trie walk {stats['trie_walk_ms']} ms, allowed() {stats['allowed_ms']} ms "
            f"({stats['allowed']} tokens allowed)"
        )


if __name__ == "__main__":
    main()
