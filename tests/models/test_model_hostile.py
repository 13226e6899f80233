"""A GGUF file is untrusted (a model pulled from anywhere, or uploaded to the server): hostile
hyperparameters are refused at load with a ModelFormatError (or UnsupportedModel) naming what
is wrong, never an IndexError, a ZeroDivisionError or a huge allocation, and a file that loads
runs a forward step.

Bounded for CI; `LLAMAY_FUZZ_EXAMPLES` raises the count (`tox -e fuzz`).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llamay
from llamay import gguf
from llamay.errors import LlamayError, ModelFormatError

from helpers.tiny import write_tiny

EXAMPLES = int(os.environ.get("LLAMAY_FUZZ_EXAMPLES", "60"))


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The tiny llama model's metadata and tensors, to rewrite with hostile values."""
    path = write_tiny(tmp_path_factory.mktemp("hostile") / "tiny.gguf", "llama", n_layer=2)
    gg = gguf.read(path)
    metadata = dict(gg.metadata)
    tensors = {name: t.dequantize().reshape(t.shape[::-1]) for name, t in gg.tensors.items()}
    return metadata, tensors


def rewritten(tmp_path, base, **changes):
    metadata, tensors = base
    metadata = {**metadata, **changes}
    metadata = {k: v for k, v in metadata.items() if v is not None}
    return gguf.write(tmp_path / "hostile.gguf", metadata, tensors)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("llama.block_count", 0, "block_count = 0"),
        ("llama.block_count", 2**40, "block_count"),
        ("llama.attention.head_count", 0, "head_count = 0"),
        ("llama.attention.head_count_kv", 0, "head_count_kv = 0"),
        ("llama.attention.key_length", 0, "key_length = 0"),
        ("llama.attention.value_length", -3, "value_length"),
        ("llama.embedding_length", 0, "embedding_length = 0"),
        ("llama.context_length", 0, "context_length = 0"),
        ("llama.rope.freq_base", 0.0, "freq_base"),
        ("llama.rope.freq_base", float("nan"), "freq_base"),
        ("llama.attention.layer_norm_rms_epsilon", float("inf"), "epsilon"),
        ("llama.block_count", "three", "not an integer"),
        ("llama.attention.head_count", [4, 4, 4], "3 entries for 2 layers"),
        ("llama.rope.scaling.factor", -2.0, "factor"),
        ("general.architecture", 7, "not a name"),
    ],
)
def test_hostile_hyperparameters_are_a_model_format_error(tmp_path, base, key, value, fragment):
    path = rewritten(tmp_path, base, **{key: value})
    with pytest.raises(LlamayError, match=fragment):
        llamay.load(path)


def test_a_vocabulary_shorter_than_the_embedding_is_refused(tmp_path, base):
    tokens = base[0]["tokenizer.ggml.tokens"]
    short = {
        "tokenizer.ggml.tokens": tokens[:-8],
        "tokenizer.ggml.scores": np.zeros(len(tokens) - 8, np.float32),
        "tokenizer.ggml.token_type": np.ones(len(tokens) - 8, np.int32),
    }
    with pytest.raises(ModelFormatError, match="tokens but the embedding has"):
        llamay.load(rewritten(tmp_path, base, **short))


HOSTILE_VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 2, 3, 2**31, 2**63 - 1, 0.0, -0.5, 1e30, float("nan")]),
    st.sampled_from([float("inf"), "", "x", True, [1, 2], [0, 0], ["a"], -(2**62)]),
)
KEYS = [
    "llama.block_count",
    "llama.embedding_length",
    "llama.context_length",
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.attention.key_length",
    "llama.attention.value_length",
    "llama.attention.layer_norm_rms_epsilon",
    "llama.rope.dimension_count",
    "llama.rope.freq_base",
    "llama.rope.scaling.type",
    "llama.rope.scaling.factor",
    "llama.rope.scaling.attn_factor",
    "llama.rope.scaling.original_context_length",
    "llama.attention.sliding_window",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.model",
]


@pytest.mark.fuzz
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(changes=st.dictionaries(st.sampled_from(KEYS), HOSTILE_VALUES, min_size=1, max_size=3))
def test_any_hostile_metadata_loads_and_runs_or_is_refused(tmp_path, base, changes):
    path = rewritten(tmp_path, base, **changes)
    try:
        model = llamay.load(path, n_ctx=32)
    except LlamayError:
        return
    with model:
        ctx = model.context()
        ctx.feed(model.tokenize("a b"))
        assert ctx.logits().shape == (model.n_vocab,)
        ctx.close()
