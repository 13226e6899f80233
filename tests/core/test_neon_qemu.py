"""The NEON kernel set gives the reference's bits, checked on aarch64 code run under qemu.

tests/core/neon/harness.c compares, bit for bit on random inputs from fixed seeds, the NEON set
against the reference: vec16.h's operations, norms, activations, soft-caps, log-sum-exp,
attention (whole and span by span), and every matmul type at the token and row counts that
take each of its paths. It is built from the core's C files as setup.py builds them for
aarch64 (the sources of its SYSTEM, QUANTS, MATMUL and KERNELS lists, each file with its kernel
set's flags), once with the cross gcc and once with clang where clang finds the aarch64
sysroot, and run on two emulated CPUs: one with the dot product instructions (`-cpu max`: both
builds of the matmul kernels are checked, and the set must choose the dotprod one) and one
without (`-cpu cortex-a53`: the set must choose the plain one). Builds are cached by the hash
of what goes into them. The test skips, saying what is missing, where there is no aarch64
cross compiler or no qemu-aarch64 (apt: gcc-aarch64-linux-gnu libc6-dev-arm64-cross
qemu-user-static clang).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "llamay" / "_core" / "csrc"
HARNESS = Path(__file__).resolve().parent / "neon"
CPUS = {"max": 1, "cortex-a53": 0}  # emulated CPU -> whether it has the dot product
# the types with NEON kernels (ggml_types.h's neon column)
NEON_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4"]
NEON_TYPES += ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"]


def setup_py_build() -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The core's C files (the SYSTEM, QUANTS, MATMUL and KERNELS lists), the base flags, and
    aarch64's kernel sets with their flags, read from setup.py without running it."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    lists: dict[str, list[str]] = {}
    sets: dict[str, list[str]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name):
            name = target.id
            if name == "KERNEL_SETS" and isinstance(node.value, ast.Dict):
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "aarch64":
                        sets = ast.literal_eval(value)
            elif isinstance(node.value, ast.List):
                lists[name] = ast.literal_eval(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            lists[node.target.id] = lists.get(node.target.id, []) + ast.literal_eval(node.value)
    sources = [s for key in ("SYSTEM", "QUANTS", "MATMUL", "KERNELS") for s in lists[key]]
    assert sources and sets, "setup.py's source lists or aarch64 kernel sets not found"
    return sources, lists["BASE_FLAGS"] + lists["THREADS"], sets


def compilers() -> dict[str, list[str]]:
    """The aarch64 C compilers here: the cross gcc, and clang where it builds and links a
    static aarch64 program against the cross sysroot."""
    found: dict[str, list[str]] = {}
    if shutil.which("aarch64-linux-gnu-gcc"):
        found["gcc"] = ["aarch64-linux-gnu-gcc"]
    if shutil.which("clang") and "gcc" in found:
        clang = ["clang", "--target=aarch64-linux-gnu"]
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp) / "probe.c"
            probe.write_text("#include <arm_neon.h>\nint main(void) { return 0; }\n")
            done = subprocess.run(
                [*clang, "-static", str(probe), "-o", str(Path(tmp) / "probe")],
                capture_output=True,
            )
        if done.returncode == 0:
            found["clang"] = clang
    return found


def qemu() -> str | None:
    return shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")


COMPILERS = compilers()


def build(cc: list[str], out_dir: Path) -> Path:
    """The harness, built with cc into out_dir (reused where its inputs are unchanged)."""
    sources, base_flags, sets = setup_py_build()
    groups = {name: flags for name, flags in sets.items()}
    defines = [f"-DLLAMAY_WITH_{name.upper()}=1" for name in groups]
    common = [*base_flags, *defines, f"-I{CSRC}", f"-I{HARNESS}"]

    def flags_of(source: str) -> list[str]:
        match = re.search(r"_([a-z0-9]+)\.c$", source)
        return groups.get(match.group(1), []) if match else []

    units = [(CSRC / s, flags_of(s), s.removesuffix(".c")) for s in sources]
    units += [
        (HARNESS / "vec_ops.c", ["-DLLAMAY_VEC=LLAMAY_VEC_REF", "-DVEC_NAME=ref"], "vec_ref"),
        (HARNESS / "vec_ops.c", ["-DLLAMAY_VEC=LLAMAY_VEC_NEON", "-DVEC_NAME=neon"], "vec_neon"),
        (HARNESS / "harness.c", [], "harness"),
    ]
    digest = hashlib.sha256(repr((cc, common, [(str(u), f) for u, f, _ in units])).encode())
    for path in sorted(CSRC.glob("*.[ch]")) + sorted(HARNESS.glob("*.[ch]")):
        digest.update(path.name.encode() + path.read_bytes())
    binary = out_dir / f"harness-{digest.hexdigest()[:16]}"
    if binary.exists():
        return binary
    for stale in out_dir.glob("harness-*"):
        stale.unlink()
    objects = out_dir / f"objects-{os.getpid()}"
    objects.mkdir(parents=True, exist_ok=True)

    def compile_unit(unit: tuple[Path, list[str], str]) -> subprocess.CompletedProcess:
        source, flags, name = unit
        command = [*cc, *common, *flags, "-c", str(source), "-o", str(objects / f"{name}.o")]
        return subprocess.run(command, capture_output=True, text=True)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for done in pool.map(compile_unit, units):
            assert done.returncode == 0, " ".join(done.args) + "\n" + done.stderr
    partial = binary.with_suffix(".partial")
    link = [*cc, "-static", "-pthread", *map(str, sorted(objects.glob("*.o"))), "-lm"]
    done = subprocess.run([*link, "-o", str(partial)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    partial.rename(binary)
    shutil.rmtree(objects)
    return binary


@pytest.fixture(scope="module", params=sorted(COMPILERS) or ["none"])
def harness(request, tmp_path_factory) -> Path:
    if request.param == "none":
        pytest.skip("no aarch64 cross compiler (apt: gcc-aarch64-linux-gnu libc6-dev-arm64-cross)")
    if qemu() is None:
        pytest.skip("no qemu-aarch64 to run aarch64 code (apt: qemu-user-static)")
    # kept between runs in pytest's cache where it has one (not under -p no:cacheprovider)
    name = f"neon-harness-{request.param}"
    cache = getattr(request.config, "cache", None)
    out_dir = cache.mkdir(name) if cache is not None else tmp_path_factory.mktemp(name)
    return build(COMPILERS[request.param], Path(out_dir))


@pytest.mark.parametrize("cpu", sorted(CPUS))
def test_neon_set_gives_the_reference_bits(harness, cpu):
    done = subprocess.run(
        [qemu(), "-cpu", cpu, str(harness)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    lines = done.stdout.splitlines()
    # the emulated CPU decided the path: with the dot product, both builds were checked and
    # the set chose the dotprod one (the harness fails otherwise); without, the plain one
    assert lines[0] == f"dotprod {CPUS[cpu]}", report
    builds = "plain and dotprod builds" if CPUS[cpu] else "plain build"
    for name in NEON_TYPES:
        assert any(line.startswith(f"matmul {name} ok") and builds in line for line in lines), name
    for group in ["vec16", "norms, activations, softcap, logsumexp", "attention"]:
        assert f"{group} ok" in lines, report
    assert lines[-1].startswith("ok: ") and lines[-1].endswith(" 0 mismatches"), report
