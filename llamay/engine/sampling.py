"""Choosing the next token from a row of logits.

The chain is llama.cpp's default sampler chain, in its order:

    grammar mask -> logit bias -> penalties -> top-k -> typical -> top-p -> min-p -> temperature
    -> draw

with llama.cpp's defaults (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8; typical-p 1 and
every penalty off). The grammar mask comes first: llama.cpp samples without it and resamples with
it when the grammar rejects the token, which picks the same token as masking first. A temperature
of 0 (or a top-p of 0) is greedy: the arg-max of the masked, biased and penalized logits, the
lowest id among equals.

Penalties follow llama.cpp: over the last `repeat_last_n` tokens of the context (the prompt
included), a token seen c times has a positive logit divided by `repeat_penalty` (a negative one
multiplied), then `frequency_penalty * c + presence_penalty` subtracted.

Log-probabilities (`logprobs`) are the model's own: the log-softmax of the raw logits, before any
stage of the chain changes them.

The random number behind each draw comes from a counter-based generator keyed by (seed, sequence,
step): a pure function of the key, never a shared stream. So a sequence's tokens depend only on its
own seed, sequence number and positions, not on what else runs, on thread counts or on how requests
are batched.

Every stage works on whole arrays (a vocabulary has up to 262,144 entries): partial selection for
top-k, one sort of what is left, cumulative sums for top-p and the draw. Ties between equal logits
are broken by token id, lowest first, wherever one must be chosen, so that results are exact and
reproducible rather than left to a sorting algorithm.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import NamedTuple

import numpy as np

from llamay.engine.ranges import RANGES, check

# --- the counter-based generator ----------------------------------------------------------------

# SplitMix64's increment and output function (Steele, Lea and Flood, 2014): a bijection on 64-bit
# integers whose every output bit depends on every input bit.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_U64 = (1 << 64) - 1


def _mix(x: np.ndarray) -> np.ndarray:
    # uint64 arrays (never numpy scalars, which warn on the wraparound that is meant here)
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX_1
    x = (x ^ (x >> np.uint64(27))) * _MIX_2
    return x ^ (x >> np.uint64(31))


def _as_u64(values: int | np.ndarray) -> np.ndarray:
    """Integers as uint64 arrays, negative ones taken modulo 2**64."""
    if isinstance(values, int):
        return np.array([values & _U64], dtype=np.uint64)
    return np.asarray(values).astype(np.int64).view(np.uint64)


def uniforms(seed: int, sequence: int, steps: int | np.ndarray) -> np.ndarray:
    """Uniform doubles in [0, 1), one per step: a hash of (seed, sequence, step).

    The key is folded in one part at a time through SplitMix64's output function; each fold is a
    bijection, so distinct steps of one (seed, sequence) never share a value before the final
    53-bit rounding.
    """
    key = _mix(_mix(_as_u64(seed)) ^ _as_u64(sequence))
    bits = _mix(key ^ _as_u64(steps))
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def uniform(seed: int, sequence: int, step: int) -> float:
    """The uniform double in [0, 1) for one step of one sequence."""
    return float(uniforms(seed, sequence, step)[0])


def new_seed() -> int:
    """A seed from the operating system, for callers that do not choose one."""
    return secrets.randbits(63)


# --- parameters ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplingParams:
    """What a caller chooses about sampling; the defaults are llama.cpp's.

    `top_k` 0, `top_p` 1 and `min_p` 0 each switch their stage off; `temperature` 0 and `top_p` 0
    (the smallest head of the distribution: its one most likely token) are greedy. `seed` None
    draws a fresh seed when a Sampler is made (it reports the one it drew).
    """

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = None
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The ranges are the shared table's (ranges.py), which the server checks requests with.
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name in RANGES and value is not None:
                check(item.name, value)

    @property
    def penalized(self) -> bool:
        return self.repeat_last_n != 0 and (
            self.repeat_penalty != 1 or self.presence_penalty != 0 or self.frequency_penalty != 0
        )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_p == 0


# --- the stages ----------------------------------------------------------------------------------


class Candidates(NamedTuple):
    """The tokens still in the running, by logit from highest to lowest (ties: lower id first)."""

    ids: np.ndarray  # int64
    logits: np.ndarray  # float64


def top_k(logits: np.ndarray, k: int) -> Candidates:
    """The k highest logits of a full row, sorted; k 0 (or k >= the row) keeps them all."""
    n = logits.shape[0]
    if 0 < k < n:
        # The smallest of k block maxima is at most the k-th highest logit, so the tokens at or
        # above it hold the top k: usually a few hundred, where a selection over the whole row
        # would cost milliseconds.
        block = n // k
        floor = logits[: k * block].reshape(k, block).max(axis=1).min()
        ids = np.flatnonzero(logits >= floor)
        kept = logits[ids]
        kth = np.partition(kept, kept.shape[0] - k)[kept.shape[0] - k]
        above = ids[kept > kth]
        tied = ids[kept == kth][: k - above.shape[0]]  # ids ascend: the lowest ids win ties
        ids = np.sort(np.concatenate((above, tied)))
    else:
        ids = np.arange(n)
    order = np.argsort(-logits[ids], kind="stable")  # stable over ascending ids: ties by id
    ids = ids[order].astype(np.int64)
    return Candidates(ids, logits[ids].astype(np.float64))


def apply_logit_bias(logits: np.ndarray, bias: Mapping[int, float]) -> None:
    """Adds each token's bias to its logit, in place (-inf bans a token)."""
    if bias:
        ids = np.fromiter(bias.keys(), dtype=np.int64, count=len(bias))
        if ids.min() < 0 or ids.max() >= logits.shape[0]:
            bad = int(ids[(ids < 0) | (ids >= logits.shape[0])][0])
            raise ValueError(f"logit_bias names token {bad}; the vocabulary has {logits.shape[0]}")
        logits[ids] += np.fromiter(bias.values(), dtype=np.float64, count=len(bias)).astype(
            logits.dtype
        )


