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
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            entry = families.index()["files"][name]
            path = families.model_file(name, Path(tmp))
            model = llamay.load(path, threads=args.threads, backend=args.backend)
            with model.context() as ctx:
                lp = log_softmax(ctx.feed(families.tokens(), all_logits=True).astype(np.float64))
            model.close()
            ids, ref = families.reference(name)
            kl = families.coarse_kl(ids, ref, lp)
            top1 = np.abs(np.take_along_axis(lp, ids[:, :1], axis=1)[:, 0] - ref[:, 0])
            agree = lp.argmax(axis=1) == ids[:, 0]
            clear = families.clear_argmax(ref, 0.5)
            print(
                f"| {entry['model']} | {entry['type']} | {kl.mean():.2g} "
                f"| {entry['self_kl_flash_attn']:.2g} / {entry['self_kl_token_by_token']:.2g} "
                f"| {top1.max():.2g} | {agree.mean():.1%} / {agree[clear].mean():.0%} "
                f"({clear.sum()}) |"
            )
            path.unlink()


if __name__ == "__main__":
    main()
