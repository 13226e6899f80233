"""Speculative decoding with a draft model: a small model of the same vocabulary proposes the
next few tokens, and the target verifies them all in one step.

Each generation that drafts has a context on the draft model, kept in step with its own: before
a proposal it is cut back to the longest prefix it shares with the target's tokens (what a
verify step kept, or a fork, or a rewind) and fed what it lacks, from the draft model's prefix
tree where another context computed it already. The draft model then decodes greedily, a token
per step, the proposals of every drafting generation batched in one forward pass per step. The
target feeds the sampled token and the draft together, and keeps each draft token its own
sampler chooses in its place (generate.py: Generation.verify) — the same draw, on the same
logits, as without a draft. So the tokens are the same bits with the draft or without it,
greedy or seeded; a good draft only saves steps.

How many tokens to propose adapts to how many were accepted: one more after a draft accepted
whole, half as many after one mostly refused, between 1 and the generation's most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from llamay.errors import ContextOverflow, LlamayError
from llamay.state import Context

if TYPE_CHECKING:
    from llamay.engine.model import Model

# Draft tokens a generation proposes at first, and at most (the steps a target verifies them in
# cost more with each, and a long draft is rarely accepted whole).
FIRST_DRAFT = 4
MAX_DRAFT = 16
# A draft stops at a token the draft model gives less than this probability (after its first):
# the target would most likely refuse it and everything after it. `draft_p_min` at load.
MIN_PROBABILITY = 0.3


def check_vocabulary(target: Model, draft: Model) -> None:
    """A LlamayError naming the difference when `draft` cannot draft for `target`: its tokens
    must be the target's (the same ids for the same texts), and its special tokens too."""
    t, d = target.tokenizer.vocab, draft.tokenizer.vocab
    where = f"{draft.path.name} cannot draft for {target.path.name}"
    if t.kind != d.kind or t.model != d.model:
        raise LlamayError(f"{where}: its tokenizer is {d.model}, the target's {t.model}")
    if abs(len(t.tokens) - len(d.tokens)) > 128:  # llama.cpp's allowance for padded tables
        raise LlamayError(f"{where}: it has {len(d.tokens)} tokens, the target {len(t.tokens)}")
    for role in ("bos", "eos", "eot"):
        if t.ids.get(role) != d.ids.get(role):
            raise LlamayError(
                f"{where}: its {role.upper()} token is {d.ids.get(role)}, the target's "
                f"{t.ids.get(role)}"
            )
    for i in range(min(len(t.tokens), len(d.tokens))):
        if t.tokens[i] != d.tokens[i]:
            raise LlamayError(
                f"{where}: token {i} is {d.tokens[i]!r} there and {t.tokens[i]!r} in the target"
            )


@dataclass
class DraftState:
    """One generation's side of drafting: its context on the draft model and its draft length."""

    model: Model
    most: int  # the most tokens one proposal may hold
    min_probability: float = MIN_PROBABILITY
    size: int = FIRST_DRAFT
    context: Context | None = None
    proposed: int = 0  # draft tokens proposed, and accepted by the target, in all
    accepted: int = 0
    last: int = 0  # the size of the proposal being verified

    def __post_init__(self) -> None:
        self.size = min(self.size, self.most)

    def verified(self, n_accepted: int) -> None:
        """The target kept n_accepted tokens of the last proposal: the next one is longer after
        a proposal accepted whole, shorter after one mostly refused."""
        self.accepted += n_accepted
        if self.last and n_accepted == self.last:
            self.size = min(self.size + 1, self.most)
        elif n_accepted * 2 < self.last:
            self.size = max(1, self.size // 2)
        self.last = 0

    def close(self) -> None:
        if self.context is not None:
            self.context.close()
            self.context = None


def propose(requests: Sequence[tuple[DraftState, list[int], int]]) -> list[list[int]]:
    """The draft for each (state, the target's tokens, room) request: up to min(state.size,
    room) tokens the draft model decodes greedily after the tokens, its proposals batched. A
    draft model whose KV cache is full proposes nothing this time (the target decodes on)."""
    if not requests:
        return []
    model = requests[0][0].model
    contexts: list[Context] = []
    items: list[tuple[Context, list[int]]] = []
    for state, tokens, _ in requests:
        context = state.context if state.context is not None else model.context()
        state.context = context
        shared = _common_prefix(context.tokens, tokens)
        if shared == len(tokens):  # nothing new to feed: feed the last token again
            shared -= 1
        context.truncate(shared)
        contexts.append(context)
        items.append((context, tokens[shared:]))
    drafts: list[list[int]] = [[] for _ in requests]
    wanted = [min(state.size, room) for state, _, room in requests]
    try:
        model.forward_batch(items, "last")
        active = [i for i in range(len(requests)) if wanted[i] > 0]
        while active:
            feeding = []
            for i in active:
                token, probability = _greedy(contexts[i].logits(copy=False))
                if probability < requests[i][0].min_probability and drafts[i]:
                    continue
                drafts[i].append(token)
                if len(drafts[i]) < wanted[i] and not model.tokenizer.is_eog(token):
                    feeding.append(i)
            if feeding:
                model.forward_batch([(contexts[i], [drafts[i][-1]]) for i in feeding], "last")
            active = feeding
    except ContextOverflow:
        # the draft model's pages ran out: these generations decode without a draft this time,
        # and their draft contexts let go of their pages
        for state, _, _ in requests:
            state.close()
        return [[] for _ in requests]
    for (state, _, _), draft in zip(requests, drafts, strict=True):
        state.proposed += len(draft)
        state.last = len(draft)
    return drafts


def _greedy(logits: np.ndarray) -> tuple[int, float]:
    """The most likely token (the lowest id among equals) and its probability."""
    token = int(np.argmax(logits))
    weights = np.exp(logits - logits[token], dtype=np.float64)
    return token, float(1.0 / weights.sum())


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differs = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differs[0]) if len(differs) else n
