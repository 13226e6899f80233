"""`llamay bench MODEL`: prefill and decode speed per thread count, as llama-bench measures them."""

from __future__ import annotations

import json
import statistics
import time

import click
import numpy as np

import llamay
from llamay._core._cpu import cpu_count
from llamay.engine import Context, Model
from llamay.system import kernels_line

from .engine_options import kv_type_option


def bench_tokens(model: Model, n: int, seed: int = 0) -> list[int]:
    """n token ids to evaluate: BOS (when the model has one) then fixed pseudo-random ids, as
    llama-bench uses; speed does not depend on which tokens they are."""
    bos = model.tokenizer.bos_id
    head = [bos] if bos is not None else []
    rest = np.random.default_rng(seed).integers(0, model.n_vocab, size=n - len(head))
    return head + rest.tolist()


def prefill_seconds(model: Model, tokens: list[int]) -> float:
    """Time to evaluate `tokens` in one call on a fresh context."""
    context = model.context()
    started = time.perf_counter()
    context.feed(tokens)
    elapsed = time.perf_counter() - started
    context.close()
    return elapsed


def decode_seconds(model: Model, streams: list[list[int]], after: list[Context] | None) -> float:
    """Time to evaluate each stream's tokens one at a time, as generation does, every stream on
    a context of its own and all of them in one batched step per token: on fresh contexts, or
    on forks of `after` (contexts holding a prompt already: decode at that depth)."""
    if after is not None:
        contexts = [context.fork() for context in after]
    else:
        contexts = [model.context() for _ in streams]
    started = time.perf_counter()
    for step in range(len(streams[0])):  # Context.feed is a forward_batch of one
        model.forward_batch([(c, [s[step]]) for c, s in zip(contexts, streams, strict=True)])
    elapsed = time.perf_counter() - started
    for context in contexts:
        context.close()
    return elapsed


def depth_contexts(model: Model, depth: int, n: int) -> list[Context] | None:
    """n contexts holding `depth` prompt tokens each, other tokens in each, to decode after
    (None for depth 0)."""
    if depth == 0:
        return None
    contexts = []
    for i in range(n):
        contexts.append(model.context())
        contexts[-1].feed(bench_tokens(model, depth, seed=i))
    return contexts


def load(model_name: str, threads: int, n_ctx: int, contexts: int, kv_type: str | None) -> Model:
    """The model with room in its KV cache for `contexts` contexts of n_ctx tokens."""
    # No prefix cache: every timed prefill must compute its prompt, not find it cached.
    options = dict(threads=threads, n_ctx=n_ctx, prefix_cache=False, kv_type=kv_type)
    model = llamay.load(model_name, **options)
    cache = model.kv_cache
    pages = contexts * -(-n_ctx // cache.page_tokens)
    if pages <= cache.n_pages:
        return model
    model.close()
    return llamay.load(model_name, kv_memory=pages * cache.layout.page_bytes, **options)


def measure(
    model_name: str,
    threads: int,
    n_prompt: int,
    n_gen: int,
    repeat: int,
    depth: int = 0,
    sequences: int = 1,
    kv_type: str | None = None,
) -> dict:
    """Median prefill and decode tokens/s over `repeat` runs, after one warm-up run of each;
    decode of `sequences` streams at once (their tokens/s summed), after `depth` tokens of
    prompt each (llama-bench's -d), each run on forks of them."""
    n_ctx = max(n_prompt, depth + n_gen)
    # the depth contexts, their forks and a prefill's context
    model = load(model_name, threads, n_ctx, 2 * sequences + 1, kv_type)
    kernels = model.kernels
    after = None
    try:
        prompt = bench_tokens(model, n_prompt)
        streams = [bench_tokens(model, n_gen, seed=i) for i in range(sequences)]
        after = depth_contexts(model, depth, sequences)
        prefill_seconds(model, prompt)
        decode_seconds(model, [stream[:4] for stream in streams], after)
        prefill = [prefill_seconds(model, prompt) for _ in range(repeat)]
        decode = [decode_seconds(model, streams, after) for _ in range(repeat)]
    finally:
        for context in after or []:
            context.close()
        model.close()
    row = {
        "threads": threads,
        "prefill_tps": round(n_prompt / statistics.median(prefill), 2),
        "decode_tps": round(sequences * n_gen / statistics.median(decode), 2),
        "prompt_tokens": n_prompt,
        "gen_tokens": n_gen,
        "kernels": kernels,
    }
    # the contract's keys, and those of the options given
    if depth:
        row["depth"] = depth
    if sequences > 1:
        row["sequences"] = sequences
    if kv_type is not None:
        row["kv_type"] = kv_type.upper()
    return row


def thread_counts(value: str | None) -> list[int]:
    """ "1,2" -> [1, 2]; None -> 1 and all cores."""
    if value is None:
        return sorted({1, cpu_count()})
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
    "-s",
    "--sequences",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Sequences decoding at once, each on a context of its own, all in one batched step "
    "per token; decode t/s is their sum.",
)
@kv_type_option()
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
    sequences: int,
    kv_type: str | None,
    threads: list[int],
    repeat: int,
    as_json: bool,
) -> None:
    """Measure MODEL's prefill and decode speed in tokens per second.

    Prefill evaluates -p tokens in one call; decode evaluates -n tokens one at a time, each on a
    fresh context, as llama-bench's pp and tg tests do (sampling is not timed); with -d, decode
    runs after that many prompt tokens (each run on a fork of one context holding them). With
    -s, that many sequences decode at once (each after -d tokens of its own), in batched steps.
    Each figure is the median of --repeat runs.
    """
    results = [
        measure(model, count, n_prompt, n_gen, repeat, depth, sequences, kv_type)
        for count in threads
    ]
    if as_json:
        click.echo(json.dumps(results))
        return
    click.echo(kernels_line())
    decode = f"decode {n_gen} t/s" + (f" x{sequences}" if sequences > 1 else "")
    decode += f" @ {depth}" if depth else ""
    click.echo(f"{'threads':>7}  {f'prefill {n_prompt} t/s':>16}  {decode:>15}")
    for row in results:
        click.echo(f"{row['threads']:>7}  {row['prefill_tps']:>16.1f}  {row['decode_tps']:>15.1f}")