def apply_penalties(logits: np.ndarray, recent: np.ndarray, params: SamplingParams) -> None:
    """llama.cpp's repetition, frequency and presence penalties over `recent` (the last
    repeat_last_n tokens), in place."""
    if not recent.shape[0]:
        return
    ids, counts = np.unique(recent, return_counts=True)
    values = logits[ids].astype(np.float64)
    values = np.where(values > 0, values / params.repeat_penalty, values * params.repeat_penalty)
    values -= counts * params.frequency_penalty + params.presence_penalty
    logits[ids] = values


def typical(c: Candidates, p: float) -> Candidates:
    """Locally typical sampling (Meister et al., 2022): the tokens whose surprise is closest to
    the distribution's entropy, fewest first, until they hold probability p; p 1 keeps them all.
    The survivors stay in logit order."""
    if p >= 1 or c.ids.shape[0] < 2:
        return c
    probs = _softmax(c.logits)
    logp = np.log(np.maximum(probs, np.finfo(np.float64).tiny))
    entropy = -np.sum(probs * logp)
    order = np.argsort(np.abs(-logp - entropy), kind="stable")
    cumulative = np.cumsum(probs[order])
    keep = min(int(np.searchsorted(cumulative, p, side="left")) + 1, order.shape[0])
    kept = np.sort(order[:keep])  # back to logit order
    return Candidates(c.ids[kept], c.logits[kept])


def top_p(c: Candidates, p: float) -> Candidates:
    """The smallest head of the candidates whose probabilities add up to at least p (at least one
    token); p 1 keeps them all."""
    if p >= 1:
        return c
    cumulative = np.cumsum(_softmax(c.logits))
    keep = min(int(np.searchsorted(cumulative, p, side="left")) + 1, c.ids.shape[0])
    return Candidates(c.ids[:keep], c.logits[:keep])


def min_p(c: Candidates, p: float) -> Candidates:
    """The candidates at least p times as probable as the most probable one; p 0 keeps them all."""
    if p <= 0:
        return c
    threshold = c.logits[0] + np.log(p)
    keep = int(np.count_nonzero(c.logits >= threshold))  # a head: the logits are sorted
    return Candidates(c.ids[:keep], c.logits[:keep])


