"""Two builds of llamay side by side, for bench/ab.py: a build's matmul module loaded beside
another's, a process run with a build's llamay, and two trees' attention kernels compiled into
one probe.

A build is a directory holding a built `llamay` package: a checkout built in place
(`python setup.py build_ext --inplace`) or a site-packages. The attention probe compiles the C
sources themselves, so there a build may also be a git revision of this repository.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CSRC = Path("llamay") / "_core" / "csrc"
BUILD_IN_PLACE = "build it in place: python setup.py build_ext --inplace"


def require_built(build: Path, module: str) -> Path:
    """The compiled llamay/_core/MODULE under build; exits with a one-line reason without it."""
    found = sorted((build / "llamay" / "_core").glob(f"{module}.*.so"))
    if not found:
        sys.exit(f"{build}: no built llamay/_core/{module} module ({BUILD_IN_PLACE})")
    return found[0]


def matmul_module(build: Path) -> ModuleType:
    """build's matmul extension, loaded beside any other build's."""
    spec = importlib.util.spec_from_file_location(
        "llamay._core.matmul", require_built(build, "matmul")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_measure(build: Path, mode: str, options: dict) -> dict:
    """engine_runs.py's report of MODE, run in a process of its own with build's llamay first
    on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(build))
    command = [sys.executable, str(BENCH / "engine_runs.py"), mode, json.dumps(options)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{build}: the {mode} run failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compile_flags() -> list[str]:
    """setup.py's BASE_FLAGS, as it writes them, for this machine (-march=native)."""
    found = re.search(r"^BASE_FLAGS = (\[.*\])$", (ROOT / "setup.py").read_text(), re.MULTILINE)
    if found is None:
        sys.exit("no BASE_FLAGS in setup.py")
    return [*ast.literal_eval(found[1]), "-march=native"]


def kernel_sources(build: str, into: Path) -> Path:
    """A copy of build's llamay/_core/csrc under into: from a directory, or from a git revision
    of this repository."""
    into.mkdir(parents=True)
    if Path(build).is_dir():
        source = Path(build) / CSRC
        if not (source / "kernels.c").is_file():
            sys.exit(f"{build}: no {CSRC}/kernels.c (a checkout of llamay's sources)")
        for path in source.iterdir():
            if path.is_file():
                (into / path.name).write_bytes(path.read_bytes())
        return into
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", build, str(CSRC)], capture_output=True, check=False
    )
    if archive.returncode != 0:
        sys.exit(f"{build}: neither a directory nor a git revision of {ROOT}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                (into / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    return into


def attention_probe(a: str, b: str, kernel_set: str, work: Path) -> Path:
    """probes/attention_ab.c linked with build a's kernels of kernel_set as kern_A and build b's
    as kern_B; the harness itself is compiled against this tree's headers, so both builds must
    lay out KV pages as this tree's csrc/pages.h does."""
    flags = compile_flags()
    objects = []
    for side, build in (("A", a), ("B", b)):
        sources = kernel_sources(build, work / side)
        # the set compiled in (setup.py defines LLAMAY_WITH_SET where the compiler takes it),
        # under a name of its own
        (sources / "build.c").write_text(
            f"#define LLAMAY_WITH_{kernel_set.upper()} 1\n"
            f"#define llamay_kernels_{kernel_set} kern_{side}\n"
            f'#include "kernels_{kernel_set}.c"\n'
        )
        objects.append(work / f"{side}.o")
        compile_c([*flags, f"-I{sources}", "-c", str(sources / "build.c"), "-o", str(objects[-1])])
    program = work / "attention_ab"
    probe = BENCH / "probes" / "attention_ab.c"
    compile_c(
        [*flags, f"-I{ROOT / CSRC}", str(probe), *map(str, objects), "-o", str(program), "-lm"]
    )
    return program


def compile_c(args: list[str]) -> None:
    """cc ARGS; exits with the compiler's message where it fails."""
    done = subprocess.run(["cc", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"cc failed:\n{done.stderr.strip()}")
