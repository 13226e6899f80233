import sys

from svg import Drawing

W = 1060
d = Drawing(
    W,
    800,
    "A llamay snapshot file, byte by byte",
    "Header: magic LLAMAYKV, format version, section count; then META, TOKS, LOGT and PAGE "
    "sections, each a 44-byte header (name, payload length, sha256) and its payload. Restore "
    "checks everything before it allocates a page and refuses another model's snapshot.",
)
d.text(30, 32, "A snapshot, byte by byte (llamay/state/snapshot.py, format version 1)", "head")
d.text(
    30,
    52,
    "Little-endian; offsets in bytes; not to scale. ctx.save(path) writes it through write_atomically "
    "(temporary file, fsync, rename).",
    "note",
)
# ---- the file ------------------------------------------------------------------------------------
d.box(
    20,
    66,
    W - 40,
    150,
    "subject",
    "the file",
    tests=[
        "tests/state/test_state_snapshot.py::test_the_file_layout",
        "tests/state/test_state_snapshot.py::test_save_is_atomic_and_leaves_no_temporary_file",
    ],
)
y = 126
cells = [
    (100, "LLAMAYKV", "magic · 0–7", "#eceff1"),
    (110, "1", "version u32 · 8–11", "#eceff1"),
    (120, "4", "sections u32 · 12–15", "#eceff1"),
    (150, "META", "§ from 16", "#e8eaf6"),
    (130, "TOKS", "§", "#e0f2f1"),
    (130, "LOGT", "§", "#fff8e1"),
    (240, "PAGE", "§ · ends the file", "#e3f2fd"),
]
x = 40
spots = {}
for w, label, sub, fill in cells:
    d.cell(x, y, w, 46, fill, label, sub)
    spots[label] = (x, w)
    x += w
d.text(40, 196, "Nothing may follow PAGE: trailing bytes are refused.", "note")
# ---- one section --------------------------------------------------------------------------------
d.box(
    20,
    232,
    W - 40,
    112,
    "proved",
    "every section: a 44-byte header, then its payload",
    tests=["tests/state/test_state_snapshot.py::test_a_flipped_byte_is_refused"],
)
y = 278
x = 40
for w, label, sub, fill in [
    (110, "name", "4 ASCII · 0–3", "#e8eaf6"),
    (150, "L", "payload length u64 · 4–11", "#e8eaf6"),
    (330, "sha256(payload)", "32 bytes · 12–43", "#e8eaf6"),
    (400, "payload", "L bytes · from 44", "#ffffff"),
]:
    d.cell(x, y, w, 46, fill, label, sub)
    x += w
# ---- payloads -----------------------------------------------------------------------------------
d.box(
    20,
    360,
    300,
    250,
    "proved",
    "META: UTF-8 JSON, sorted keys",
    [
        "fingerprint (the file's sha256), model,",
        "kv_dtype, page_tokens, n_layers,",
        "n_kv_heads, head_dim, page_bytes,",
        "backend, determinism, kernels,",
        "llamay_version, n_tokens,",
        "n_pages = ⌈n_tokens / page_tokens⌉, n_vocab",
    ],
    ["tests/state/test_state_snapshot.py::test_inconsistent_metadata_is_refused"],
)
d.box(35, 540, 270, 56, "dashed", "note (optional)", ["a JSON object the application keeps"])
d.box(
    335,
    360,
    300,
    120,
    "proved",
    "TOKS",
    ["n_tokens token ids, int32 each;", "at most the model's n_ctx"],
    ["tests/state/test_state_snapshot.py::test_a_snapshot_longer_than_n_ctx_is_refused"],
)
d.box(
    335,
    490,
    300,
    120,
    "proved",
    "LOGT",
    ["the last logits: n_vocab float32;", "empty when the context has none"],
    ["tests/state/test_state_snapshot.py::test_non_finite_kv_or_logits_are_refused"],
)
d.box(
    650,
    360,
    390,
    250,
    "proved",
    "PAGE: n_pages × page_bytes, in order",
    ["canonical bytes, whatever the backend's", "memory (state/layout.py)"],
    ["tests/state/test_kv_cache.py::test_the_backends_lay_pages_out_alike"],
)
y = 470
x = 665
for w, label, sub, fill in [
    (60, "K", "layer 0", "#e3f2fd"),
    (60, "V", "layer 0", "#e3f2fd"),
    (60, "K", "layer 1", "#bbdefb"),
    (60, "V", "layer 1", "#bbdefb"),
    (30, "…", None, "#ffffff"),
    (90, "V", "layer n−1", "#90caf9"),
]:
    d.cell(x, y, w, 46, fill, label, sub)
    x += w
d.text(665, 462, "one page:", "body")
d.text(665, 536, "each K or V: n_kv_heads × page_tokens × head_dim", "body")
d.text(665, 552, "values of kv_dtype (F16 or F32); slots past", "body")
d.text(665, 568, "n_tokens: zeros or stale values, never read", "body")
# ---- restore --------------------------------------------------------------------------------------
d.text(
    30,
    642,
    "model.restore(path) reads the whole file and checks it before it allocates a page:",
    "title",
)
d.box(
    20,
    656,
    300,
    130,
    "proved",
    "SnapshotCorrupt",
    [
        "truncated, bad magic, a checksum, count",
        "or range that does not hold, NaN or ∞;",
        'a newer version: "upgrade llamay"',
    ],
    ["tests/state/test_state_snapshot.py::test_a_newer_format_is_refused_saying_so"],
)
d.box(
    330,
    656,
    370,
    130,
    "proved",
    "SnapshotMismatch",
    [
        "other weights (names both fingerprints and",
        "files), another determinism class, another",
        "KV layout; the kernel set may differ",
    ],
    ["tests/state/test_state_snapshot.py::test_a_snapshot_of_other_weights_is_refused_naming_both"],
)
d.box(
    710,
    656,
    330,
    130,
    "proved",
    "or a new context",
    [
        "it continues == a cold recompute; untrusted,",
        "its pages stay out of the prefix tree",
        "(verify=True recomputes them first)",
    ],
    ["tests/state/test_state_snapshot.py::test_save_restore_continue_is_exact"],
)
d.save(sys.argv[1])
