"""Ending a generation from a request thread, safely for the context it runs in."""

from __future__ import annotations

import contextlib
from typing import Any

from llamay.errors import LlamayError


def stop(generation: Any) -> None:
    """Cancel `generation` if it is still running, and wait until the scheduler has let go of
    its context: only then may the context be closed, saved or continued by another request.
    (A cancel alone takes effect at the scheduler's next step.)"""
    if generation.finish_reason is None:
        generation.cancel()
        with contextlib.suppress(LlamayError):
            for _ in generation.pieces():
                pass
