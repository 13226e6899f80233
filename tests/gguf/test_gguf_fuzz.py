"""Fuzzing the reader: truncated and bit-flipped files never crash or hang, they are refused.

Bounded for CI (a few hundred examples); `LLAMAY_FUZZ_EXAMPLES` raises the count for a longer run.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay import gguf
from llamay.errors import LlamayError, ModelFormatError

EXAMPLES = int(os.environ.get("LLAMAY_FUZZ_EXAMPLES", "300"))
SYNTH = Path(__file__).parent.parent / "data" / "synth" / "qwen2-Q8_0.gguf"


def seed_files(tmp: Path) -> list[bytes]:
    rng = np.random.default_rng(1)
    metadata = {
        "general.architecture": "llama",
        "tokenizer.ggml.tokens": ["<s>", "</s>", "▁a", "b"],
        "tokenizer.ggml.scores": np.zeros(4, np.float32),
        "nested": [[1, 2], ["x"]],
        "f": 1.5,
    }
    tensors = {
        "a": rng.standard_normal((2, 32)).astype(np.float32),
        "b": ("Q8_0", rng.standard_normal((2, 32)).astype(np.float32)),
    }
    seeds = [gguf.write(tmp / "seed.gguf", metadata, tensors).read_bytes()]
    if SYNTH.exists():
        # A real vocabulary and tensor table; the tensor data beyond the header is not needed.
        real = gguf.read(SYNTH)
        seeds.append(SYNTH.read_bytes()[: real.data_offset + 4096])
    return seeds


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[bytes]:
    return seed_files(tmp_path_factory.mktemp("fuzz"))


def check(raw: bytes, tmp: Path) -> None:
    path = tmp / "fuzzed.gguf"
    path.write_bytes(raw)
    try:
        gg = gguf.read(path)
    except ModelFormatError as exc:
        assert "at byte" in str(exc) or "empty file" in str(exc)
        return
    # Whatever parses must be usable: every tensor view lies inside the file.
    for t in gg.tensors.values():
        assert gg.data_offset + t.offset + t.nbytes <= len(raw)
        with contextlib.suppress(LlamayError):  # e.g. a flipped type id naming a refused format
            t.dequantize()


fuzz_settings = settings(
    max_examples=EXAMPLES,
    deadline=2000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


@pytest.mark.fuzz
@fuzz_settings
@given(data=st.data())
def test_truncations(seeds, tmp_path, data):
    raw = data.draw(st.sampled_from(seeds))
    cut = data.draw(st.integers(0, len(raw) - 1))
    check(raw[:cut], tmp_path)


@pytest.mark.fuzz
@fuzz_settings
@given(data=st.data())
def test_byte_flips(seeds, tmp_path, data):
    raw = bytearray(data.draw(st.sampled_from(seeds)))
    # Most of a file is tensor data; aim the flips at the header, where the parser is.
    header_end = min(len(raw), 4096)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, header_end - 1))
        raw[at] = data.draw(st.integers(0, 255))
    check(bytes(raw), tmp_path)
