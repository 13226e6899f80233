"""Peak memory of a model in use, against the size of its file: the weights stay mapped (only the
packed copies some kernels read are made, and the file pages they come from are dropped), and
scratch buffers and KV pages are small beside them. The target is under 1.5 times the file.

Measured in a fresh process (its VmHWM, not ru_maxrss, which keeps a forking parent's size
across exec) that loads the model with a context of --ctx-size positions (the model's default
without it), feeds --prompt tokens of text (repeated where it is shorter) and decodes 16. A
benchmark, not a test: other work on the machine moves the figure by a few percent, and the
target is a goal (1.2x for the 1B shape with a 4,096-token context).
`--engine llama.cpp` measures llama.cpp the same way (llama-cpp-python, the `bench` extra: its
defaults, an F16 KV cache of --ctx-size positions, the file mapped), for scale.

    python bench/bench_memory.py [--model gemma3:270m] [--ctx-size N] [--prompt 512]
                                 [--kv-type f16] [--target 1.5] [--repeat 3]
                                 [--engine llamay|llama.cpp]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from llamay.errors import LlamayError
from llamay.state.layout import KV_TYPES
from llamay.store import resolve_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve as resolve_shape

TEXT = Path(__file__).parent.parent / "tests" / "data" / "texts" / "gpl-3.txt"
DECODED = 16

# the script's last line: the process's peak resident bytes
PRINT_PEAK = """
import re
print(int(re.search(r"VmHWM:\\s*(\\d+) kB", open("/proc/self/status").read())[1]) * 1024)
"""

RSS_SCRIPT = """
import sys
import numpy as np
import llamay
path, text, kv_type = sys.argv[1:4]
n_ctx, n_prompt, n_decode = map(int, sys.argv[4:])
model = llamay.load(path, n_ctx=n_ctx or None, kv_type=kv_type or None)
ids = model.tokenize(open(text).read())
ctx = model.context()
ctx.feed((ids * (n_prompt // len(ids) + 1))[:n_prompt])
for _ in range(n_decode):
    ctx.feed([int(np.argmax(ctx.logits()))])
"""

# The same run through llama.cpp: its tokenizer, one eval of the prompt, then greedy tokens.
LLAMA_CPP_SCRIPT = """
import sys
import numpy as np
import llama_cpp
path, text, kv_type = sys.argv[1:4]
n_ctx, n_prompt, n_decode = map(int, sys.argv[4:])
model = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, verbose=False)
ids = model.tokenize(open(text, "rb").read())
model.eval((ids * (n_prompt // len(ids) + 1))[:n_prompt])
for _ in range(n_decode):  # the last token's row: Llama.scores holds none without logits_all
    last = llama_cpp.llama_get_logits_ith(model.ctx, -1)
    model.eval([int(np.argmax(np.ctypeslib.as_array(last, shape=(model.n_vocab(),))))])
"""
SCRIPTS = {"llamay": RSS_SCRIPT + PRINT_PEAK, "llama.cpp": LLAMA_CPP_SCRIPT + PRINT_PEAK}


def peak_bytes(path: Path, n_ctx: int, n_prompt: int, kv_type: str, engine: str = "llamay") -> int:
    """Peak resident bytes of a process that runs the model on `engine` (n_ctx 0: the model's
    default; kv_type "": the model's default KV type)."""
    args = [str(path), str(TEXT), kv_type, str(n_ctx), str(n_prompt), str(DECODED)]
    with tempfile.TemporaryDirectory() as cwd:  # `python -c` imports from its working folder
        out = subprocess.run(
            [sys.executable, "-c", SCRIPTS[engine], *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            check=True,
        )
    return int(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", default="gemma3:270m", help="MODEL: a .gguf path, a store name or SHAPE:TYPE"
    )
    parser.add_argument("--ctx-size", type=int, default=0, help="context positions (0: default)")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens fed")
    parser.add_argument(
        "--kv-type", default="", choices=["", *(t.lower() for t in KV_TYPES)], help="KV cache type"
    )
    parser.add_argument("--target", type=float, default=1.5, help="peak / file size aimed at")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    parser.add_argument("--engine", default="llamay", choices=sorted(SCRIPTS), help="who runs it")
    args = parser.parse_args()
    if args.engine == "llama.cpp":
        if args.kv_type or not args.ctx_size:
            parser.error("--engine llama.cpp runs its F16 cache and needs --ctx-size")
        if importlib.util.find_spec("llama_cpp") is None:
            parser.error("llama-cpp-python is not installed: pip install llama-cpp-python")
    if args.ctx_size and args.prompt + DECODED > args.ctx_size:
        parser.error(f"--prompt and {DECODED} decoded tokens do not fit in --ctx-size")
    try:
        path = resolve_model(resolve_shape(args.model))
    except LlamayError as e:
        parser.error(str(e))
    size = path.stat().st_size
    peak = statistics.median(
        peak_bytes(path, args.ctx_size, args.prompt, args.kv_type, args.engine)
        for _ in range(args.repeat)
    )
    ratio = peak / size
    verdict = "within" if ratio <= args.target else "OVER"
    context = f" on {args.engine}" if args.engine != "llamay" else ""
    context += f", {args.ctx_size}-token context" if args.ctx_size else ""
    context += f", {args.kv_type} KV" if args.kv_type else ""
    print(
        f"{path.name}{context}, {args.prompt} prompt tokens: peak {peak / 1e6:.0f} MB for a "
        f"{size / 1e6:.0f} MB file: {ratio:.2f}x ({verdict} the {args.target}x target)"
    )


if __name__ == "__main__":
    main()
