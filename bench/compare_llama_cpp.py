"""llamay side by side with llama.cpp (through llama-cpp-python) on one model, in one process.

Speed (default): for each thread count, runs of llamay and llama.cpp alternate (so that both see
the same machine load), each a prefill of -p tokens in one call and a decode of -n tokens one at a
time on a fresh context; prints the medians and their ratios (llamay / llama.cpp).

Logits (--logits N): both engines are fed the same N tokens of a text one at a time; at each step
the log-probability each gives to the true next token is compared (teacher forcing), with the
agreement of their top-1 tokens.

    python bench/compare_llama_cpp.py [--model gemma3:270m | llama-1b:Q4_K_M] [--threads 1,2]
                                      [-p 512] [-n 64]
                                      [--repeat 3] [--logits N] [--text FILE] [--json]

llama-cpp-python is a benchmark extra (`pip install llama-cpp-python`), never a dependency.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import llamay
from llamay.cli.bench import (
    bench_tokens,
    decode_seconds,
    depth_contexts,
    prefill_seconds,
    thread_counts,
)
from llamay.store import resolve_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve as resolve_shape

DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "tests" / "data" / "texts" / "gpl-3.txt"


def _llama_cpp():
    try:
        import llama_cpp
    except ImportError:
        sys.exit("llama-cpp-python is not installed: pip install llama-cpp-python")
    return llama_cpp


def _load_llama_cpp(path: Path, threads: int, n_ctx: int):
    return _llama_cpp().Llama(
        model_path=str(path),
        n_ctx=n_ctx,
        n_batch=512,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )


# --- llama.cpp's side of each measurement --------------------------------------------------------


def llama_cpp_prefill_seconds(llm, tokens: list[int]) -> float:
    llm.reset()  # the next eval starts from an empty KV cache
    started = time.perf_counter()
    llm.eval(tokens)
    return time.perf_counter() - started


def llama_cpp_decode_seconds(llm, tokens: list[int], depth: int = 0) -> float:
    """On an empty cache, or after the `depth` tokens evaluated first (eval drops the KV cells
    past n_tokens, as a fork of llamay's context leaves its parent's)."""
    llm.n_tokens = depth
    started = time.perf_counter()
    for token in tokens:
        llm.eval([token])
    return time.perf_counter() - started


def llama_cpp_last_logits(llm) -> np.ndarray:
    # Llama.scores holds nothing unless logits_all=True (which makes every prefill compute
    # n_vocab logits per token): read the last token's row from the context instead.
    row = _llama_cpp().llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(row, shape=(llm.n_vocab(),)).copy()


# --- speed ---------------------------------------------------------------------------------------


def compare_speed(
    model: str, threads: int, n_prompt: int, n_gen: int, repeat: int, depth: int = 0
) -> dict:
    n_ctx = max(n_prompt, depth + n_gen)
    ours = llamay.load(model, threads=threads, n_ctx=n_ctx, prefix_cache=False)
    theirs = _load_llama_cpp(resolve_model(model), threads, n_ctx)
    prompt, generated = bench_tokens(ours, n_prompt), bench_tokens(ours, n_gen)
    # warm-up: page the weights in, let each engine size its buffers
    prefill_seconds(ours, prompt)
    llama_cpp_prefill_seconds(theirs, prompt)
    # decode after `depth` prompt tokens: llamay forks one context holding them; llama.cpp
    # evaluates them once and keeps them (the last prefill before the decode runs)
    after = depth_contexts(ours, depth, 1)
    decode_seconds(ours, [generated[:4]], after)
    times: dict[str, list[float]] = {key: [] for key in ("ours_pp", "cpp_pp", "ours_tg", "cpp_tg")}
    for _ in range(repeat):
        times["ours_pp"].append(prefill_seconds(ours, prompt))
        times["cpp_pp"].append(llama_cpp_prefill_seconds(theirs, prompt))
    if depth:
        llama_cpp_prefill_seconds(theirs, bench_tokens(ours, depth))
    llama_cpp_decode_seconds(theirs, generated[:4], depth)
    for _ in range(repeat):
        times["ours_tg"].append(decode_seconds(ours, [generated], after))
        times["cpp_tg"].append(llama_cpp_decode_seconds(theirs, generated, depth))
    for context in after or []:
        context.close()
    ours.close()
    theirs.close()
    rate = {
        key: (n_prompt if key.endswith("pp") else n_gen) / statistics.median(values)
        for key, values in times.items()
    }
    return {
        "threads": threads,
        "prompt_tokens": n_prompt,
        "gen_tokens": n_gen,
        "depth": depth,
        "llamay_prefill_tps": round(rate["ours_pp"], 1),
        "llama_cpp_prefill_tps": round(rate["cpp_pp"], 1),
        "prefill_ratio": round(rate["ours_pp"] / rate["cpp_pp"], 3),
        "llamay_decode_tps": round(rate["ours_tg"], 1),
        "llama_cpp_decode_tps": round(rate["cpp_tg"], 1),
        "decode_ratio": round(rate["ours_tg"] / rate["cpp_tg"], 3),
    }


# --- logits --------------------------------------------------------------------------------------


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def compare_logits(model: str, threads: int, text: str, n_tokens: int) -> dict:
    ours = llamay.load(model, threads=threads, n_ctx=n_tokens)
    theirs = _load_llama_cpp(resolve_model(model), threads, n_tokens)
    tokens = ours.tokenize(text)[:n_tokens]
    context = ours.context()
    theirs.reset()
    differences, agree, nll_mine, nll_reference = [], 0, [], []
    for step, token in enumerate(tokens[:-1]):
        context.feed([token])
        theirs.eval([token])
        mine, reference = (
            _log_softmax(context.logits()),
            _log_softmax(llama_cpp_last_logits(theirs)),
        )
        following = tokens[step + 1]
        differences.append(abs(mine[following] - reference[following]))
        nll_mine.append(-mine[following])
        nll_reference.append(-reference[following])
        agree += int(np.argmax(mine) == np.argmax(reference))
    context.close()
    ours.close()
    theirs.close()
    return {
        "threads": threads,
        "steps": len(differences),
        "mean_abs_logprob_diff": round(float(np.mean(differences)), 4),
        "max_abs_logprob_diff": round(float(np.max(differences)), 4),
        "top1_agreement": round(agree / len(differences), 4),
        # the perplexity of the text after its first token, each engine's own
        "llamay_perplexity": round(float(np.exp(np.mean(nll_mine))), 4),
        "llama_cpp_perplexity": round(float(np.exp(np.mean(nll_reference))), 4),
    }


# --- the command ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="gemma3:270m",
        help="MODEL: a .gguf path, a store name, or SHAPE:TYPE of bench/models.py",
    )
    parser.add_argument("--threads", default=None, help="comma-separated thread counts")
    parser.add_argument("-p", "--n-prompt", type=int, default=512, help="prefill tokens")
    parser.add_argument("-n", "--n-gen", type=int, default=64, help="decode tokens")
    parser.add_argument(
        "-d", "--depth", type=int, default=0, help="prompt tokens before the timed decode"
    )
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per figure")
    parser.add_argument("--logits", type=int, metavar="N", help="compare logits over N tokens")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT, help="text for --logits")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    args = parser.parse_args()
    _llama_cpp()
    threads = thread_counts(args.threads)
    args.model = resolve_shape(args.model)

    if args.logits:
        text = args.text.read_text(encoding="utf-8")
        results = [compare_logits(args.model, count, text, args.logits) for count in threads]
    else:
        results = [
            compare_speed(args.model, count, args.n_prompt, args.n_gen, args.repeat, args.depth)
            for count in threads
        ]
    if args.json:
        print(json.dumps(results))
    elif args.logits:
        for row in results:
            print(
                f"threads {row['threads']}: {row['steps']} steps, |Δ logprob| of the next token "
                f"mean {row['mean_abs_logprob_diff']} max {row['max_abs_logprob_diff']}, "
                f"top-1 agreement {row['top1_agreement']:.1%}"
            )
    else:
        at = f"; decode after {args.depth} prompt tokens" if args.depth else ""
        print(
            f"model {args.model}; medians of {args.repeat} alternating runs{at}; "
            "ratio = llamay / llama.cpp"
        )
        print(
            f"{'threads':>7}  {'prefill llamay':>14}  {'llama.cpp':>9}  {'ratio':>5}  "
            f"{'decode llamay':>13}  {'llama.cpp':>9}  {'ratio':>5}"
        )
        for row in results:
            print(
                f"{row['threads']:>7}  {row['llamay_prefill_tps']:>14.1f}  "
                f"{row['llama_cpp_prefill_tps']:>9.1f}  {row['prefill_ratio']:>5.2f}  "
                f"{row['llamay_decode_tps']:>13.1f}  {row['llama_cpp_decode_tps']:>9.1f}  "
                f"{row['decode_ratio']:>5.2f}"
            )


if __name__ == "__main__":
    main()
