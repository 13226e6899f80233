"""Backends: the ways llamay runs a model, behind one small protocol (base.py).

- `cpu`: the Cython + C kernels (llamay._core), the default;
- `reference`: NumPy in float64, written after llama.cpp's graphs; slow, plain, the spec the
  CPU backend is tested against, and a second backend for the seam's own tests.
"""

from __future__ import annotations

from llamay.backends.base import Backend, Batch, Executor
from llamay.backends.cpu import CpuBackend
from llamay.backends.reference import ReferenceBackend

BACKENDS: dict[str, Backend] = {b.name: b for b in (CpuBackend(), ReferenceBackend())}


def backend(name: str) -> Backend:
    """The backend called `name`; ValueError naming the known ones otherwise."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; llamay has: {', '.join(BACKENDS)}")
    return BACKENDS[name]


__all__ = ["BACKENDS", "Backend", "Batch", "Executor", "backend"]
