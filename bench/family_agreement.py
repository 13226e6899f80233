"""llamay against llama.cpp on the synthetic models of tests/data/families, as a table.

For each model and type: the mean KL(llama.cpp || llamay) over llama.cpp's top 32 tokens (the
rest lumped into one), teacher-forced along 160 tokens; llama.cpp's own variation on the same
file (with flash attention, and token by token on one thread); the largest difference in the
log-probability of llama.cpp's top token; and how often the argmax agrees (everywhere, and where
llama.cpp's top token leads by at least 0.5 nats). docs/models.md shows its output.

    python bench/family_agreement.py [--backend cpu] [--threads 2] [NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

import llamay
from llamay.backends.reference.forward import log_softmax

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers import families


def measure(name: str, backend: str = "cpu", threads: int = 2) -> dict:
    """llamay against llama.cpp's reference on the family file `name` (e.g. "granite-Q8_0"):
    mean coarse KL, the largest |Δ log p| of llama.cpp's top token, argmax agreement over all
    positions and over the clear ones (llama.cpp's top token ahead by 0.5 nats), and how many
    those are."""
    with tempfile.TemporaryDirectory() as tmp:
        path = families.model_file(name, Path(tmp))
        model = llamay.load(path, threads=threads, backend=backend)
        with model.context() as ctx:
            lp = log_softmax(ctx.feed(families.tokens(), all_logits=True).astype(np.float64))
        model.close()
    ids, ref = families.reference(name)
    kl = families.coarse_kl(ids, ref, lp)
    top1 = np.abs(np.take_along_axis(lp, ids[:, :1], axis=1)[:, 0] - ref[:, 0])
    agree = lp.argmax(axis=1) == ids[:, 0]
    clear = families.clear_argmax(ref, 0.5)
    return {
        "kl": float(f"{kl.mean():.6g}"),
        "max_top1_delta": float(f"{top1.max():.6g}"),
        "agree_all": round(float(agree.mean()), 6),
        "agree_clear": round(float(agree[clear].mean()), 6),
        "clear": int(clear.sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=families.entries())
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(
        "| model | type | mean KL | llama.cpp vs itself (FA / token by token) "
        "| max Δ log p(top 1) | argmax agrees (all / clear) |"
    )
    print("|---|---|---|---|---|---|")
    for name in args.names:
        entry = families.index()["files"][name]
        m = measure(name, args.backend, args.threads)
        print(
            f"| {entry['model']} | {entry['type']} | {m['kl']:.2g} "
            f"| {entry['self_kl_flash_attn']:.2g} / {entry['self_kl_token_by_token']:.2g} "
            f"| {m['max_top1_delta']:.2g} | {m['agree_all']:.1%} / {m['agree_clear']:.0%} "
            f"({m['clear']}) |"
        )


if __name__ == "__main__":
    main()
