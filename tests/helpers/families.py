"""The synthetic models of tests/data/families and llama.cpp's references on them.

No model file is stored: each is written again from its recipe (synthetic.write_model, then
synthetic.requantize with the per-tensor types llama-quantize chose, which gives its bytes; see
tools/gen_family_references.py) and checked against the sha256 llama.cpp's reference was
computed on. The references are llama.cpp's top-K tokens and log-probabilities at each
position of a text; `coarse_kl` compares a distribution with them.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

import numpy as np

from llamay import gguf
from llamay.models import synthetic

DATA = Path(__file__).resolve().parents[1] / "data"
FAMILIES = DATA / "families"
VOCAB_FILE = DATA / "synth" / "llama2-spm-Q8_0.gguf"


@cache
def index() -> dict:
    return json.loads((FAMILIES / "reference.json").read_text())


def entries() -> list[str]:
    return sorted(index()["files"])


@cache
def _vocabulary() -> dict:
    metadata = gguf.read(VOCAB_FILE).metadata
    return {k: v for k, v in metadata.items() if k.startswith("tokenizer.")}


def write_f16(recipe: dict, path: Path) -> Path:
    options = dict(recipe)
    arch, options["weight_type"] = options.pop("arch"), options["weight_type"]
    return synthetic.write_model(path, arch, _vocabulary(), **options)


def model_file(name: str, directory: Path) -> Path:
    """The model file of reference `name` (e.g. "qwen3moe-Q4_K_M"), written into directory and
    checked against the file llama.cpp ran."""
    entry = index()["files"][name]
    f16 = write_f16(entry["write_model"], directory / f"{entry['model']}-F16.gguf")
    path = f16
    if entry["type"] != "F16":
        types = {n: t for t, names in entry["tensor_types"].items() for n in names}
        path = synthetic.requantize(f16, directory / f"{name}.gguf", entry["type"], types)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == entry["sha256"], f"{name}: the file written again is not the one llama.cpp ran"
    return path


def reference(name: str) -> tuple[np.ndarray, np.ndarray]:
    """llama.cpp's top-K token ids (n_positions, K) and their log-probabilities."""
    data = np.load(FAMILIES / f"{name}.npz")
    return data["ids"].astype(np.int64), data["logprobs"].astype(np.float64)


def tokens() -> list[int]:
    return list(index()["tokens"])


def coarse_kl(ids: np.ndarray, ref: np.ndarray, logprobs: np.ndarray) -> np.ndarray:
    """KL(llama.cpp || other) at each position over llama.cpp's top-K tokens, with the rest of
    each distribution lumped into one outcome (a coarsening, so never more than the full KL)."""
    p = np.exp(ref)
    q = np.exp(np.take_along_axis(logprobs, ids, axis=1))
    p_tail = np.clip(1.0 - p.sum(axis=1), 1e-30, None)
    q_tail = np.clip(1.0 - q.sum(axis=1), 1e-30, None)
    return (p * (ref - np.log(q))).sum(axis=1) + p_tail * (np.log(p_tail) - np.log(q_tail))


def clear_argmax(ref: np.ndarray, margin: float) -> np.ndarray:
    """Positions where llama.cpp's top token leads its second by at least `margin` nats."""
    return ref[:, 0] - ref[:, 1] >= margin
