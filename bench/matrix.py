"""The correctness matrix: llamay against llama.cpp, model by model, from measurements.

Every model file of tests/data (the seven tests/data/synth models, Gemma 3 270M, the 28 files of
tests/data/families) and every shape of bench/models.py gets a row: agreement with llama.cpp
(perplexity ratio, teacher-forced log-probability deltas, KL), `llamay verify`, and speed
ratios. llama.cpp's side is read from the references in tests/data (or measured, for speed and
the bench shapes, through llama-cpp-python); llamay's side is measured here. Each measurement is
kept in bench/matrix.json with the command, machine, date and llamay commit that produced it,
and the sha256 of the test data it was computed from. docs/matrix.md is rendered from that file
and from tests/data, never typed.

    python bench/matrix.py                       # measure what this machine can, write both files
    python bench/matrix.py --only synth,gemma    # some parts: synth gemma gemma-ppl families
                                                 #   verify speed shapes (shapes: speed, logits,
                                                 #   verify on bench/models.py; real: the same and
                                                 #   perplexity on bench/real_models.py's cached
                                                 #   models; both need llama-cpp-python)
    python bench/matrix.py --check               # CI: recompute the cheap parts, compare; exit 1
                                                 #   if docs/matrix.md is not what the data gives

`--check` recomputes llamay's perplexity on the synth models and its teacher-forced agreement on
Gemma (seconds), checks that every recorded measurement was computed from the test data as it is
now (sha256), and that docs/matrix.md is exactly the page those give. Slow measurements (family
KL, verify, speed) are not recomputed there: they carry their command, machine and date.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

import llamay
from llamay.backends.reference.forward import log_softmax
from llamay.engine.perplexity import perplexity
from llamay.verify import run_checks

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
from family_agreement import measure as family_measure  # noqa: E402

from helpers import families  # noqa: E402

DATA = ROOT / "tests" / "data"
SYNTH = DATA / "synth"
GEMMA_JSON = DATA / "gemma3-270m-q4_k_m.json"
RECORD = ROOT / "bench" / "matrix.json"
PAGE = ROOT / "docs" / "matrix.md"
THREADS = 2
PARTS = ("synth", "gemma", "gemma-ppl", "families", "verify", "speed", "shapes", "real")
CHEAP = ("synth", "gemma")  # recomputed by --check
SPEED_ARGS = {"n_prompt": 512, "n_gen": 64, "repeat": 3}
SHAPE_LOGITS = 64  # tokens teacher-forced through both engines on a bench shape
REAL_LOGITS = 512  # ... and on a real model of bench/real_models.py


# --- where and from what -------------------------------------------------------------------------


def machine() -> str:
    """This machine in one line: CPU, cores, the SIMD sets llamay's kernels use, memory."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    simd = "AVX-512 VNNI" if "avx512_vnni" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {simd}, {memory:.0f} GiB"


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def sha256(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def synth_reference() -> dict:
    return json.loads((SYNTH / "reference.json").read_text())


def gemma_reference() -> dict:
    return json.loads(GEMMA_JSON.read_text())


def stamp(command: str, inputs: str, value: dict) -> dict:
    return {
        "value": value,
        "command": command,
        "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "commit": commit(),
        "load": f"{os.getloadavg()[0]:.1f}",  # a shared machine's speed depends on it
        "inputs": inputs,
    }


# --- the measurements: each returns {key: stamped measurement} -----------------------------------


def measure_synth() -> dict:
    """llamay's perplexity on each synth model, as llama-perplexity ran it (reference.json)."""
    out = {}
    for entry in synth_reference()["files"]:
        expected = entry["perplexity"]
        path = SYNTH / entry["file"]
        text = DATA / "texts" / expected["text"]
        model = llamay.load(path, threads=THREADS, n_ctx=expected["n_ctx"])
        tokens = model.tokenize(text.read_text(encoding="utf-8"), special=False)
        ppl, chunks, scored = perplexity(model, tokens, n_ctx=expected["n_ctx"])
        model.close()
        command = (
            f"llamay perplexity tests/data/synth/FILE -f tests/data/texts/{expected['text']} "
            f"-c {expected['n_ctx']} -b {expected['n_ctx']}"
        )
        out[f"synth/{entry['model']}/ppl"] = stamp(
            command,
            sha256(path, text, SYNTH / "reference.json"),
            {"ppl": round(ppl, 4), "chunks": chunks, "tokens": scored},
        )
    return out


def gemma_model(n_ctx: int = 2048) -> llamay.engine.Model:
    return llamay.load("gemma3:270m", threads=THREADS, n_ctx=n_ctx)


def measure_gemma() -> dict:
    """Teacher-forced along llama.cpp's six greedy outputs: llamay's log-probability of
    llama.cpp's top-1 token at each of the 192 steps, and the argmax where llama.cpp's leads."""
    reference = gemma_reference()
    model = gemma_model()
    deltas, agree, clear = [], 0, 0
    for case in reference["greedy"]:
        with model.context() as ctx:
            ids = case["prompt_ids"] + case["output_ids"]
            logprobs = log_softmax(np.asarray(ctx.feed(ids, all_logits=True), np.float64))
        for i, step in enumerate(case["steps"]):
            row = logprobs[len(case["prompt_ids"]) - 1 + i]
            (top1, top1_logprob), (_, top2_logprob) = step["top"][:2]
            deltas.append(abs(row[top1] - top1_logprob))
            if top1_logprob - top2_logprob >= 0.5:
                clear += 1
                agree += int(row.argmax() == top1)
    model.close()
    value = {
        "steps": len(deltas),
        "mean_abs_delta": round(float(np.mean(deltas)), 4),
        "max_abs_delta": round(float(np.max(deltas)), 4),
        "clear_steps": clear,
        "clear_agree": agree,
    }
    return {
        "gemma/teacher-forced": stamp(
            "python bench/matrix.py --only gemma", sha256(GEMMA_JSON), value
        )
    }


def measure_gemma_ppl() -> dict:
    expected = gemma_reference()["perplexity"][0]
    text = DATA / "texts" / expected["text"]
    model = gemma_model(expected["n_ctx"])
    tokens = model.tokenize(text.read_text(encoding="utf-8"), special=False)
    ppl, chunks, scored = perplexity(model, tokens, n_ctx=expected["n_ctx"])
    model.close()
    command = f"llamay perplexity gemma3:270m -f tests/data/texts/{expected['text']} -c {expected['n_ctx']}"
    value = {"ppl": round(ppl, 4), "chunks": chunks, "tokens": scored}
    return {"gemma/ppl": stamp(command, sha256(GEMMA_JSON, text), value)}


def family_inputs(name: str) -> str:
    return sha256(families.FAMILIES / "reference.json", families.FAMILIES / f"{name}.npz")


def measure_families() -> dict:
    out = {}
    for name in families.entries():
        value = family_measure(name, backend="cpu", threads=THREADS)
        out[f"families/{name}"] = stamp(
            f"python bench/family_agreement.py --threads {THREADS}",
            family_inputs(name),
            value,
        )
    return out


def verify_value(model: str) -> dict:
    checks = list(run_checks(model))
    return {
        "passed": sum(c.passed for c in checks),
        "checks": len(checks),
        "failed": [c.name for c in checks if not c.passed],
    }


def measure_verify() -> dict:
    out = {}
    for entry in synth_reference()["files"]:
        path = SYNTH / entry["file"]
        out[f"verify/synth/{entry['model']}"] = stamp(
            "llamay verify tests/data/synth/FILE", sha256(path), verify_value(str(path))
        )
    out["verify/gemma"] = stamp(
        "llamay verify gemma3:270m", sha256(GEMMA_JSON), verify_value("gemma3:270m")
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name in families.entries():
            path = families.model_file(name, Path(tmp))
            out[f"verify/families/{name}"] = stamp(
                "llamay verify FILE (FILE: tests/helpers/families.py model_file(NAME), NAME the row's)",
                family_inputs(name),
                verify_value(str(path)),
            )
            path.unlink()
    return out


def speed_value(model: str, threads: int) -> dict:
    from compare_llama_cpp import compare_speed

    return compare_speed(model, threads, **SPEED_ARGS)


def speed_command(model: str, threads: int) -> str:
    return (
        f"python bench/compare_llama_cpp.py --model {model} --threads {threads} "
        f"-p {SPEED_ARGS['n_prompt']} -n {SPEED_ARGS['n_gen']} --repeat {SPEED_ARGS['repeat']}"
    )


def measure_speed() -> dict:
    out = {}
    for threads in (1, 2):
        out[f"speed/gemma/{threads}"] = stamp(
            speed_command("gemma3:270m", threads),
            sha256(GEMMA_JSON),
            speed_value("gemma3:270m", threads),
        )
    for entry in synth_reference()["files"]:
        path = SYNTH / entry["file"]
        out[f"speed/synth/{entry['model']}/1"] = stamp(
            speed_command("tests/data/synth/FILE", 1), sha256(path), speed_value(str(path), 1)
        )
    return out


def measure_shapes() -> dict:
    from compare_llama_cpp import DEFAULT_TEXT, compare_logits
    from models import SHAPES, model_path, models_dir

    out = {}
    for shape in SHAPES:
        name = f"{shape}:Q4_K_M"
        if not (models_dir() / f"{shape}-Q4_K_M.gguf").exists():
            # building one writes its F16 file first (8.8 GB for qwen3-4b): only on request
            print(f"skipping {name}: python bench/models.py --shape {shape}", file=sys.stderr)
            continue
        path = str(model_path(name))
        text = DEFAULT_TEXT.read_text(encoding="utf-8")
        out[f"shapes/{name}/logits"] = stamp(
            f"python bench/compare_llama_cpp.py --model {name} --threads {THREADS} --logits {SHAPE_LOGITS}",
            "",
            compare_logits(path, THREADS, text, SHAPE_LOGITS),
        )
        out[f"shapes/{name}/speed"] = stamp(
            speed_command(name, THREADS), "", speed_value(path, THREADS)
        )
        out[f"shapes/{name}/verify"] = stamp(
            f"llamay verify $LLAMAY_HOME/bench-models/{shape}-Q4_K_M.gguf", "", verify_value(path)
        )
    return out


def measure_real() -> dict:
    """The real models of bench/real_models.py that are cached (fetching one is a separate
    step: `python bench/real_models.py NAME`): perplexity and teacher-forced agreement with
    llama.cpp over the GPL v3, speed, verify."""
    from compare_llama_cpp import DEFAULT_TEXT, compare_logits
    from real_models import REAL, cache_dir

    out = {}
    text = DEFAULT_TEXT.read_text(encoding="utf-8")
    for name in REAL:
        path = cache_dir() / f"{name}-Q4_K_M.gguf"
        if not path.exists():
            print(f"skipping {name}: python bench/real_models.py {name}", file=sys.stderr)
            continue
        out[f"real/{name}/logits"] = stamp(
            f"python bench/compare_llama_cpp.py --model {name} --threads {THREADS} --logits {REAL_LOGITS}",
            REAL[name].sha256,
            compare_logits(str(path), THREADS, text, REAL_LOGITS),
        )
        out[f"real/{name}/speed"] = stamp(
            speed_command(name, THREADS), REAL[name].sha256, speed_value(str(path), THREADS)
        )
        out[f"real/{name}/verify"] = stamp(
            f"llamay verify $LLAMAY_HOME/bench-models/{name}-Q4_K_M.gguf",
            REAL[name].sha256,
            verify_value(str(path)),
        )
    return out


MEASURE: dict[str, Callable[[], dict]] = {
    "synth": measure_synth,
    "gemma": measure_gemma,
    "gemma-ppl": measure_gemma_ppl,
    "families": measure_families,
    "verify": measure_verify,
    "speed": measure_speed,
    "shapes": measure_shapes,
    "real": measure_real,
}


# --- the page ------------------------------------------------------------------------------------


class Runs:
    """Numbers the runs a page cites: [n] → command, machine, date, commit."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []
        self.loads: list[set[str]] = []

    def cite(self, record: dict) -> str:
        row = (record["command"], record["machine"], record["date"], record["commit"])
        if row not in self.rows:
            self.rows.append(row)
            self.loads.append(set())
        self.loads[self.rows.index(row)].add(record.get("load", "?"))
        return f"[{self.rows.index(row) + 1}](#run-{self.rows.index(row) + 1})"

    def table(self) -> list[str]:
        lines = [
            "| run | command | machine | load average | date | llamay commit |",
            "|---|---|---|---|---|---|",
        ]
        for i, ((command, where, date, sha), loads) in enumerate(
            zip(self.rows, self.loads, strict=True), 1
        ):
            load = ", ".join(sorted(loads))
            lines.append(
                f'| <a id="run-{i}"></a>{i} | `{command}` | {where} | {load} | {date} | {sha} |'
            )
        return lines


def fmt(x: float) -> str:
    return f"{x:.2g}"


def render(record: dict) -> str:
    got = record["measurements"]
    runs = Runs()
    missing = "not measured yet"

    def cell(key: str, show: Callable[[dict], str]) -> str:
        return f"{show(got[key]['value'])} {runs.cite(got[key])}" if key in got else missing

    out = [
        "<!-- generated by `python bench/matrix.py` from bench/matrix.json and tests/data: do not edit -->",
        "# The correctness matrix",
        "",
        "Every model file the tests hold, and every model shape of `bench/models.py`, against",
        "llama.cpp: how closely llamay's numbers agree with llama.cpp's, whether `llamay verify`'s",
        "determinism checks pass, and how fast it runs beside it. Nothing here is typed: `python",
        "bench/matrix.py` measures llamay's side and writes this page; llama.cpp's side comes from",
        "the references in tests/data (with the command that made them) or is measured in the same",
        "run through llama-cpp-python. Each figure cites its run [n]: the command, the machine, the",
        "date, the machine's load average when it was taken (the machine is shared: speed depends",
        "on it, agreement and verify do not) and the llamay commit (the table at the end). CI runs",
        "`python bench/matrix.py --check`, which recomputes the cheap parts and fails when this page",
        "is not what the current test data gives.",
        "",
        "## Perplexity against llama.cpp",
        "",
        "llamay's perplexity beside llama-perplexity's on the same file and text (llama.cpp's",
        "method: each chunk begins with BOS, the second half of each chunk is scored). The synth",
        "models are tiny (n_embd 256, 4 layers) and trained briefly on licence texts, so their",
        "predictions are peaked; Gemma 3 270M is the real model.",
        "",
        "FILE in a run's command is the row's file.",
        "",
        "| model | file | text, n_ctx | llama.cpp | llamay | ratio |",
        "|---|---|---|---|---|---|",
    ]
    synth = synth_reference()
    for entry in synth["files"]:
        expected = entry["perplexity"]
        key = f"synth/{entry['model']}/ppl"
        ours = got.get(key)
        ratio = f"{ours['value']['ppl'] / expected['ppl']:.4f}" if ours else ""
        out.append(
            f"| {entry['model']} (`{entry['architecture']}`) | {entry['file']} | {expected['text']}, "
            f"{expected['n_ctx']} | {expected['ppl']} | {cell(key, lambda v: str(v['ppl']))} | {ratio} |"
        )
    gemma = gemma_reference()
    expected = gemma["perplexity"][0]
    ours = got.get("gemma/ppl")
    ratio = f"{ours['value']['ppl'] / expected['ppl']:.4f}" if ours else ""
    out.append(
        f"| Gemma 3 270M (`gemma3`) | {gemma['model']['file']} | {expected['text']}, {expected['n_ctx']} "
        f"| {expected['ppl']} | {cell('gemma/ppl', lambda v: str(v['ppl']))} | {ratio} |"
    )
    out += [
        "",
        f"llama.cpp's figures: synth, {synth['reference']}: `{synth['perplexity']['command']}`",
        f"(tests/data/synth/reference.json); Gemma, {gemma['reference']} (tests/data/gemma3-270m-q4_k_m.json).",
        "",
        "## Teacher-forced log-probabilities",
        "",
        "Gemma 3 270M Q4_K_M, fed each of llama.cpp's six greedy outputs (prompt + 32 tokens): at",
        "every step, the difference between llamay's log-probability of llama.cpp's top token and",
        "llama.cpp's own, and whether llamay's argmax is llama.cpp's top token wherever that leads",
        "by at least 0.5 nats.",
        "",
        "| model | steps | mean \\|Δ log p\\| | max \\|Δ log p\\| | argmax agrees (clear steps) |",
        "|---|---|---|---|---|",
    ]
    key = "gemma/teacher-forced"
    if key in got:
        v = got[key]["value"]
        out.append(
            f"| Gemma 3 270M Q4_K_M | {v['steps']} | {v['mean_abs_delta']} | {v['max_abs_delta']} "
            f"| {v['clear_agree']} of {v['clear_steps']} {runs.cite(got[key])} |"
        )
    else:
        out.append(f"| Gemma 3 270M Q4_K_M | {missing} | | | |")
    out += [
        "",
        "The families' synthetic models (tests/data/families: a 2,048-token vocabulary, n_embd 256,",
        "two to four layers, random weights quantized by llama.cpp's own quantizer), teacher-forced",
        "along 160 tokens of the GPL v3: the mean KL(llama.cpp ‖ llamay) over llama.cpp's top 32",
        "tokens (the rest lumped into one), beside llama.cpp against itself on the same file (with",
        "flash attention / fed token by token on one thread: from tests/data/families/reference.json);",
        "the largest difference in the log-probability of llama.cpp's top token; the argmax agreement",
        "over all positions and where llama.cpp's top token leads by 0.5 nats (how many such).",
        "",
        "| model | type | mean KL | llama.cpp vs itself (FA / token by token) | KL ÷ llama.cpp's own | max Δ log p(top 1) | argmax agrees (all / clear) |",
        "|---|---|---|---|---|---|---|",
    ]
    index = families.index()["files"]
    for name in families.entries():
        entry = index[name]
        own = max(entry["self_kl_flash_attn"], entry["self_kl_token_by_token"])
        key = f"families/{name}"
        selfs = f"{fmt(entry['self_kl_flash_attn'])} / {fmt(entry['self_kl_token_by_token'])}"
        if key in got:
            v = got[key]["value"]
            out.append(
                f"| {entry['model']} | {entry['type']} | {fmt(v['kl'])} {runs.cite(got[key])} | {selfs} "
                f"| {v['kl'] / own:.2f} | {fmt(v['max_top1_delta'])} "
                f"| {v['agree_all']:.1%} / {v['agree_clear']:.0%} ({v['clear']}) |"
            )
        else:
            out.append(f"| {entry['model']} | {entry['type']} | {missing} | {selfs} | | | |")
    out += [
        "",
        "## `llamay verify`",
        "",
        "The determinism checks (thread counts; a sequence alone and beside others; prefill whole,",
        "chunked and token by token; fork against cold; snapshot round trip; seeded sampling; prompt",
        "lookup): every logit of every position compared with `==`. FILE in a run's command is",
        "the row's file; the families' files are written from their recipes in tests/data/families.",
        "",
        "| model | checks passed | failed |",
        "|---|---|---|",
    ]
    verify_rows = [(f"synth/{e['model']}", f"{e['model']} ({e['file']})") for e in synth["files"]]
    verify_rows.append(("gemma", "Gemma 3 270M Q4_K_M"))
    verify_rows += [
        (f"families/{name}", f"{name} (tests/data/families)") for name in families.entries()
    ]
    for key, label in verify_rows:
        key = f"verify/{key}"
        if key in got:
            v = got[key]["value"]
            out.append(
                f"| {label} | {v['passed']} of {v['checks']} {runs.cite(got[key])} | {', '.join(v['failed']) or '—'} |"
            )
        else:
            out.append(f"| {label} | {missing} | |")
    out += [
        "",
        "## Speed beside llama.cpp",
        "",
        "`bench/compare_llama_cpp.py`: the same file in both engines, their runs alternating so that",
        "both see the same machine load; prefill of 512 tokens in one call, decode of 64 tokens one",
        "at a time; medians; ratio = llamay / llama.cpp (above 1: llamay is faster). llama.cpp is",
        "llama-cpp-python 0.3.36 with its defaults. The synth models are too small for their speed to",
        "mean much beyond the fixed cost of a step; the bench shapes (below) are the sizes people run.",
        "Speed on a shared machine moves with its load (the runs table gives it): two threads on 2",
        "cores under a load of 9–12 show the collapse of every barrier that docs/performance.md",
        "describes, which is why those ratios, not the rates, are the figures to read; performance.md",
        "has a quiet machine's.",
        "",
        "| model | threads | prefill llamay / llama.cpp (t/s) | ratio | decode llamay / llama.cpp (t/s) | ratio |",
        "|---|---|---|---|---|---|",
    ]
    speed_rows = [(f"speed/gemma/{t}", "Gemma 3 270M Q4_K_M", t) for t in (1, 2)]
    speed_rows += [
        (f"speed/synth/{e['model']}/1", f"{e['model']} ({e['file']})", 1) for e in synth["files"]
    ]
    for key, label, threads in speed_rows:
        if key in got:
            v = got[key]["value"]
            out.append(
                f"| {label} | {threads} | {v['llamay_prefill_tps']} / {v['llama_cpp_prefill_tps']} "
                f"| {v['prefill_ratio']:.2f} | {v['llamay_decode_tps']} / {v['llama_cpp_decode_tps']} "
                f"| {v['decode_ratio']:.2f} {runs.cite(got[key])} |"
            )
        else:
            out.append(f"| {label} | {threads} | {missing} | | | |")
    from models import SHAPES

    out += [
        "",
        "## The bench shapes",
        "",
        "`bench/models.py`: real models' dimensions and vocabularies with seeded random weights,",
        "quantized to Q4_K_M by llama.cpp's quantizer (their logits mean nothing; the bytes read per",
        "token and the matrix shapes are the real model's). Teacher-forced over the first",
        f"{SHAPE_LOGITS} tokens of the GPL v3, one token at a time through both engines: the true next",
        "token's log-probability difference and the top-1 agreement (random weights give flat,",
        "near-tied distributions, so the top-1 agreement says less here than on a trained model);",
        "speed as above; `llamay verify`. A shape not built yet shows the command that builds it.",
        "",
        "| shape (like) | mean / max \\|Δ log p\\| | top-1 agrees | prefill ratio | decode ratio | verify |",
        "|---|---|---|---|---|---|",
    ]
    for shape_name, shape in SHAPES.items():
        name = f"{shape_name}:Q4_K_M"
        logits, speed, verify = (
            got.get(f"shapes/{name}/{part}") for part in ("logits", "speed", "verify")
        )
        row = [f"{name} ({shape.like})"]
        if not (logits or speed or verify):
            build = f"`python bench/models.py --shape {shape_name}`, then `python bench/matrix.py --only shapes`"
            out.append(f"| {row[0]} | {missing}: {build} | | | | |")
            continue
        row.append(
            f"{logits['value']['mean_abs_logprob_diff']} / {logits['value']['max_abs_logprob_diff']} {runs.cite(logits)}"
            if logits
            else missing
        )
        row.append(f"{logits['value']['top1_agreement']:.1%}" if logits else "")
        row.append(f"{speed['value']['prefill_ratio']:.2f}" if speed else missing)
        row.append(f"{speed['value']['decode_ratio']:.2f} {runs.cite(speed)}" if speed else "")
        row.append(
            f"{verify['value']['passed']} of {verify['value']['checks']} {runs.cite(verify)}"
            if verify
            else missing
        )
        out.append("| " + " | ".join(row) + " |")
    from real_models import REAL

    out += [
        "",
        "## Real models",
        "",
        "Trained instruct models fetched from PyPI by `bench/real_models.py` (the sha256 checked).",
        f"Teacher-forced over the first {REAL_LOGITS} tokens of the GPL v3, one token at a time",
        "through both engines: each engine's perplexity of the text, the true next token's",
        "log-probability difference and the top-1 agreement; speed as above; `llamay verify`.",
        "",
        "| model | perplexity: llamay / llama.cpp | mean / max \\|Δ log p\\| | top-1 agrees "
        "| prefill ratio | decode ratio | verify |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, real in REAL.items():
        logits, speed, verify = (
            got.get(f"real/{name}/{part}") for part in ("logits", "speed", "verify")
        )
        row = [f"{real.like} (`{name}`)"]
        if not (logits or speed or verify):
            fetch = (
                f"`python bench/real_models.py {name}`, then `python bench/matrix.py --only real`"
            )
            out.append(f"| {row[0]} | {missing}: {fetch} | | | | | |")
            continue
        if logits:
            v = logits["value"]
            row += [
                f"{v['llamay_perplexity']} / {v['llama_cpp_perplexity']}",
                f"{v['mean_abs_logprob_diff']} / {v['max_abs_logprob_diff']} {runs.cite(logits)}",
                f"{v['top1_agreement']:.1%}",
            ]
        else:
            row += [missing, "", ""]
        row.append(f"{speed['value']['prefill_ratio']:.2f}" if speed else missing)
        row.append(f"{speed['value']['decode_ratio']:.2f} {runs.cite(speed)}" if speed else "")
        row.append(
            f"{verify['value']['passed']} of {verify['value']['checks']} {runs.cite(verify)}"
            if verify
            else missing
        )
        out.append("| " + " | ".join(row) + " |")
    out += ["", "## Runs", "", *runs.table(), ""]
    return "\n".join(out)


# --- the command ---------------------------------------------------------------------------------


def load_record() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {"measurements": {}}


def save(record: dict) -> None:
    from llamay.paths import write_atomically

    record["measurements"] = dict(sorted(record["measurements"].items()))
    body = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    write_atomically(RECORD, lambda out: out.write(body.encode()))
    page = render(record).encode()
    write_atomically(PAGE, lambda out: out.write(page))


def stale_inputs(record: dict) -> list[str]:
    """Recorded measurements whose test data has changed since they were made."""
    current: dict[str, str] = {}
    for entry in synth_reference()["files"]:
        path = SYNTH / entry["file"]
        current[f"verify/synth/{entry['model']}"] = sha256(path)
        current[f"speed/synth/{entry['model']}/1"] = sha256(path)
    for name in families.entries():
        current[f"families/{name}"] = current[f"verify/families/{name}"] = family_inputs(name)
    gemma = sha256(GEMMA_JSON)
    current.update({"verify/gemma": gemma, "speed/gemma/1": gemma, "speed/gemma/2": gemma})
    expected = gemma_reference()["perplexity"][0]
    current["gemma/ppl"] = sha256(GEMMA_JSON, DATA / "texts" / expected["text"])
    got = record["measurements"]
    return [key for key, digest in current.items() if key in got and got[key]["inputs"] != digest]


def check() -> int:
    record = load_record()
    problems = [
        f"{key}: measured from other test data than tests/data holds now"
        for key in stale_inputs(record)
    ]
    for part in CHEAP:
        for key, fresh in MEASURE[part]().items():
            old = record["measurements"].get(key)
            if old is None:
                problems.append(f"{key}: not recorded")
            elif old["value"] != fresh["value"] or old["inputs"] != fresh["inputs"]:
                problems.append(
                    f"{key}: the page says {old['value']}, llamay now gives {fresh['value']}"
                )
    if not PAGE.exists() or PAGE.read_text() != render(record):
        problems.append(
            f"{PAGE.relative_to(ROOT)} is not the page bench/matrix.json and tests/data give"
        )
    for problem in problems:
        print(f"stale: {problem}", file=sys.stderr)
    if problems:
        print(
            "error: the matrix is stale; run `python bench/matrix.py` (or --only PARTS)",
            file=sys.stderr,
        )
        return 1
    print(f"{PAGE.relative_to(ROOT)} is current ({len(record['measurements'])} measurements)")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help=f"comma-separated parts of {', '.join(PARTS)}")
    parser.add_argument(
        "--check", action="store_true", help="recompute the cheap parts and compare"
    )
    parser.add_argument("--render", action="store_true", help="write the page from the record only")
    args = parser.parse_args()
    if args.check:
        sys.exit(check())
    record = load_record()
    if not args.render:
        parts = (
            args.only.split(",")
            if args.only
            else [p for p in PARTS if p not in ("shapes", "real") or has_llama_cpp()]
        )
        for part in parts:
            if part not in MEASURE:
                sys.exit(f"error: unknown part {part!r}; parts: {', '.join(PARTS)}")
            if part in ("speed", "shapes", "real") and not has_llama_cpp():
                print(
                    f"skipping {part}: llama-cpp-python is not installed (pip install '.[bench]')",
                    file=sys.stderr,
                )
                continue
            print(f"measuring {part} ...", file=sys.stderr, flush=True)
            record["measurements"].update(MEASURE[part]())
            save(record)  # after each part: a long run keeps what it measured
    save(record)
    print(f"wrote {PAGE.relative_to(ROOT)} and {RECORD.relative_to(ROOT)}")


def has_llama_cpp() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
