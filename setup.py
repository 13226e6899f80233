"""Build the Cython + C core.

Metadata lives in pyproject.toml and setup.cfg; this file only describes the compiled extensions.

One build runs on every CPU of its architecture. It carries every kernel set of the
architecture (csrc/kernel_set.h): the plain C reference everywhere, AVX2 and AVX-512 on
x86-64, NEON on aarch64. A set's files (`*_avx2.c`, `*_avx512.c`, `*_neon.c`) are compiled with
that set's target flags, every other file for the architecture's baseline, and the library
chooses at load the best set the CPU has (and, inside the NEON set, whether to run the build of
its matmul kernels with the dot product instructions, `*_dotprod.c`). No OpenMP: the core has
its own threads (threads.h), so any C11 compiler with POSIX threads builds it, gcc or clang.
"""

from __future__ import annotations

import glob
import os
import platform
import re
import subprocess
import sys
import sysconfig
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.extension import Extension

CORE = "llamay/_core"
CSRC = f"{CORE}/csrc"

# Determinism: no fast-math, no contraction of a*b+c into FMA behind our back (FMAs we want are
# written as intrinsics).
BASE_FLAGS = ["-O3", "-fno-fast-math", "-ffp-contract=off", "-fno-math-errno", "-std=gnu11"]
THREADS = ["-pthread"]

# Each architecture's kernel sets and their target flags; a file named *_SET.c is compiled with
# SET's flags (its name's suffix), and the set is compiled in (LLAMAY_WITH_SET) where the
# compiler takes them. `dotprod` is not a set of its own: the NEON set's matmul kernels built
# with the dot product instructions, which the set runs where the CPU has them (matmul_neon.c).
KERNEL_SETS: dict[str, dict[str, list[str]]] = {
    "x86_64": {
        "avx2": ["-mavx2", "-mfma", "-mf16c"],
        "avx512": [
            *("-mavx2", "-mfma", "-mf16c"),
            *("-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx512vnni"),
        ],
    },
    # Advanced SIMD is part of every AArch64 CPU: the baseline flags target it already. The dot
    # product instructions (ARMv8.2's DotProd) are an extension some CPUs lack.
    "aarch64": {"neon": [], "dotprod": ["-march=armv8.2-a+dotprod"]},
}


# The C sources of each layer of kernels; an extension lists the layers it calls. Every layer
# has one file per kernel set, chosen at run time (csrc/kernel_set.h); the ggml types they
# handle are listed once, in csrc/ggml_types.h.
SYSTEM = ["cpu.c", "threads.c"]
QUANTS = ["quants.c", "dequantize.c", "quantize.c", "dequantize_avx2.c", "quantize_avx2.c"]
MATMUL = ["matmul.c", "matmul_ref.c", "matmul_avx2.c", "matmul_avx512.c", "matmul_neon.c"]
MATMUL += ["matmul_neon_dotprod.c"]
KERNELS = ["kernels.c", "kernels_ref.c", "kernels_avx2.c", "kernels_avx512.c", "kernels_neon.c"]
KERNELS += ["rope.c"]
FORWARD = ["forward.c", "weights.c"]


def target_arch() -> str:
    """The architecture the extensions are built for: the interpreter's platform (which a
    cross build sets through _PYTHON_HOST_PLATFORM), in the kernel sets' spelling."""
    machine = sysconfig.get_platform().rsplit("-", 1)[-1] or platform.machine()
    if machine == "universal2":
        sys.exit("error: build llamay for one architecture at a time (ARCHFLAGS='-arch arm64')")
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())


def compiler_takes(flags: list[str]) -> bool:
    """Whether the C compiler compiles a file with `flags` (an old one may lack AVX-512 VNNI)."""
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as f:
            f.write("int main(void) { return 0; }\n")
        try:
            done = subprocess.run(
                [*cc, *flags, "-c", source, "-o", os.path.join(tmp, "probe.o")],
                capture_output=True,
            )
        except OSError as exc:
            sys.exit(f"error: cannot run the C compiler ({' '.join(cc)}): {exc}")
    return done.returncode == 0


def kernel_sets() -> dict[str, list[str]]:
    """This build's kernel sets (the architecture's that the compiler takes) and their flags."""
    arch = target_arch()
    sets = {}
    for name, flags in KERNEL_SETS.get(arch, {}).items():
        if compiler_takes(flags):
            sets[name] = flags
        else:
            print(
                f"warning: the C compiler takes no {' '.join(flags)}: no {name} kernels",
                file=sys.stderr,
            )
    return sets


SETS = kernel_sets()


def set_of(source: str) -> str | None:
    """The kernel set whose flags compile `source` (named *_SET.c), or None for the baseline."""
    match = re.search(r"_([a-z0-9]+)\.c$", source)
    return match.group(1) if match and match.group(1) in SETS else None


class BuildKernelSets(build_ext):
    """build_ext that compiles each kernel set's files with that set's flags: setuptools gives
    an extension one set of flags for all its sources."""

    def build_extension(self, ext: Extension) -> None:
        own = [s for s in ext.sources if set_of(s) is None]
        objects = []
        for name, flags in SETS.items():
            sources = [s for s in ext.sources if set_of(s) == name]
            if sources:
                objects += self.compiler.compile(
                    sources,
                    # an extension's own folder: the same file compiles for several extensions
                    output_dir=os.path.join(self.build_temp, ext.name),
                    macros=ext.define_macros,
                    include_dirs=ext.include_dirs,
                    debug=self.debug,
                    extra_postargs=ext.extra_compile_args + flags,
                    depends=ext.depends,
                )
        ext.sources = own
        ext.extra_objects = [*(ext.extra_objects or []), *objects]
        super().build_extension(ext)


def extensions() -> list[Extension]:
    include = [CSRC, np.get_include()]
    macros = [
        ("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
        *((f"LLAMAY_WITH_{name.upper()}", "1") for name in SETS),
    ]
    # Any header change rebuilds every kernel: setuptools does not scan #includes.
    headers = sorted(glob.glob(f"{CSRC}/*.h")) + sorted(glob.glob(f"{CORE}/*.pxd"))

    def extension(name: str, sources: list[str]) -> Extension:
        return Extension(
            f"llamay._core.{name}",
            [f"{CORE}/{name}.pyx", *(f"{CSRC}/{s}" for s in sources)],
            depends=headers,
            include_dirs=include,
            define_macros=macros,
            extra_compile_args=BASE_FLAGS + THREADS,
            extra_link_args=THREADS,
        )

    return [
        extension("_cpu", SYSTEM),
        extension("quants", QUANTS + SYSTEM),
        extension("pages", []),
        extension("tokenize", []),
        extension("grammar", ["grammar.c"]),
        extension("matmul", MATMUL + QUANTS + SYSTEM),
        extension("kernels", KERNELS + SYSTEM),
        extension("engine", FORWARD + KERNELS + MATMUL + QUANTS + SYSTEM),
    ]


setup(
    # The CLI lives in cli/ at the top level and installs as llamay.cli.
    packages=[*find_packages(include=["llamay", "llamay.*"]), "llamay.cli"],
    package_dir={"llamay.cli": "cli"},
    cmdclass={"build_ext": BuildKernelSets},
    ext_modules=cythonize(
        extensions(),
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)
