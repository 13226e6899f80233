"""`llamay verify`: the determinism checks, on a user's model or on the built-in synthetic one.

llamay promises that the logits of a sequence are the same bits however they are computed:
whatever the thread count, whichever sequences share the batch, however the prompt is cut into
steps, whether the sequence was forked from another or restored from a snapshot; that a seeded
generation samples the same tokens every time; and that prompt-lookup decoding changes no token. Each check here computes one sequence
several ways and compares every logit of every position with `np.array_equal`.

The reference is a context fed the sequence with all logits, which never takes cached pages
(Model.forward_batch), so it is computed anew; models are loaded as users run them, prefix
cache on, so that the path through cached pages is compared with it too.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import llamay
from llamay._core import _cpu
from llamay.engine import Context, Model
from llamay.errors import SnapshotMismatch
from llamay.models.synthetic import write_builtin
from llamay.store import resolve_model

# Small pages and a small context: forks, chunks and batches cross many page boundaries.
PAGE_TOKENS = 16
N_CTX = 576
PROMPT = 100  # tokens: six pages and a quarter
DECODE = 8  # single-token steps after the prompt, as generation makes them
SEQUENCE = PROMPT + DECODE
# a prompt past two of attention's spans of 256 positions (each its own softmax, folded), where
# the threads of a decode step may split a KV head's positions between them
DEEP = 560
SAMPLED = 32  # tokens per seeded generation
SEED = 1234
TEXT = (
    "Determinism is a promise about bits. A model that answers the same question twice should "
    "give the same answer twice, whether it ran on one core or on sixteen, alone or beside a "
    "hundred other requests, from a cold start or from a cached prefix, a fork, or a snapshot "
    "saved to disk last week. Floating point arithmetic is not associative, so every sum must "
    "be taken in the same order every time; this command checks that it is."
)


@dataclass(frozen=True)
class Check:
    """One check's outcome: `figure` says what was measured, `numbers` holds the figures."""

    name: str
    passed: bool
    figure: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "figure": self.figure, **self.numbers}


