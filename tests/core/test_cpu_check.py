"""The compiled-in CPU features are checked at import: a clear error, never SIGILL."""

from __future__ import annotations

import pytest

from llamay import _core
from llamay._core import _cpu
from llamay.errors import UnsupportedCPU


def test_this_cpu_runs_what_was_built():
    assert _cpu.missing_features() == []


def test_missing_features_are_named_with_the_fix():
    with pytest.raises(UnsupportedCPU) as info:
        _core.check_cpu(["avx512f", "avx512vnni"], "-march=native")
    message = str(info.value)
    assert "avx512f, avx512vnni" in message
    assert "-march=native" in message
    assert "LLAMAY_PORTABLE=1" in message


def test_build_flags_are_recorded():
    flags = _cpu.build_flags()
    assert flags in ("", "-march=native")
