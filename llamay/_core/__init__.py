"""The compiled core: every hot loop, in Cython and C.

One build carries every kernel set of its architecture and picks, at load, the best one this
CPU runs (`_cpu`), so importing it never meets an instruction the CPU lacks.
"""

from __future__ import annotations

try:
    from llamay._core import _cpu  # noqa: F401 - the smallest extension: is the core built?
except ImportError as exc:  # pragma: no cover - a broken install
    raise ImportError(
        "llamay's compiled core is missing; reinstall with `pip install .` from the source tree"
    ) from exc
