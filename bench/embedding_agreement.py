"""llamay against llama.cpp on the synthetic encoders of tests/data/embeddings, as a table.

For each model and type: the lowest and the mean cosine between llamay's pooled vector and
llama.cpp's over six texts (a reranker: the largest difference of its scores), beside
llama.cpp against itself (all texts in one batch on one thread). docs/models.md shows its
output.

    python bench/embedding_agreement.py [--backend cpu] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

import llamay

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers import embeddings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(
        "| model | type | pooling | min / mean cosine (rank: max Δ score) | llama.cpp vs itself |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in embeddings.entries():
            entry = embeddings.index()["files"][name]
            path = embeddings.model_file(name, Path(tmp))
            ref = embeddings.reference(name)
            with llamay.load(path, threads=args.threads, backend=args.backend) as model:
                ids = [model.tokenize(t) for t in embeddings.texts()]
                if model.is_reranker:
                    scores = model.rerank_ids(ids)
                    diff = max(abs(s - float(r[0])) for s, r in zip(scores, ref, strict=True))
                    ours = f"{diff:.2g}"
                    theirs = f"{entry['self_max_abs_diff']:.2g}"
                else:
                    vectors = model.embed_many(ids, normalize=False)
                    cos = [embeddings.cosine(a, b) for a, b in zip(vectors, ref, strict=True)]
                    ours = f"{min(cos):.7f} / {np.mean(cos):.7f}"
                    theirs = f"{entry['self_min_cosine']:.9f}"
                print(
                    f"| {entry['model']} | {entry['type']} | {model.pooling} | {ours} | {theirs} |"
                )


if __name__ == "__main__":
    main()
