import sys

from svg import Drawing, box_height

OUT = sys.argv[1]

ROWS = [
    # (kind, title, lines, tests, side)  side: optional dashed box to the right
    (
        "outside",
        "an HTTP client",
        ['POST /v1/chat/completions  {"model": "gemma3:270m", "stream": true, ...}'],
        [],
        None,
    ),
    (
        "proved",
        "server/ openai.py → inference.py",
        ["parse and check the body; the chat template, tools, grammar"],
        ["tests/server/test_openai.py::test_chat_completion_shape_and_usage"],
        (
            "dashed",
            "providers/ (optional)",
            ["a name listed in config.toml goes", "to a remote OpenAI/Anthropic API"],
        ),
    ),
    (
        "proved",
        "llamay.load → store/",
        ["the name gemma3:270m resolves to a file, offline"],
        ["tests/store/test_store_builtin.py::test_assembles_once_into_an_empty_store"],
        None,
    ),
    ("outside", "gemma-3-270m-q4_k_m.gguf on disk", [], [], None),
    (
        "proved",
        "gguf/ reader.py",
        ["mmap; zero-copy tensor views; every offset and size checked"],
        ["tests/gguf/test_gguf.py::test_tensors_are_zero_copy_views_with_gguf_shapes"],
        None,
    ),
    (
        "proved",
        "models/ registry.py, hparams.py, spec.py",
        [
            "general.architecture → a family file; one Block per layer;",
            "what is not supported is refused by name",
        ],
        ["tests/models/test_registry.py::test_supported_architectures_pass"],
        None,
    ),
    (
        "proved",
        "tokenizer/",
        ["the templated prompt → token ids, as llama.cpp gives them"],
        ["tests/tokenizer/test_tokenizer_vectors.py::test_tokenize_matches_llama_cpp"],
        None,
    ),
    (
        "proved",
        "backends/ cpu.py",
        ["bind the spec; pack the weights once into huge pages"],
        ["tests/backends/test_engine_forward.py::test_tiny_models_match_the_reference"],
        (
            "dashed",
            "backends/ cuda (not yet written)",
            ["the same protocol, its own", "determinism class"],
        ),
    ),
    (
        "proved",
        "engine/ generate.py → scheduler.py",
        ["a Generation per choice; every running sequence in one step"],
        [
            "tests/engine/test_scheduler.py::test_concurrent_generations_give_exactly_what_they_give_alone"
        ],
        None,
    ),
    (
        "proved",
        "state/ kv_cache.py",
        ["adopt a cached prefix; reserve pages, copying a shared one first"],
        ["tests/state/test_state_context.py::test_a_new_context_reuses_the_cached_prefix_exactly"],
        None,
    ),
    (
        "subject",
        "_core/ forward.c: one forward step",
        [
            "one C call, one OpenMP region: K/V into pages, attention over",
            "the pages, the logits; the same bits for any batch or thread count",
        ],
        [
            "tests/backends/test_engine_determinism.py::test_batch_shapes_give_the_same_bits",
            "tests/engine/test_gemma_engine.py::test_teacher_forced_log_probabilities_match_llama_cpp",
        ],
        None,
    ),
    (
        "proved",
        "engine/ sampling.py (+ grammar/)",
        ["the next token; the RNG is keyed by (seed, sequence, step)"],
        ["tests/engine/test_sampling.py::test_uniform_is_a_pure_function_of_its_key"],
        None,
    ),
    (
        "proved",
        "tokenizer/ detokenizer.py",
        ["text in whole characters only"],
        ["tests/tokenizer/test_tokenizer_detokenize.py::test_stream_holds_back_split_characters"],
        None,
    ),
    (
        "proved",
        "server/ sse.py",
        ["one server-sent event per piece, sent as it is made"],
        ["tests/server/test_streaming.py::test_events_leave_as_they_are_made"],
        None,
    ),
    (
        "outside",
        "a token on the socket",
        ['data: {"choices": [{"delta": {"content": " Paris"}}]}'],
        [],
        None,
    ),
]

X, W, GAP = 60, 650, 22
SIDE_X, SIDE_W = 750, 290


def height(lines, tests):
    return box_height(W, lines, tests)


total = 70 + sum(height(r[2], r[3]) + GAP for r in ROWS) + 20
d = Drawing(
    1060,
    total,
    "The life of one request in llamay",
    "From a GGUF file to a token on a socket, package by package: a streamed OpenAI chat "
    "completion through llamay serve. Each box names the package and the test that proves it.",
)
d.text(X, 32, "The life of one request: a GGUF file to a token on a socket", "head")
d.text(
    X,
    52,
    "A streamed chat completion through llamay serve; llamay run takes the same path from engine/ down.",
    "note",
)
y = 70
prev_bottom = None
centers = {}
for index, (kind, title, lines, tests, side) in enumerate(ROWS):
    h = height(lines, tests)
    rx = 18 if kind == "outside" else 6
    d.box(X, y, W, h, kind, title, lines, tests, rx=rx)
    if prev_bottom is not None:
        d.arrow([(X + W / 2, prev_bottom), (X + W / 2, y - 2)])
    if side:
        skind, stitle, slines = side
        sh = height(slines, [])
        sy = y + (h - sh) / 2
        d.box(SIDE_X, sy, SIDE_W, sh, skind, stitle, slines)
        d.arrow([(X + W, y + h / 2), (SIDE_X - 2, y + h / 2)], cls="arrow-light")
    centers[index] = (y, h)
    prev_bottom = y + h
    y += h + GAP

# the loop: after sampling, the next step
sy, sh = centers[11]
ty, th = centers[8]
lx = X - 14
d.arrow([(X, sy + sh / 2), (lx, sy + sh / 2), (lx, ty + th / 2), (X - 2, ty + th / 2)])
d.text(
    lx - 4,
    (sy + ty + th) / 2 + 40,
    "next step",
    "note",
    anchor="end",
    extra=f' transform="rotate(-90 {lx - 4} {(sy + ty + th) / 2 + 40})"',
)
d.save(OUT)
