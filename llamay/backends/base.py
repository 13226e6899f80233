"""The seam every backend plugs into: bind a model to a KV layout, then run forward steps.

A backend (`Backend`) binds a model's blocks (llamay.models.spec.ModelSpec) and the shape of its
KV pages (llamay.state.KVLayout) to an `Executor`: the object that owns the weights as the
backend wants them, the page storage (llamay.state.PageStorage: copy, zero, read, write a page
as its canonical bytes) and whatever scratch memory a step needs, and that runs one forward
step over a `Batch` at a time. Everything above this seam (the state engine, the scheduler,
generation, the server) is the same for every backend. docs/backends.md says how a new backend
is written and tested.

The contract of `step`: every token's K and V are written into its page first, then every
token attends over its sequence's pages; a token's output depends only on its sequence's tokens
and its position, never on which other tokens share the batch, how a prompt is cut into steps,
or the thread count. A backend's `determinism` names the class of backends that compute the
same bits for the same inputs; snapshots record it, and one of another class is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from llamay.models.spec import ModelSpec
from llamay.state.layout import KVLayout, PageStorage


@dataclass(frozen=True)
class Batch:
    """One forward step's tokens.

    Token i (tokens[i], at positions[i]) belongs to sequence sequence[i], whose pages are
    page_tables[sequence[i]] (int32 page ids in position order; the pages of every position up
    to the token's exist, and earlier positions hold their K/V). Tokens of one sequence come in
    position order. The step writes, for each j, the output of token outputs[j] into out[j]:
    its logits (n_vocab floats), or with `hidden` its final-normed hidden state (n_embd).
    """

    tokens: np.ndarray  # int32 (n,)
    positions: np.ndarray  # int32 (n,)
    sequence: np.ndarray  # int32 (n,)
    page_tables: list[np.ndarray]
    outputs: np.ndarray  # int32 (n_out,): batch indices
    out: np.ndarray  # float32 (n_out, n_vocab or n_embd)
    hidden: bool = False


class Executor(Protocol):
    """A model bound to a backend: its pages and its forward step."""

    storage: PageStorage
    kernels: str  # the kernel set the step runs (snapshots record it)
    max_tokens: int  # the most tokens one step takes

    def step(self, batch: Batch) -> None:
        """Runs one forward step (the module docstring says what it must guarantee)."""

    def close(self) -> None:
        """Frees what the executor holds; it runs no step after."""


class Backend(Protocol):
    """A way to run models. `name` is what `llamay.load(..., backend=NAME)` takes."""

    name: str
    determinism: str

    def bind(
        self,
        spec: ModelSpec,
        layout: KVLayout,
        n_pages: int,
        *,
        threads: int,
        max_tokens: int,
        kernels: str | None,
    ) -> Executor:
        """An executor for the model in `spec` with n_pages KV pages of `layout`, running
        steps of up to max_tokens tokens on `threads` threads with the kernel set `kernels`
        ("best", a set the backend names, or None: the backend's default)."""
