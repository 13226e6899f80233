"""Build the Cython + OpenMP core.

Metadata lives in pyproject.toml and setup.cfg; this file only describes the compiled extensions,
because their flags depend on the machine that builds them.

- Default: `-march=native`, so the kernels use every instruction the build machine has.
- `LLAMAY_PORTABLE=1`: baseline x86-64 (or the compiler's default elsewhere); scalar kernels.

Whatever was compiled in is recorded in the small `_cpu` module, which is itself built without
`-march` so that it can always run and refuse, with a clear message, a CPU that lacks it.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import find_packages, setup
from setuptools.extension import Extension

CORE = "llamay/_core"
CSRC = f"{CORE}/csrc"

# Determinism: no fast-math, no contraction of a*b+c into FMA behind our back (FMAs we want are
# written as intrinsics), and OpenMP for the one parallel region per forward step.
BASE_FLAGS = ["-O3", "-fno-fast-math", "-ffp-contract=off", "-fno-math-errno", "-std=gnu11"]
OPENMP = ["-fopenmp"]

# The instruction-set features the kernels may use, as the compiler's predefined macro and the
# name __builtin_cpu_supports knows.
FEATURES = {
    "__SSE4_2__": "sse4.2",
    "__AVX__": "avx",
    "__AVX2__": "avx2",
    "__FMA__": "fma",
    "__F16C__": "f16c",
    "__BMI2__": "bmi2",
    "__AVX512F__": "avx512f",
    "__AVX512BW__": "avx512bw",
    "__AVX512DQ__": "avx512dq",
    "__AVX512VL__": "avx512vl",
    "__AVX512VNNI__": "avx512vnni",
    "__AVX512BF16__": "avx512bf16",
    "__AVXVNNI__": "avxvnni",
}


# The C sources of each layer of kernels; an extension lists the layers it calls. Every layer
# has one file per kernel set, chosen at run time (csrc/kernel_set.h); the ggml types they
# handle are listed once, in csrc/ggml_types.h.
QUANTS = ["quants.c", "dequantize.c", "quantize.c"]
MATMUL = ["matmul.c", "matmul_ref.c", "matmul_avx2.c", "matmul_avx512.c"]
KERNELS = ["kernels_ref.c", "kernels_avx2.c", "kernels_avx512.c", "rope.c"]
FORWARD = ["forward.c", "weights.c"]


def portable() -> bool:
    return os.environ.get("LLAMAY_PORTABLE", "") not in ("", "0", "false", "no")


def arch_flags() -> list[str]:
    if portable():
        return []
    return ["-march=native"]


def compiled_features(flags: list[str]) -> list[str]:
    """The features the compiler enables under `flags`, read from its predefined macros."""
    cc = os.environ.get("CC", "cc").split()
    try:
        out = subprocess.run(
            [*cc, *flags, "-dM", "-E", "-"],
            input="",
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"error: cannot query the C compiler ({' '.join(cc)}): {exc}")
    macros = set(re.findall(r"#define (\w+) ", out))
    return [name for macro, name in FEATURES.items() if macro in macros]


def extensions() -> list[Extension]:
    march = arch_flags()
    needed = compiled_features(march)
    feature_defines = [("LLAMAY_NEED_" + name.replace(".", "_").upper(), "1") for name in needed]
    include = [CSRC, np.get_include()]
    numpy_macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]

    # Any header change rebuilds every kernel: setuptools does not scan #includes.
    headers = sorted(glob.glob(f"{CSRC}/*.h")) + sorted(glob.glob(f"{CORE}/*.pxd"))

    def kernel(name: str, sources: list[str]) -> Extension:
        return Extension(
            f"llamay._core.{name}",
            [f"{CORE}/{name}.pyx", *(f"{CSRC}/{s}" for s in sources)],
            depends=headers,
            include_dirs=include,
            define_macros=numpy_macros,
            extra_compile_args=BASE_FLAGS + OPENMP + march,
            extra_link_args=OPENMP,
        )

    return [
        # Built without -march: it must run on any CPU to say what is missing.
        Extension(
            "llamay._core._cpu",
            [f"{CORE}/_cpu.pyx"],
            include_dirs=include,
            define_macros=[*feature_defines, ("LLAMAY_BUILD_FLAGS", f'"{" ".join(march)}"')],
            extra_compile_args=BASE_FLAGS,
        ),
        kernel("quants", QUANTS),
        kernel("pages", []),
        kernel("tokenize", []),
        kernel("grammar", ["grammar.c"]),
        kernel("matmul", MATMUL + QUANTS),
        kernel("kernels", KERNELS),
        kernel("engine", FORWARD + KERNELS + MATMUL + QUANTS),
    ]


setup(
    # The CLI lives in cli/ at the top level and installs as llamay.cli.
    packages=[*find_packages(include=["llamay", "llamay.*"]), "llamay.cli"],
    package_dir={"llamay.cli": "cli"},
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
