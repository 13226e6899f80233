import sys

from svg import Drawing, box_height

ROWS = [
    (
        "GGUF files",
        ["any GGUF file it writes"],
        "the same files",
        "llamay reads them where they lie (mmap)",
        ["no conversion step, no other format"],
        [
            "tests/backends/test_engine_forward.py::test_synth_perplexity_matches_llama_cpp_and_the_reference"
        ],
    ),
    (
        "the tokenizers",
        ["SPM, BPE (+ pre-tokenizers), WPM"],
        "the same ids",
        "llamay/tokenizer",
        ["llama.cpp's own test vocabularies and outputs"],
        ["tests/tokenizer/test_tokenizer_vectors.py::test_tokenize_matches_llama_cpp"],
    ),
    (
        "ggml's quantizers",
        ["llama-quantize, ggml-quants.c"],
        "the same bytes",
        "llamay/_core quants",
        ["dequantize bit-exact; quantize writes llama-quantize's bytes"],
        [
            "tests/gguf/test_quants.py::test_dequantize_equals_ggml",
            "tests/gguf/test_quants.py::test_quantize_equals_what_llama_quantize_writes",
        ],
    ),
    (
        "llama.cpp's logits",
        ["and their spread: the same file with flash", "attention, or fed token by token"],
        "within that spread",
        "llamay's logits, every family and type",
        ["mean KL within 3× llama.cpp against itself (the matrix)"],
        [
            "tests/backends/test_families_llama_cpp.py::test_matches_llama_cpp",
            "tests/engine/test_gemma_engine.py::test_perplexity_matches_llama_cpp",
        ],
    ),
    (
        "bits that vary",
        ["with the batch and thread count (its own", "runs differ: tests/data/families)"],
        "llamay does not",
        "one reduction order per output",
        [
            "== logits across threads, batches, forks, restores;",
            "llamay verify checks it on any model",
        ],
        [
            "tests/backends/test_engine_determinism.py::test_thread_counts_give_the_same_bits",
            "tests/backends/test_engine_determinism.py::test_batch_shapes_give_the_same_bits",
        ],
    ),
    (
        "a KV cache per sequence",
        ["state save and load"],
        "llamay adds",
        "pages with refcounts, shared by forks and a prefix tree",
        ["snapshots that refuse another model's weights"],
        [
            "tests/state/test_state_context.py::test_fork_shares_every_page_and_allocates_none",
            "tests/state/test_state_snapshot.py::test_a_snapshot_of_other_weights_is_refused_naming_both",
        ],
    ),
]
W = 1060
LX, LW, RX, RW = 20, 300, 470, 570


def h(lines, tests):
    return box_height(RW, lines, tests)


total = 76 + sum(max(h(r[4], r[5]), 70) + 18 for r in ROWS) + 88 + 20
d = Drawing(
    W,
    total,
    "Where llamay stands against llama.cpp",
    "llama.cpp on the left, llamay on the right: the same files, token ids and quantized bytes; "
    "logits within llama.cpp's own spread; bit-identical across threads and batches; paged KV "
    "state with forks, a prefix tree and snapshots. Speed ratios are on the matrix page.",
)
d.text(20, 32, "Where llamay stands against llama.cpp", "head")
d.text(
    20,
    52,
    "Left: llama.cpp (llama-cpp-python 0.3.36 in the tests). Right: llamay, with the test that proves each claim. "
    "No speed here: the matrix page has each ratio with its command and machine.",
    "note",
)
y = 76
for left, llines, rel, right, rlines, tests in ROWS:
    bh = max(h(rlines, tests), 70)
    d.box(LX, y + (bh - 56) / 2, LW, 56, "outside", left, llines[:2], rx=18) if len(
        llines
    ) < 2 else d.box(LX, y + (bh - 70) / 2, LW, 70, "outside", left, llines, rx=18)
    d.arrow([(LX + LW + 4, y + bh / 2), (RX - 4, y + bh / 2)])
    d.text((LX + LW + RX) / 2, y + bh / 2 - 7, rel, "note", anchor="middle")
    d.box(
        RX, y, RW, bh, "subject" if rel == "within that spread" else "proved", right, rlines, tests
    )
    y += bh + 18
d.box(LX, y + 7, LW, 74, "outside", "CPU, CUDA, Metal, Vulkan, …", ["and more backends"], rx=18)
d.box(
    RX,
    y,
    275,
    88,
    "proved",
    "llamay's backends",
    ["cpu: C kernels (plain, AVX2, AVX-512)", "reference: NumPy float64"],
    ["tests/backends/test_engine_determinism.py::test_kernel_sets_give_the_same_bits"],
)
d.box(
    RX + 295,
    y + 7,
    275,
    74,
    "dashed",
    "a GPU backend",
    ["not yet written: the protocol of", "backends/base.py is its seam"],
)
d.save(sys.argv[1])
