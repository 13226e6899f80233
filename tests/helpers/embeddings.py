"""The synthetic encoders of tests/data/embeddings and llama.cpp's vectors on them
(tools/gen_embedding_references.py writes them).

As for the decoder families (helpers/families.py), no model file is stored: each is written
again from its recipe and checked against the sha256 of the file llama.cpp ran.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

import numpy as np

from llamay.models import synthetic

EMBEDDINGS = Path(__file__).resolve().parents[1] / "data" / "embeddings"


@cache
def index() -> dict:
    return json.loads((EMBEDDINGS / "reference.json").read_text())


def entries() -> list[str]:
    return sorted(index()["files"])


def texts() -> list[str]:
    return list(index()["texts"])


def write_f16(recipe: dict, path: Path) -> Path:
    options = dict(recipe)
    arch = options.pop("arch")
    vocab = synthetic.wordpiece_vocabulary(index()["pieces"])
    return synthetic.write_model(path, arch, vocab, **options)


def model_file(name: str, directory: Path) -> Path:
    """The model file of reference `name` (e.g. "bert-mean-Q8_0"), written into directory and
    checked against the file llama.cpp ran."""
    entry = index()["files"][name]
    path = write_f16(entry["write_model"], directory / f"{entry['model']}-F16.gguf")
    if entry["type"] != "F16":
        types = {n: t for t, names in entry["tensor_types"].items() for n in names}
        path = synthetic.requantize(path, directory / f"{name}.gguf", entry["type"], types)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == entry["sha256"], f"{name}: the file written again is not the one llama.cpp ran"
    return path


def reference(name: str) -> list[np.ndarray]:
    """llama.cpp's vector of each text (a reranker's: its one score)."""
    data = np.load(EMBEDDINGS / f"{name}.npz")
    return [data[f"arr_{i}"] for i in range(len(data.files))]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