def draw(c: Candidates, temperature: float, u: float) -> int:
    """The candidate whose share of the tempered distribution covers u (uniform in [0, 1))."""
    cumulative = np.cumsum(_softmax(c.logits / temperature))
    index = int(np.searchsorted(cumulative, u * cumulative[-1], side="right"))
    return int(c.ids[min(index, c.ids.shape[0] - 1)])


def _softmax(logits: np.ndarray) -> np.ndarray:
    weights = np.exp(logits - logits[0])  # logits[0] is the maximum: sorted candidates
    return weights / np.cumsum(weights)[-1]


# --- the chain -----------------------------------------------------------------------------------


class Choice(NamedTuple):
    """A sampled token, with its log-probability and the top alternatives when asked for."""

    token: int
    logprob: float | None
    top_logprobs: list[tuple[int, float]] | None


class Sampler:
    """Picks tokens for one sequence with fixed parameters; holds no state between calls."""

    def __init__(self, params: SamplingParams = SamplingParams(), sequence: int = 0) -> None:
        self.params = params
        self.sequence = sequence
        self.seed = params.seed if params.seed is not None else new_seed()

    def sample(
        self,
        logits: np.ndarray,
        step: int,
        recent: Sequence[int] = (),
        allowed: np.ndarray | None = None,
    ) -> int:
        """The token for `step` (by convention the position it will take in the sequence) given
        the logits (n_vocab,) after the last token, the context's tokens so far (`recent`: the
        penalties look at its last repeat_last_n) and the grammar's mask of allowed tokens."""
        params = self.params
        # A copy where a stage below writes the row (the mask, the bias, the penalties): the
        # caller's logits stay as they were. The chain itself only reads it.
        writes = allowed is not None or bool(params.logit_bias) or params.penalized
        row = np.array(logits, dtype=np.float32) if writes else np.asarray(logits, np.float32)
        if allowed is not None:
            row[~allowed] = -np.inf
        apply_logit_bias(row, params.logit_bias)
        if params.penalized:
            window = recent if params.repeat_last_n < 0 else recent[-params.repeat_last_n :]
            apply_penalties(row, np.asarray(window, dtype=np.int64), params)
        if params.greedy or (allowed is not None and np.count_nonzero(allowed) == 1):
            return int(np.argmax(row))
        candidates = top_k(row, params.top_k)
        candidates = _finite(candidates)
        candidates = typical(candidates, params.typical_p)
        candidates = top_p(candidates, params.top_p)
        candidates = min_p(candidates, params.min_p)
        return draw(candidates, params.temperature, uniform(self.seed, self.sequence, step))

    def choose(
        self,
        logits: np.ndarray,
        step: int,
        recent: Sequence[int] = (),
        allowed: np.ndarray | None = None,
        logprobs: int | None = None,
    ) -> Choice:
        """`sample`, plus the chosen token's log-probability (logprobs 0) and the `logprobs`
        most likely tokens' (logprobs > 0) when logprobs is not None."""
        token = self.sample(logits, step, recent, allowed)
        if logprobs is None:
            return Choice(token, None, None)
        return Choice(token, *log_probabilities(logits, token, logprobs))


def log_probabilities(
    logits: np.ndarray, token: int, n_top: int
) -> tuple[float, list[tuple[int, float]] | None]:
    """log p(token) under the softmax of the raw logits, and the n_top most likely tokens with
    theirs (ties: lower id first); None for the list when n_top is 0."""
    row = logits.astype(np.float64)
    peak = row.max()
    log_total = peak + np.log(np.sum(np.exp(row - peak)))
    chosen = float(row[token] - log_total)
    if not n_top:
        return chosen, None
    best = top_k(logits, n_top)
    return chosen, [
        (int(i), float(v - log_total)) for i, v in zip(best.ids, best.logits, strict=True)
    ]


def _finite(c: Candidates) -> Candidates:
    """Drops masked and banned tokens (-inf), keeping the most likely one if all are."""
    keep = max(int(np.count_nonzero(np.isfinite(c.logits))), 1)
    return Candidates(c.ids[:keep], c.logits[:keep])
