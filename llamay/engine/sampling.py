"""Choosing the next token from a row of logits.

The chain is llama.cpp's default sampler chain, in its order:

    penalties -> top-k -> typical -> top-p -> min-p -> temperature -> draw

with llama.cpp's defaults (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8). Penalties and
typical sampling are not implemented yet; they slot in where `Sampler.sample` says. A temperature
of 0 is greedy: the arg-max of the logits, the lowest id among equals.

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
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

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

    `top_k` 0, `top_p` 1 and `min_p` 0 each switch their stage off. `seed` None draws a fresh seed
    when a Sampler is made (it reports the one it drew).
    """

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be 0 (greedy) or more, not {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be 0 (off) or more, not {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1 is off), not {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p must be in [0, 1] (0 is off), not {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


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


class Sampler:
    """Picks tokens for one sequence with fixed parameters; holds no state between calls."""

    def __init__(self, params: SamplingParams = SamplingParams(), sequence: int = 0) -> None:
        self.params = params
        self.sequence = sequence
        self.seed = params.seed if params.seed is not None else new_seed()

    def sample(self, logits: np.ndarray, step: int) -> int:
        """The token for `step` (by convention the position it will take in the sequence) given
        the logits (n_vocab,) after the last token."""
        params = self.params
        # penalties and logit biases act here, on the full row, before anything is cut.
        if params.greedy:
            return int(np.argmax(logits))
        candidates = top_k(logits, params.top_k)
        # typical sampling goes here, between top-k and top-p.
        candidates = top_p(candidates, params.top_p)
        candidates = min_p(candidates, params.min_p)
        return draw(candidates, params.temperature, uniform(self.seed, self.sequence, step))
