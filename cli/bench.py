"""`llamay bench MODEL`: prefill and decode speed per thread count, as llama-bench measures them."""

from __future__ import annotations

import json
import os
import statistics
import time

import click
import numpy as np

import llamay
from llamay.engine import Context, Model


def bench_tokens(model: Model, n: int) -> list[int]:
    """n token ids to evaluate: BOS (when the model has one) then fixed pseudo-random ids, as
    llama-bench uses; speed does not depend on which tokens they are."""
    bos = model.tokenizer.bos_id
    head = [bos] if bos is not None else []
    rest = np.random.default_rng(0).integers(0, model.n_vocab, size=n - len(head))
    return head + rest.tolist()


def prefill_seconds(model: Model, tokens: list[int]) -> float:
    """Time to evaluate `tokens` in one call on a fresh context."""
    context = model.context()
    started = time.perf_counter()
    context.feed(tokens)
    elapsed = time.perf_counter() - started
    context.close()
    return elapsed


def decode_seconds(model: Model, tokens: list[int], after: Context | None = None) -> float:
    """Time to evaluate `tokens` one at a time, as generation does: on a fresh context, or on a
    fork of `after` (a context holding a prompt already: decode at that depth)."""
    context = after.fork() if after is not None else model.context()
    started = time.perf_counter()
    for token in tokens:
        context.feed([token])
    elapsed = time.perf_counter() - started
    context.close()
    return elapsed


def depth_context(model: Model, depth: int) -> Context | None:
    """A context holding `depth` prompt tokens to decode after (None for depth 0)."""
    if depth == 0:
        return None
    context = model.context()
    context.feed(bench_tokens(model, depth))
    return context


def measure(
    model_name: str, threads: int, n_prompt: int, n_gen: int, repeat: int, depth: int = 0
) -> dict:
    """Median prefill and decode tokens/s over `repeat` runs, after one warm-up run of each;
    decode after `depth` tokens of prompt (llama-bench's -d), each run on a fork of them."""
    # No prefix cache: every timed prefill must compute its prompt, not find it cached.
    n_ctx = max(n_prompt, depth + n_gen)
    model = llamay.load(model_name, threads=threads, n_ctx=n_ctx, prefix_cache=False)
    after = None
    try:
        prompt, generated = bench_tokens(model, n_prompt), bench_tokens(model, n_gen)
        after = depth_context(model, depth)
        prefill_seconds(model, prompt)
        decode_seconds(model, generated[:4], after)
        prefill = [prefill_seconds(model, prompt) for _ in range(repeat)]
        decode = [decode_seconds(model, generated, after) for _ in range(repeat)]
    finally:
        if after is not None:
            after.close()
        model.close()
    row = {
        "threads": threads,
        "prefill_tps": round(n_prompt / statistics.median(prefill), 2),
        "decode_tps": round(n_gen / statistics.median(decode), 2),
        "prompt_tokens": n_prompt,
        "gen_tokens": n_gen,
    }
    return {**row, "depth": depth} if depth else row  # the contract's keys, unless -d is given


def thread_counts(value: str | None) -> list[int]:
    """ "1,2" -> [1, 2]; None -> 1 and all cores."""
    if value is None:
        return sorted({1, os.cpu_count() or 1})
    try:
        counts = [int(part) for part in value.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ValueError(f"{value!r} is not a comma-separated list of positive integers")
    return counts


def _thread_counts_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> list[int]:
    try:
        return thread_counts(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@click.command()
@click.argument("model")
@click.option(
    "-p",
    "--n-prompt",
    "n_prompt",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Prompt tokens evaluated in one call (prefill).",
)
@click.option(
    "-n",
    "--n-gen",
    "n_gen",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Tokens evaluated one at a time (decode).",
)
@click.option(
    "-d",
    "--depth",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Prompt tokens already in the context when decode is timed (llama-bench's -d).",
)
@click.option(
    "--threads",
    "threads",
    callback=_thread_counts_option,
    help="Comma-separated thread counts, e.g. 1,2. [default: 1 and all cores]",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Timed runs per figure (after a warm-up); the median is shown.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON list, one object per thread count."
)
def bench(
    model: str,
    n_prompt: int,
    n_gen: int,
    depth: int,
    threads: list[int],
    repeat: int,
    as_json: bool,
) -> None:
    """Measure MODEL's prefill and decode speed in tokens per second.

    Prefill evaluates -p tokens in one call; decode evaluates -n tokens one at a time, each on a
    fresh context, as llama-bench's pp and tg tests do (sampling is not timed); with -d, decode
    runs after that many prompt tokens (each run on a fork of one context holding them). Each
    figure is the median of --repeat runs.
    """
    results = [measure(model, count, n_prompt, n_gen, repeat, depth) for count in threads]
    if as_json:
        click.echo(json.dumps(results))
        return
    decode = f"decode {n_gen} t/s" + (f" @ {depth}" if depth else "")
    click.echo(f"{'threads':>7}  {f'prefill {n_prompt} t/s':>16}  {decode:>15}")
    for row in results:
        click.echo(f"{row['threads']:>7}  {row['prefill_tps']:>16.1f}  {row['decode_tps']:>15.1f}")
