"""Time and peak memory of `llamay quantize` against llama.cpp's quantizer on the same file.

Each engine runs in a process of its own under GNU time (`/usr/bin/time`: wall seconds and
the process's peak resident set), the engines in turn, `--repeat` times; the outputs are
checked to be the same bytes. llama.cpp is llama_model_quantize through llama-cpp-python (the
`bench` extra), as llama-quantize calls it, on as many threads as llamay.

    python bench/bench_quantize.py [--model llama-1b:F16] [--type Q4_K_M] [--threads N]
                                   [--repeat 2] [--json]

MODEL is a bench/models.py shape (SHAPE:F16 is written once, cached) or a path or store name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from llamay.gguf.quantize import default_threads, file_type
from llamay.store import resolve_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import resolve as resolve_shape

LLAMAY = Path(sys.executable).parent / "llamay"
TIME = "/usr/bin/time"
LLAMA_CPP_SCRIPT = """
import ctypes, sys
import llama_cpp
source, out, ftype, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = ftype
params.nthread = threads
sys.exit(llama_cpp.llama_model_quantize(source.encode(), out.encode(), ctypes.byref(params)))
"""


def timed(command: list[str]) -> tuple[float, int]:
    """(wall seconds, peak resident bytes) of `command`, run under GNU time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        done = subprocess.run(
            [TIME, "-f", "%e %M", "-o", report.name, *command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
        seconds, kib = report.read().split()[-2:]
    return float(seconds), int(kib) * 1024


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-1b:F16")
    parser.add_argument("--type", default="Q4_K_M")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not os.path.exists(TIME):
        raise SystemExit(f"{TIME} (GNU time) is needed to measure peak memory")
    source = resolve_model(resolve_shape(args.model))
    ftype = file_type(args.type)
    runs: dict[str, list[tuple[float, int]]] = {"llamay": [], "llama.cpp": []}
    digests = {}
    with tempfile.TemporaryDirectory(dir=source.parent) as tmp:
        out = {engine: Path(tmp) / f"{engine}.gguf" for engine in runs}
        commands = {
            "llamay": [str(LLAMAY), "quantize", str(source), str(out["llamay"]), ftype.name,
                       "--threads", str(args.threads)],
            "llama.cpp": [sys.executable, "-c", LLAMA_CPP_SCRIPT, str(source),
                          str(out["llama.cpp"]), str(ftype.id), str(args.threads)],
        }  # fmt: skip
        for _ in range(args.repeat):
            for engine, command in commands.items():
                runs[engine].append(timed(command))
                digests[engine] = sha256(out[engine])
                out[engine].unlink()
    rows = [
        {
            "engine": engine,
            "seconds": statistics.median(s for s, _ in measured),
            "peak_bytes": max(b for _, b in measured),
            "sha256": digests[engine],
        }
        for engine, measured in runs.items()
    ]
    if args.json:
        print(json.dumps(rows))
        return
    size = source.stat().st_size
    print(f"{source.name} ({size / 2**30:.2f} GiB) -> {ftype.name}, {args.threads} threads")
    for row in rows:
        print(
            f"{row['engine']:>9}  {row['seconds']:7.1f} s  peak {row['peak_bytes'] / 2**20:8.0f} MiB"
        )
    same = len({row["sha256"] for row in rows}) == 1
    print("outputs: the same bytes" if same else "outputs DIFFER")


if __name__ == "__main__":
    main()
