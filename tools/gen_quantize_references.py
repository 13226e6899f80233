"""Writes tests/data/quantize: what llama.cpp's llama-quantize writes for small synthetic models
at every type `llamay quantize` writes, with and without importance matrices;
tests/gguf/test_quantize_reference.py holds llamay's files to it byte for byte.

    python tools/gen_quantize_references.py --bin DIR

DIR holds llama.cpp's llama-quantize and llama-imatrix, built from the llama.cpp that
llama-cpp-python (the `bench` extra) vendors, so that the reference is the library the other
references of tests/data were made with:

    pip install --config-settings=build-dir=/tmp/lcp-build 'llama-cpp-python==0.3.36'
    cmake /tmp/lcp-build -DLLAMA_BUILD_TOOLS=ON
    cmake --build /tmp/lcp-build --target llama-quantize llama-imatrix   # DIR: /tmp/lcp-build/bin

No model file is committed. Each model is a recipe: the arguments of
llamay.models.synthetic.write_model (seeded), its weights F16 (or BF16, F32), and the sha256 of
the file it writes. Each result records llama-quantize's command (type, importance matrix) and
what it wrote: the file's sha256, and each tensor's type and the sha256 of its bytes (its
first 16 hex digits). The importance matrices are committed: llama-imatrix's, run on the start
of tests/data/texts/gpl-3.txt, in its GGUF form and converted by it to the legacy `.dat` form.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from llamay import gguf
from llamay.models import synthetic

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "quantize"
VOCAB_FILE = ROOT / "tests" / "data" / "synth" / "llama2-spm-Q8_0.gguf"
TEXT = ROOT / "tests" / "data" / "texts" / "gpl-3.txt"

# name: (architecture, weights, write_model options)
MODELS = {
    # eight layers: the mixes' per-layer choices; four query heads per KV head: Q2_K's attn_v
    "llama": ("llama", "F16", {"n_embd": 256, "n_ff": 512, "n_layer": 8, "n_head": 4,
                               "n_head_kv": 1, "head_dim": 64, "context_length": 256}),
    # rows of 192, not a multiple of 256, and of 80, not even of 32: every fallback type,
    # F16 among them; tied embeddings
    "narrow": ("llama", "F16", {"n_embd": 192, "n_ff": 80, "n_layer": 2, "n_head": 3,
                                "n_head_kv": 3, "head_dim": 64, "context_length": 256,
                                "output": False}),
    # eight experts, which llama.cpp's mixes single out
    "moe": ("qwen3moe", "F16", {"n_embd": 256, "n_ff": 256, "n_ff_exp": 256, "n_layer": 2,
                                "n_head": 4, "n_head_kv": 2, "head_dim": 64,
                                "context_length": 256, "n_expert": 8, "n_expert_used": 2,
                                "output": False}),
    "llama-bf16": ("llama", "BF16", {"n_embd": 256, "n_ff": 256, "n_layer": 2, "n_head": 4,
                                     "n_head_kv": 2, "head_dim": 64, "context_length": 256}),
    "llama-f32": ("llama", "F32", {"n_embd": 256, "n_ff": 256, "n_layer": 2, "n_head": 4,
                                   "n_head_kv": 2, "head_dim": 64, "context_length": 256}),
}  # fmt: skip
SEED = 7
ALL = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
       "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "F16", "BF16", "F32"]  # fmt: skip
WEIGHTED = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q2_K_S", "Q3_K_S", "Q3_K_M", "Q4_K_S",
            "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K"]  # fmt: skip
# (model, types, importance matrix: None, "gguf" or "dat")
RUNS = [
    ("llama", ALL, None),
    ("llama", WEIGHTED, "gguf"),
    ("llama", ["Q2_K", "Q3_K_M", "Q4_0", "Q4_K_M", "Q5_1", "Q6_K"], "dat"),
    ("narrow", ALL, None),
    ("narrow", ["Q4_K_M", "Q5_0", "Q3_K_S"], "gguf"),
    ("moe", ["MXFP4_MOE", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q8_0", "F16"], None),
    ("moe", ["Q2_K_S", "Q4_K_M", "Q6_K"], "gguf"),
    ("llama-bf16", ["Q4_K_M", "Q8_0", "F16", "BF16", "F32"], None),
    ("llama-f32", ["Q4_K_M", "Q6_K", "Q8_0", "F16", "BF16"], None),
]


def vocabulary() -> dict:
    metadata = gguf.read(VOCAB_FILE).metadata
    return {k: v for k, v in metadata.items() if k.startswith("tokenizer.")}


def write_model(name: str, path: Path) -> dict:
    arch, weights, options = MODELS[name]
    synthetic.write_model(path, arch, vocabulary(), weight_type=weights, seed=SEED, **options)
    return {"arch": arch, "seed": SEED, "weight_type": weights, **options}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tensors_of(path: Path) -> dict[str, str]:
    """Each tensor's type and the sha256 of its bytes (16 hex digits), in file order."""
    return {
        name: f"{t.type} {hashlib.sha256(t.data.tobytes()).hexdigest()[:16]}"
        for name, t in gguf.read(path).tensors.items()
    }


def run(command: list, cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, command))} failed:\n{done.stderr[-4000:]}")


def make_imatrix(bin_dir: Path, model: Path, name: str) -> None:
    """llama-imatrix on the text's first chunks, in both forms, into OUT."""
    gguf_path = OUT / f"imatrix-{name}.gguf"
    run([bin_dir / "llama-imatrix", "-m", model, "-f", TEXT, "-o", gguf_path.name, "-c", "128",
         "--chunks", "4", "-t", "2", "--no-ppl"], OUT)  # fmt: skip
    run([bin_dir / "llama-imatrix", "-m", model, "--in-file", gguf_path.name,
         "-o", f"imatrix-{name}.dat", "--output-format", "dat"], OUT)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, required=True, help="llama.cpp's tools")
    args = parser.parse_args()
    quantizer = args.bin / "llama-quantize"
    if not quantizer.is_file():
        sys.exit(f"no llama-quantize in {args.bin}: see this script's docstring")
    OUT.mkdir(parents=True, exist_ok=True)
    reference: dict = {"models": {}, "results": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in MODELS:
            path = work / f"{name}.gguf"
            recipe = write_model(name, path)
            reference["models"][name] = {"recipe": recipe, "sha256": sha256(path)}
        for name in ("llama", "narrow", "moe"):
            if any(model == name and form for model, _, form in RUNS):
                make_imatrix(args.bin, work / f"{name}.gguf", name)
        for model, types, form in RUNS:
            for type_name in types:
                out = work / "out.gguf"
                # run from OUT, with the importance matrix's bare name: llama-quantize records
                # the name it was given (quantize.imatrix.file), and the test gives the same
                command = [quantizer]
                if form is not None:
                    command += ["--imatrix", f"imatrix-{model}.{form}"]
                run([*command, work / f"{model}.gguf", out, type_name, "2"], OUT)
                reference["results"].append(
                    {
                        "model": model,
                        "type": type_name,
                        "imatrix": None if form is None else f"imatrix-{model}.{form}",
                        "sha256": sha256(out),
                        "tensors": tensors_of(out),
                    }
                )
                out.unlink()
                print(model, type_name, form or "", file=sys.stderr)
    # one line per result: the file stays readable, and small
    lines = ",\n".join(json.dumps(result) for result in reference["results"])
    models = json.dumps(reference["models"], indent=1)
    text = f'{{"models": {models},\n"results": [\n{lines}\n]}}\n'
    (OUT / "reference.json").write_text(text)


if __name__ == "__main__":
    main()
