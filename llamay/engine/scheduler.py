"""Continuous batching: every running generation of a model advances in one forward step.

One thread per model runs the loop. Each step it lets every generation whose fed tokens are all
evaluated decide its next move (sample a token, or finish), then feeds, in one
`Model.forward_batch`, one token to every decoding sequence and prompt chunks to the sequences
still prefilling, within a token budget. Generations join whenever they are submitted and leave
when they finish; a cancelled one leaves, and its pages are freed, at the start of the next step.

Batching changes no result: forward_batch gives each sequence the logits it would have alone
(the engine's batch invariance), and sampling is keyed by (seed, sequence, position), not by
when or beside what a token was drawn.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from llamay.engine.draft import propose as propose_drafts
from llamay.engine.generate import Generation
from llamay.errors import ContextOverflow, LlamayError
from llamay.state import Context

# Tokens per step beyond the decoding sequences' one each: room for prompt chunks, which are
# cut so that a long prompt does not stall everyone else's next token for long.
PREFILL_BUDGET = 256


class Stepper(Protocol):
    """What the scheduler needs of its model."""

    path: Path

    def forward_batch(
        self,
        items: Sequence[tuple[Context, Sequence[int]]],
        want_logits: str | Sequence[str] = "last",
    ) -> list[np.ndarray | None] | None: ...


class Scheduler:
    """Runs a model's generations; `submit` from any thread."""

    def __init__(self, model: Stepper, prefill_budget: int = PREFILL_BUDGET) -> None:
        self._model = model
        self.prefill_budget = prefill_budget
        self._wakeup = threading.Condition()
        self._running: list[Generation] = []
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, generation: Generation) -> None:
        # before taking the scheduler's lock: adopting waits for the KV cache's lock, which a
        # running step holds
        generation.adopt_prefix()
        with self._wakeup:
            if self._closed:
                raise LlamayError("the model is closed: load it again to generate")
            self._running.append(generation)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name=f"llamay-scheduler-{self._model.path.name}", daemon=True
                )
                self._thread.start()
            self._wakeup.notify()

    def wake(self) -> None:
        """Runs a step soon (a generation was cancelled). Never blocks: signal handlers call it."""
        if self._wakeup.acquire(blocking=False):
            try:
                self._wakeup.notify()
            finally:
                self._wakeup.release()

    def close(self) -> None:
        """Stops the loop; generations still running end with an error."""
        with self._wakeup:
            self._closed = True
            self._wakeup.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def n_running(self) -> int:
        """Generations submitted and not yet finished."""
        return sum(not g.done for g in list(self._running))

    def _loop(self) -> None:
        while True:
            with self._wakeup:
                while not self._closed and not self._running:
                    self._wakeup.wait()
                if self._closed:
                    running, self._running = self._running, []
                    for generation in running:
                        generation.fail(LlamayError("the model was closed while generating"))
                    return
                running = list(self._running)
            try:
                self._step(running)
            except Exception as error:  # delivered to the callers, never lost
                for generation in running:
                    if not generation.done:
                        generation.fail(error)
            with self._wakeup:
                self._running = [g for g in self._running if not g.done]
            # Hold no finished generation while idle: its context closes when its caller lets
            # go of it, and its pages must not wait for the next request.
            del running

    def _step(self, running: list[Generation]) -> None:
        for generation in running:
            if generation.done:
                continue
            # A cancelled generation's own context goes at once; a caller's context first takes
            # the token already yielded, so that it holds everything the caller saw.
            if generation.cancelled and (generation.owns_context or not generation.pending):
                generation.finish("cancelled")
            elif not generation.pending:
                try:
                    generation.advance()
                except Exception as error:  # this sequence's own failure, not its neighbours'
                    generation.fail(error)
        self._draft(running)
        feeding = [g for g in running if g.pending and not g.done]
        if not feeding:
            return
        decoding = [g for g in feeding if g.decoding]
        prefilling = [g for g in feeding if not g.decoding]
        plan = [(g, len(g.pending)) for g in decoding]  # a sampled token, and any draft
        budget = self.prefill_budget
        for generation in prefilling:  # in the order they came
            if budget <= 0:
                break
            n = min(len(generation.pending), budget)
            plan.append((generation, n))
            budget -= n
        self._feed(plan)

    @staticmethod
    def _draft(running: list[Generation]) -> None:
        """The draft models' proposals for the generations that want one, a draft model's
        proposals batched together (draft.py)."""
        by_draft: dict[int, list[tuple[Generation, tuple]]] = {}
        for generation in running:
            request = None if generation.done else generation.draft_request()
            if request is not None:
                by_draft.setdefault(id(request[0].model), []).append((generation, request))
        for asks in by_draft.values():
            drafts = propose_drafts([request for _, request in asks])
            for (generation, _), draft in zip(asks, drafts, strict=True):
                generation.take_draft(draft)

    def _feed(self, plan: list[tuple[Generation, int]]) -> None:
        items = [(g.context, g.pending[:n]) for g, n in plan]
        modes = ["all" if g.drafting else "last" for g, _ in plan]
        try:
            outputs = self._model.forward_batch(items, modes)
        except ContextOverflow:
            # The KV pages ran out for the batch (forward_batch changed nothing): go one by one,
            # so that only the sequences that do not fit fail.
            for (generation, n), item, mode in zip(plan, items, modes, strict=True):
                if generation.drafting:  # room for the sampled token alone, at least
                    generation.drop_draft()
                    n, item, mode = 1, (item[0], item[1][:1]), "last"
                try:
                    (output,) = self._model.forward_batch([item], [mode])
                except ContextOverflow as error:
                    generation.fail(error)
                    continue
                self._fed(generation, n, output)
            return
        for (generation, n), output in zip(plan, outputs, strict=True):
            self._fed(generation, n, output)

    @staticmethod
    def _fed(generation: Generation, n: int, output: object) -> None:
        if generation.drafting:
            generation.verify(output)
        else:
            generation.consume(n)
