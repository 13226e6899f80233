"""`llamay bench MODEL`: prefill and decode speed per thread count, as llama-bench measures them."""

from __future__ import annotations

import json
import os
import statistics
import time

import click
import numpy as np

import llamay
from llamay.engine import Model


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


def decode_seconds(model: Model, tokens: list[int]) -> float:
    """Time to evaluate `tokens` one at a time on a fresh context, as generation does."""
    context = model.context()
    started = time.perf_counter()
    for token in tokens:
        context.feed([token])
    elapsed = time.perf_counter() - started
    context.close()
    return elapsed


def measure(model_name: str, threads: int, n_prompt: int, n_gen: int, repeat: int) -> dict:
    """Median prefill and decode tokens/s over `repeat` runs, after one warm-up run of each."""
    # No prefix cache: every timed prefill must compute its prompt, not find it cached.
    model = llamay.load(model_name, threads=threads, n_ctx=max(n_prompt, n_gen), prefix_cache=False)
    try:
        prompt, generated = bench_tokens(model, n_prompt), bench_tokens(model, n_gen)
        prefill_seconds(model, prompt)
        decode_seconds(model, generated[:4])
        prefill = [prefill_seconds(model, prompt) for _ in range(repeat)]
        decode = [decode_seconds(model, generated) for _ in range(repeat)]
    finally:
        model.close()
    return {
        "threads": threads,
        "prefill_tps": round(n_prompt / statistics.median(prefill), 2),
        "decode_tps": round(n_gen / statistics.median(decode), 2),
        "prompt_tokens": n_prompt,
        "gen_tokens": n_gen,
    }


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
    model: str, n_prompt: int, n_gen: int, threads: list[int], repeat: int, as_json: bool
) -> None:
    """Measure MODEL's prefill and decode speed in tokens per second.

    Prefill evaluates -p tokens in one call; decode evaluates -n tokens one at a time, each on a
    fresh context, as llama-bench's pp and tg tests do (sampling is not timed). Each figure is the
    median of --repeat runs.
    """
    results = [measure(model, count, n_prompt, n_gen, repeat) for count in threads]
    if as_json:
        click.echo(json.dumps(results))
        return
    click.echo(f"{'threads':>7}  {f'prefill {n_prompt} t/s':>16}  {f'decode {n_gen} t/s':>15}")
    for row in results:
        click.echo(f"{row['threads']:>7}  {row['prefill_tps']:>16.1f}  {row['decode_tps']:>15.1f}")
