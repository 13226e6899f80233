"""The benchmarks `tox -e bench` runs: `llamay bench`, peak memory against the file's size, then
llamay against llama.cpp side by side when llama-cpp-python is installed (speed, and a
teacher-forced logits check).

    python bench/run.py [--model gemma3:270m] [--threads 1,2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _python(*args: str) -> None:
    print("$ python", *args, flush=True)
    subprocess.run([sys.executable, *args], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3:270m", help="MODEL: a .gguf path or store name")
    parser.add_argument("--threads", default=None, help="comma-separated thread counts")
    parser.add_argument("--repeat", default="3", help="timed runs per figure")
    args = parser.parse_args()
    threads = ["--threads", args.threads] if args.threads else []

    _python("-m", "llamay.cli", "bench", args.model, *threads, "--repeat", args.repeat)
    _python(str(HERE / "bench_memory.py"), "--model", args.model, "--repeat", args.repeat)
    if importlib.util.find_spec("llama_cpp") is None:
        print("llama-cpp-python is not installed: no side-by-side comparison", flush=True)
        return
    compare = str(HERE / "compare_llama_cpp.py")
    _python(compare, "--model", args.model, *threads, "--repeat", args.repeat)
    _python(compare, "--model", args.model, *threads, "--logits", "128")


if __name__ == "__main__":
    main()