def compare_logits(name: str, pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> Check:
    """PASS when every (expected, got) pair of logit arrays is bitwise equal; the figure is the
    largest |Δlogit| over all of them and the number of positions (rows) compared."""
    equal, worst, positions = True, 0.0, 0
    for expected, got in pairs:
        expected, got = np.atleast_2d(expected), np.atleast_2d(got)
        if expected.shape != got.shape:
            equal, worst = False, float("inf")
            continue
        equal &= bool(np.array_equal(expected, got))
        diff = np.nan_to_num(np.abs(expected - got), nan=np.inf)
        worst = max(worst, float(diff.max(initial=0.0)))
        positions += len(expected)
    return Check(
        name,
        equal,
        f"max |Δlogit| = {worst:g} over {positions} positions",
        {"max_abs_diff": worst if np.isfinite(worst) else None, "positions": positions},
    )


def run_checks(
    model: str | os.PathLike[str] | None = None,
    kv_type: str | None = None,
    draft: str | os.PathLike[str] | None = None,
) -> Iterator[Check]:
    """The checks on MODEL (a path or store name), or on the built-in synthetic model when
    None, with its KV cache of `kv_type` (None: the model's default), each yielded as it
    finishes. `draft`, a draft model of MODEL's vocabulary, adds the check that speculating
    with it changes no token (on the built-in model it runs always, with other weights of the
    same vocabulary as the draft). A check that raises fails, naming the error."""
    path = None if model is None else resolve_model(model)
    draft_path = None if draft is None else resolve_model(draft)
    with tempfile.TemporaryDirectory(prefix="llamay-verify-") as tmp:
        work = Path(tmp)
        # A snapshot must be refused by a model of other weights; synthetic ones cost nothing.
        other = write_builtin(work / "other-weights.gguf", seed=1)
        if path is None:
            path = write_builtin(work / "synthetic.gguf")
            draft_path = draft_path or other
        counts = sorted({1, 2, _cpu.cpu_count()})

        def load(threads: int, kernels: str | None = None) -> Model:
            return llamay.load(
                path,
                threads=threads,
                n_ctx=N_CTX,
                page_tokens=PAGE_TOKENS,
                kv_type=kv_type,
                kernels=kernels,
            )

        models = {k: load(k) for k in counts}
        drafter = None
        if draft_path is not None:
            drafter = llamay.load(
                draft_path, threads=counts[-1], n_ctx=N_CTX, page_tokens=PAGE_TOKENS
            )
        try:
            main = models[counts[-1]]
            sequence = token_stream(main, SEQUENCE)
            steps: list[tuple[str, Callable[[str], Check]]] = (
                encoder_steps(models, main, sequence) if not main.hparams.causal else []
            )
            steps = steps or [
                (
                    f"thread counts ({', '.join(map(str, counts))})",
                    lambda name: check_thread_counts(name, models, sequence),
                ),
                (
                    "batch company (alone, beside 3 others)",
                    lambda name: check_batch_company(name, main, sequence),
                ),
                (
                    "prefill (whole, chunked, token by token)",
                    lambda name: check_prefill_shapes(name, main, sequence),
                ),
                ("fork continuation vs cold", lambda name: check_forks(name, main, sequence)),
                (
                    "snapshot round trip",
                    lambda name: check_snapshot(name, models, sequence, work, other),
                ),
                ("seeded sampling", lambda name: check_sampling(name, models, sequence[:40])),
                ("prompt lookup (on, off)", lambda name: check_lookup(name, main)),
                *(
                    [("draft model (on, off)", lambda name: check_draft(name, main, drafter))]
                    if drafter is not None
                    else []
                ),
                (
                    f"kernel sets ({', '.join(_cpu.usable_kernel_sets())})",
                    lambda name: check_kernel_sets(name, main, load, sequence),
                ),
            ]
            # (an encoder's steps replace the decoder's: it has no generation, forks or chunks)
            for name, step in steps:
                started = time.perf_counter()
                try:
                    check = step(name)
                except Exception as exc:  # a crash is a failed check, reported with the rest
                    check = Check(name, False, f"raised {type(exc).__name__}: {exc}")
                seconds = round(time.perf_counter() - started, 3)
                yield Check(
                    check.name, check.passed, check.figure, check.numbers | {"seconds": seconds}
                )
        finally:
            for m in [*models.values(), *([drafter] if drafter is not None else [])]:
                m.close()


def encoder_steps(
    models: dict[int, Model], main: Model, sequence: list[int]
) -> list[tuple[str, Callable[[str], Check]]]:
    """An encoder's checks (embedding models, rerankers): its pooled outputs of a few inputs
    are the same bits at every thread count, and alone or batched with the others."""
    inputs = [sequence[:n] for n in (5, 37, 64, 100)]

    def outputs(model: Model, together: bool) -> list[np.ndarray]:
        run = model.rerank_ids if model.is_reranker else model.embed_many
        if together:
            return [np.atleast_1d(np.asarray(v)) for v in run(inputs)]
        return [np.atleast_1d(np.asarray(run([one])[0])) for one in inputs]

    def threads(name: str) -> Check:
        first, *rest = models.values()
        expected = outputs(first, True)
        return compare_logits(
            name, [(e, g) for m in rest for e, g in zip(expected, outputs(m, True), strict=True)]
        )

    def company(name: str) -> Check:
        return compare_logits(name, zip(outputs(main, False), outputs(main, True), strict=True))

    counts = ", ".join(map(str, models))
    return [
        (f"embedding thread counts ({counts})", threads),
        ("embedding batch company (alone, beside 3 others)", company),
    ]


def token_stream(model: Model, n: int, offset: int = 0) -> list[int]:
    """n tokens of TEXT (repeated as needed), from token `offset` of its tokenization."""
    ids = model.tokenize(TEXT, add_bos=False)
    return np.resize(np.asarray(ids), offset + n)[offset:].tolist()


def cold(model: Model, ids: Sequence[int]) -> np.ndarray:
    """The logits after every token of ids, fed whole to a new context."""
    with model.context() as ctx:
        return ctx.feed(ids, all_logits=True)


def feed_in_pieces(model: Model, ids: Sequence[int], sizes: Iterable[int]) -> np.ndarray:
    """The logits of ids fed to a new context in pieces of the given sizes (then the rest)."""
    rows, at = [], 0
    with model.context() as ctx:
        for size in [*sizes, len(ids)]:
            if at < len(ids):
                rows.append(ctx.feed(ids[at : at + size], all_logits=True))
                at += size
    return np.concatenate(rows)


def prefill_then_decode(model: Model, sequence: Sequence[int]) -> np.ndarray:
    """The logits of the prompt fed whole, then of each later token fed alone."""
    return feed_in_pieces(model, sequence, [PROMPT, *[1] * DECODE])


def deep_decode(model: Model, sequence: Sequence[int]) -> np.ndarray:
    """The logits after a DEEP-token prompt fed whole, then after each later token fed alone
    (only the prompt's last: a large vocabulary's logits for every position would be GBs)."""
    with model.context() as ctx:
        ctx.feed(sequence[:DEEP])
        rows = [ctx.logits()[None]]
        rows += [ctx.feed([token], all_logits=True) for token in sequence[DEEP:]]
    return np.concatenate(rows)


def check_thread_counts(name: str, models: dict[int, Model], sequence: list[int]) -> Check:
    """The same sequence on models loaded with each thread count, then a deep one."""
    first, *rest = [prefill_then_decode(m, sequence) for m in models.values()]
    deep = token_stream(next(iter(models.values())), DEEP + DECODE, offset=3)
    deep_first, *deep_rest = [deep_decode(m, deep) for m in models.values()]
    pairs = [(first, other) for other in rest] + [(deep_first, other) for other in deep_rest]
    return compare_logits(name, pairs)


# Tokens each kernel set computes: the plain C reference set takes a while on a large model.
KERNEL_SET_TOKENS = 64


def check_kernel_sets(
    name: str, main: Model, load: Callable[[int, str], Model], sequence: list[int]
) -> Check:
    """The sequence's first KERNEL_SET_TOKENS on a model loaded with each kernel set this CPU
    runs (one at a time), against the model as loaded (its best set, or LLAMAY_KERNELS's)."""
    ids = sequence[:KERNEL_SET_TOKENS]
    expected = cold(main, ids)
    pairs = []
    for kernels in _cpu.usable_kernel_sets():
        if kernels != main.kernels:
            model = load(main.threads, kernels)
            try:
                pairs.append((expected, cold(model, ids)))
            finally:
                model.close()
    return compare_logits(name, pairs)


def check_batch_company(name: str, model: Model, sequence: list[int]) -> Check:
    """The sequence alone vs in forward passes beside three other contexts at other positions
    (the prompt in two passes, one cut into two steps by n_batch; then decode steps)."""
    expected = prefill_then_decode(model, sequence)
    target, *others = (model.context() for _ in range(4))
    try:
        others[0].feed(token_stream(model, 23, offset=5))
        got = []
        half = PROMPT * 3 // 5
        out = model.forward_batch(
            [
                (others[0], token_stream(model, 37, offset=11)),
                (others[1], token_stream(model, 64, offset=17)),
                (target, sequence[:half]),  # its tokens straddle the n_batch cut at 128
                (others[2], token_stream(model, 9, offset=3)),
            ],
            "all",
        )
        got.append(out[2])
        out = model.forward_batch(
            [(others[1], [sequence[0]]), (target, sequence[half:PROMPT]), (others[0], [7, 8])],
            "all",
        )
        got.append(out[1])
        for i, token in enumerate(sequence[PROMPT:]):
            company = [(c, [sequence[(i * 7 + j) % PROMPT]]) for j, c in enumerate(others)]
            out = model.forward_batch(
                [*company[: i % 4], (target, [token]), *company[i % 4 :]], "all"
            )
            got.append(out[i % 4])
        return compare_logits(name, [(expected, np.concatenate(got))])
    finally:
        for ctx in (target, *others):
            ctx.close()


def check_prefill_shapes(name: str, model: Model, sequence: list[int]) -> Check:
    """The sequence fed whole vs in uneven chunks vs token by token."""
    expected = cold(model, sequence)
    chunked = feed_in_pieces(model, sequence, [1, 15, 17, 32, 3, 29])
    single = feed_in_pieces(model, sequence, [1] * len(sequence))
    return compare_logits(name, [(expected, chunked), (expected, single)])


def check_forks(name: str, model: Model, sequence: list[int]) -> Check:
    """Forks continued past page boundaries, and their parents continued differently, vs cold
    contexts fed the whole of each; then a new context that takes the forks' cached pages."""
    expected = cold(model, sequence)
    pairs = []
    # A fork inside a page shares a partial page (copied on the first write); one at a page
    # boundary shares only full pages.
    for at in (37, 3 * PAGE_TOKENS):
        detour = token_stream(model, 30, offset=at + 13)
        with model.context() as parent:
            parent.feed(sequence[:at])
            with parent.fork() as child:
                pairs.append(
                    (expected[at:PROMPT], child.feed(sequence[at:PROMPT], all_logits=True))
                )
                pairs.append(
                    (cold(model, sequence[:at] + detour)[at:], parent.feed(detour, all_logits=True))
                )
                for i in range(PROMPT, SEQUENCE):
                    child.feed([sequence[i]])
                    pairs.append((expected[i], child.logits()))
    hits = model.kv_stats()["prefix_hits"]
    with model.context() as cached:
        cached.feed(sequence)
        pairs.append((expected[-1], cached.logits()))
    reused = model.kv_stats()["prefix_hits"] - hits
    check = compare_logits(name, pairs)
    return Check(
        check.name, check.passed, check.figure, check.numbers | {"prefix_reused": reused > 0}
    )


def check_snapshot(
    name: str, models: dict[int, Model], sequence: list[int], work: Path, other: Path
) -> Check:
    """A context saved and restored (into the same model and into one of each other thread
    count) has the original's tokens and logits, samples what the original samples and
    continues as a cold context does; a model of other weights, and the same model with
    another KV type, refuse the snapshot."""
    model = models[max(models)]
    cut = 70
    snapshot = work / "verify.snapshot"
    expected = cold(model, sequence)[cut:]
    prompt = sequence[cut : cut + 3]
    pairs = []
    with model.context() as original:
        original.feed(sequence[:cut])
        original.save(snapshot)
        with original.fork() as fork:
            sampled = sample(model, prompt, SEED, fork)
        same_tokens = same_samples = True
        for into in models.values():
            with into.restore(snapshot) as restored:
                same_tokens &= restored.tokens == original.tokens
                pairs.append((original.logits(), restored.logits()))
                with restored.fork() as fork:
                    same_samples &= sample(into, prompt, SEED, fork) == sampled
                pairs.append((expected, restored.feed(sequence[cut:], all_logits=True)))
    refused = _refuses(other, snapshot, model.kv_type)
    kv_type = "F32" if model.kv_type != "F32" else "F16"
    refused &= _refuses(model.path, snapshot, kv_type)
    check = compare_logits(name, pairs)
    figure = check.figure + ("" if same_tokens else "; context tokens DIFFER")
    figure += "; samples identical" if same_samples else "; samples DIFFER"
    figure += (
        "; other weights and KV type refused"
        if refused
        else "; other weights or KV type NOT refused"
    )
    return Check(
        check.name,
        check.passed and same_tokens and same_samples and refused,
        figure,
        check.numbers
        | {
            "tokens_equal": same_tokens,
            "samples_equal": same_samples,
            "other_weights_refused": refused,
        },
    )


def _refuses(path: Path, snapshot: Path, kv_type: str) -> bool:
    """Whether the model at path, with a KV cache of kv_type, refuses the snapshot."""
    with llamay.load(path, n_ctx=N_CTX, page_tokens=PAGE_TOKENS, kv_type=kv_type) as model:
        try:
            model.restore(snapshot).close()
        except SnapshotMismatch:
            return True
    return False


def sample(model: Model, prompt: list[int], seed: int, context: Context | None = None) -> list[int]:
    """SAMPLED tokens at temperature 0.8 after prompt, in `context` (left open) or a new one."""
    generation = model.generate(
        prompt, max_tokens=SAMPLED, temperature=0.8, seed=seed, context=context
    )
    tokens = list(generation)
    if context is None:
        generation.context.close()
    return tokens


def check_lookup(name: str, model: Model) -> Check:
    """Prompt-lookup decoding changes no token: greedy and seeded generations after a prompt
    that repeats a passage (so drafts are proposed and accepted) give the same tokens with
    lookup off and with drafts of 3 and 8 tokens."""
    passage = token_stream(model, 60)
    prompt = [*passage, *passage[:12]]
    same = True
    for params in ({"temperature": 0.0}, {"temperature": 0.8, "seed": SEED}):
        runs = []
        for lookup in (0, 3, 8):
            generation = model.generate(prompt, max_tokens=SAMPLED, lookup=lookup, **params)
            runs.append(list(generation))
            generation.context.close()
        same &= all(run == runs[0] for run in runs)
    outcome = "identical" if same else "DIFFER"
    return Check(
        name,
        same,
        f"greedy and seeded, lookup 0/3/8, {SAMPLED} tokens each: {outcome}",
        {"tokens": SAMPLED, "identical": same},
    )


def check_draft(name: str, model: Model, draft: Model) -> Check:
    """Speculating with a draft model changes no token: greedy and seeded generations give the
    same tokens without a draft and with `draft` proposing up to 16 tokens a step (no
    confidence cut, so that long drafts are proposed and partly refused), three at once (their
    proposals batched)."""
    prompts = [token_stream(model, 40 - 3 * i, offset=7 + i) for i in range(3)]
    same, proposed, accepted = True, 0, 0
    # the confidence rule is a speed setting, no part of what is checked: off, to draft at length
    p_min, model.draft_p_min = model.draft_p_min, 0.0
    try:
        for params in ({"temperature": 0.0}, {"temperature": 0.8, "seed": SEED}):
            runs = []
            for speculate in (False, True):
                generations = [
                    model.generate(
                        p, max_tokens=SAMPLED, draft=draft if speculate else False, **params
                    )
                    for p in prompts
                ]
                runs.append([list(g) for g in generations])
                for g in generations:
                    if g.drafter is not None:
                        proposed += g.drafter.proposed
                        accepted += g.drafter.accepted
                    g.context.close()
            same &= runs[1] == runs[0]
    finally:
        model.draft_p_min = p_min
    outcome = "identical" if same else "DIFFER"
    return Check(
        name,
        same and proposed > 0,
        f"greedy and seeded, 3 at once, {SAMPLED} tokens each: {outcome}; "
        f"{accepted} of {proposed} draft tokens accepted",
        {"tokens": SAMPLED, "identical": same, "proposed": proposed, "accepted": accepted},
    )


def check_sampling(name: str, models: dict[int, Model], prompt: list[int]) -> Check:
    """Seeded generations sample the same tokens: twice on one model, once on each other
    thread count, and once batched beside three other generations (the scheduler runs them in
    the same forward steps). Another seed should sample others (reported, not required)."""
    main = models[max(models)]
    runs = [sample(main, prompt, SEED)] + [sample(m, prompt, SEED) for m in models.values()]
    with ThreadPoolExecutor(4) as pool:
        prompts = [prompt, *(token_stream(main, 20 + 9 * i, offset=i + 1) for i in range(3))]
        batched = list(pool.map(lambda p: sample(main, p, SEED), prompts))
    runs.append(batched[0])
    same = all(run == runs[0] for run in runs)
    other_seed_differs = sample(main, prompt, SEED + 1) != runs[0]
    outcome = "identical" if same else "DIFFER"
    figure = f"seed {SEED}, {len(runs)} runs of {len(runs[0])} tokens: {outcome}"
    figure += "; another seed differs" if other_seed_differs else "; another seed samples the same"
    return Check(
        name,
        same,
        figure,
        {"runs": len(runs), "tokens": len(runs[0]), "other_seed_differs": other_seed_differs},
    )
