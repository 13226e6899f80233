"""A model reads its token table from the file a row per token, with pread: a step maps no page
of the file (rows touched through the mapping would stay resident, tens of MB of a 128k
vocabulary's table over a long prompt beside its packed copy, and each fault maps the 64 KiB
around it)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import llamay
from llamay import gguf
from llamay.errors import ModelFormatError
from llamay.models import synthetic

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/smaps")

N_VOCAB = 16000


def resident_bytes(path: Path) -> int:
    """Resident bytes of this process's mappings of path."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", fields[0]):  # a mapping's header
            inside = len(fields) >= 6 and fields[5] == str(path)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


@pytest.mark.parametrize(
    ("weight_type", "untied"), [("Q4_K", False), ("Q8_0", False), ("Q4_K", True)]
)
def test_a_long_prompt_leaves_the_token_table_out_of_memory(tmp_path, weight_type, untied):
    vocab = synthetic.vocabulary([f"▁w{i}" for i in range(N_VOCAB)], byte_fallback=True)
    path = synthetic.write_model(
        tmp_path / "m.gguf",
        "llama",
        vocab,
        n_embd=256,
        n_ff=256,
        n_layer=1,
        n_head=4,
        n_head_kv=2,
        head_dim=64,
        context_length=4096,
        weight_type=weight_type,
        output=untied,
    ).resolve()
    model = llamay.load(path, n_ctx=4096, threads=1)
    table = model.file.tensors["token_embd.weight"]
    assert table.nbytes > 2_000_000
    ctx = model.context()
    before = resident_bytes(path)
    tokens = np.random.default_rng(0).permutation(model.n_vocab)[:4000]
    ctx.feed([int(t) for t in tokens])  # every page of the table read many times over
    assert resident_bytes(path) == before
    model.close()


def test_a_file_replaced_while_loading_is_refused(tmp_path):
    """The engine reopens the file by its path to read the table: a different file there now
    (another inode, size or time) is refused, not read as if it were the one parsed."""
    vocab = synthetic.vocabulary([f"▁w{i}" for i in range(64)], byte_fallback=True)
    shape = dict(n_embd=64, n_ff=64, n_layer=1, n_head=2, n_head_kv=1, head_dim=32)
    path = tmp_path / "m.gguf"
    synthetic.write_model(path, "llama", vocab, **shape, context_length=64, output=True)
    span = gguf.read(path).tensors["token_embd.weight"].span
    os.close(span.open())  # the file as parsed
    path.rename(tmp_path / "old.gguf")
    synthetic.write_model(path, "llama", vocab, **shape, context_length=64, output=True, seed=1)
    with pytest.raises(ModelFormatError, match="changed while the model was loading"):
        span.open()
