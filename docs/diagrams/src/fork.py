import sys

from svg import Drawing, box_height

OUT = sys.argv[1]
W = 1060
d = Drawing(
    W,
    870,
    "Pages, forks, copy-on-write and the prefix tree",
    "A context is a token list plus a page list. A fork shares every page; the first write "
    "into a shared partial page copies that page only; full pages go into a prefix tree "
    "that a new context with the same prompt adopts.",
)
d.text(30, 32, "Pages, forks, copy-on-write and the prefix tree", "head")
d.text(
    30,
    52,
    "Pages of P = 32 token positions; a context of 100 tokens holds 4 pages, the last one partial "
    "(4 of 32 slots). rc = how many holders a page has.",
    "note",
)

CELL_W, CELL_H = 100, 44
SHARED, OWN, PARTIAL, FREE = "#e3f2fd", "#f1f8e9", "#fffde7", "#ffffff"


def page_row(x, y, label, pages):
    """pages: (id, sub, fill) or (id, sub, fill, 'subject')."""
    d.text(x, y + CELL_H / 2 + 4, label, "title")
    cx = x + 130
    spots = []
    for page in pages:
        pid, sub, fill = page[:3]
        if len(page) > 3:
            d.rect(cx - 3, y - 3, CELL_W + 6, CELL_H + 6, "subject", rx=4)
        d.cell(cx, y, CELL_W, CELL_H, fill, pid, sub)
        spots.append(cx + CELL_W / 2)
        cx += CELL_W + 8
    return spots


def pool(x, y, refcounts):
    d.text(x, y + 18, "the page table", "title")
    d.text(x, y + 34, "(refcounts, free list)", "note")
    cx = x + 130
    spots = {}
    for pid, rc in refcounts:
        fill = FREE if rc == 0 else ("#e3f2fd" if rc > 1 else "#f1f8e9")
        d.cell(cx, y, 52, 40, fill, pid, f"rc {rc}")
        spots[pid] = cx + 26
        cx += 57
    return spots


def links(froms, y_from, tos, y_to, ids):
    for fx, pid in zip(froms, ids, strict=False):
        d.arrow([(fx, y_from), (tos[pid], y_to - 2)], cls="arrow-light")


# ---- panel 1: fork ------------------------------------------------------------------------------
d.box(
    20,
    70,
    W - 40,
    185,
    "proved",
    "1 · child = ctx.fork(): the page list is copied, every page gains a holder; no page is allocated",
    tests=[
        "tests/state/test_state_context.py::test_fork_shares_every_page_and_allocates_none",
        "tests/state/test_state_gemma.py::test_forks_allocate_nothing_and_continue_exactly",
    ],
)
a = page_row(
    40,
    130,
    "ctx",
    [
        ("p0", "0–31", SHARED),
        ("p1", "32–63", SHARED),
        ("p2", "64–95", SHARED),
        ("p3", "96–99 · partial", PARTIAL),
    ],
)
b = page_row(
    40,
    190,
    "child",
    [("p0", "", SHARED), ("p1", "", SHARED), ("p2", "", SHARED), ("p3", "partial", PARTIAL)],
)
spots = pool(620, 130, [("p0", 2), ("p1", 2), ("p2", 2), ("p3", 2), ("p4", 0)])
d.text(620, 200, "pages used: 4 before the fork, 4 after it", "body")
d.text(620, 218, "tokens: a copy of the list; logits: the parent's", "body")
d.text(620, 236, "on Gemma 3 270M: 8 forks of a 32-page context, 0 pages", "body")

# ---- panel 2: copy-on-write ---------------------------------------------------------------------
d.box(
    20,
    270,
    W - 40,
    185,
    "proved",
    "2 · child.feed([t]): only the partial last page can be written, so only it is copied",
    tests=[
        "tests/state/test_state_context.py::test_the_first_write_into_a_shared_partial_page_copies_it",
        "tests/state/test_kv_cache.py::test_reserve_copies_a_shared_partial_page_before_it_is_written",
    ],
)
page_row(
    40,
    330,
    "ctx",
    [("p0", "", SHARED), ("p1", "", SHARED), ("p2", "", SHARED), ("p3", "96–99", OWN)],
)
page_row(
    40,
    390,
    "child",
    [
        ("p0", "", SHARED),
        ("p1", "", SHARED),
        ("p2", "", SHARED),
        ("p4", "copy of p3 + t", OWN, "subject"),
    ],
)
pool(620, 330, [("p0", 2), ("p1", 2), ("p2", 2), ("p3", 1), ("p4", 1)])
d.text(620, 398, "KVCache.reserve: alloc p4, storage.copy(p3 → p4),", "body")
d.text(620, 416, "decref p3; then K/V of t go into p4 at slot 4", "body")
d.text(620, 434, "full pages are never written again", "body")

# ---- panel 3: prefix tree -----------------------------------------------------------------------
d.box(
    20,
    470,
    W - 40,
    390,
    "proved",
    "3 · the prefix tree: each full page under its parent, keyed by its 32 token ids",
    tests=[
        "tests/state/test_state_context.py::test_a_new_context_reuses_the_cached_prefix_exactly",
        "tests/state/test_state_context.py::test_cached_pages_are_evicted_least_recently_used_first_when_memory_runs_out",
        "tests/state/test_state_snapshot.py::test_a_restored_context_never_feeds_the_shared_prefix_tree",
    ],
)
# the tree
rx, ry = 60, 570
d.cell(rx, ry, 70, 36, "#eceff1", "root")
nodes = {"p0": (200, 540), "p1": (340, 540), "p2": (480, 540), "p5": (480, 610)}
subs = {"p0": "tokens 0–31", "p1": "32–63", "p2": "64–95", "p5": "64–95 of another text"}
for pid, (nx, ny) in nodes.items():
    d.cell(nx, ny, 110 if pid != "p5" else 150, 40, SHARED, pid, subs[pid])
d.arrow([(rx + 70, ry + 18), (200 - 2, 560)], cls="arrow")
d.arrow([(310, 560), (340 - 2, 560)], cls="arrow")
d.arrow([(450, 560), (480 - 2, 560)], cls="arrow")
d.arrow([(450, 570), (480 - 2, 625)], cls="arrow")
d.text(60, 690, "new = model.context(); new.feed(the same first 70 tokens):", "body")
page_row(
    40,
    705,
    "new",
    [("p0", "adopted", SHARED), ("p1", "adopted", SHARED), ("p6", "64–69 · computed", OWN)],
)
d.text(660, 545, "insert: after a step fills a page (trusted contexts only)", "body")
d.text(660, 565, "match: an empty context takes its longest cached prefix,", "body")
d.text(660, 581, "leaving at least its last token to compute", "body")
d.text(660, 601, "evict, when an allocation would fail: leaves only the tree", "body")
d.text(660, 617, "holds (rc 1), least recently used first", "body")
d.text(660, 637, "a restored snapshot's pages are untrusted: never inserted,", "body")
d.text(660, 653, "never adopted (restore(verify=True) recomputes, then shares)", "body")
d.box(
    450,
    770,
    580,
    box_height(
        580,
        ["x"],
        [
            "tests/state/test_state_context.py::test_without_the_prefix_cache_nothing_is_kept_or_reused"
        ],
    ),
    "dashed",
    "llamay.load(..., prefix_cache=False)",
    ["optional: no tree; nothing kept, nothing matched"],
    ["tests/state/test_state_context.py::test_without_the_prefix_cache_nothing_is_kept_or_reused"],
)
d.save(OUT)
