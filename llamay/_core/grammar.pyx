# cython: language_level=3
"""Constrained decoding's hot part: a compiled grammar's recognizer (a lazily built DFA over sets
of pushdown stacks) and the token-trie walk that masks a vocabulary. The C side is csrc/grammar.h.

`Recognizer` holds one sequence's position in the language; `TokenTrie` holds a vocabulary's
token bytes, built once and shared by every recognizer (it is read-only).
"""

cimport cython
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

import numpy as np

from llamay.errors import GrammarError

cnp.import_array()

cdef extern from "grammar.h":
    int32_t GM_DEAD
    int32_t GM_NOMEM

    ctypedef struct gm_engine:
        pass

    ctypedef struct gm_grammar:
        const int32_t *elems
        const int32_t *rule_off
        const int32_t *alt_start
        const uint8_t *bitsets
        int32_t root

    ctypedef struct gm_trie:
        int32_t n_nodes
        int32_t max_depth
        const uint32_t *node
        const int32_t *end
        const int32_t *tok_off
        const int32_t *tokens

    gm_engine *gm_new(const gm_grammar *grammar) nogil
    void gm_free(gm_engine *e) nogil
    int32_t gm_initial(gm_engine *e) nogil
    int32_t gm_step(gm_engine *e, int32_t set, uint8_t byte) nogil
    int gm_can_end(const gm_engine *e, int32_t set) nogil
    int gm_must_end(const gm_engine *e, int32_t set) nogil
    int32_t gm_n_sets(const gm_engine *e) nogil
    int32_t gm_compact(gm_engine *e, int32_t keep) nogil
    int gm_mask(gm_engine *e, int32_t set, const gm_trie *trie, uint8_t *mask) nogil
    int32_t gm_trie_build(int32_t n, const uint8_t *data, const int64_t *off, const int32_t *ids,
                          uint32_t *node, int32_t *end, int32_t *tok_off, int32_t *tokens,
                          int32_t *max_depth) nogil

# Cached (set, byte) transitions are dropped past this many sets (each costs 1 KiB), keeping
# only the current one: long generations stay in bounded memory.
cdef enum:
    MAX_CACHED_SETS = 4096


@cython.final
cdef class TokenTrie:
    """The trie of a vocabulary's token bytes. `pieces[i]` are token ids[i]'s bytes (non-empty)."""

    cdef readonly int32_t n_vocab
    cdef readonly int32_t n_nodes
    cdef gm_trie trie
    cdef object _arrays  # keeps the trie's arrays alive

    def __cinit__(self, list pieces, cnp.ndarray ids, int32_t n_vocab):
        order = sorted(range(len(pieces)), key=pieces.__getitem__)
        cdef bytes data = b"".join([pieces[k] for k in order])
        cdef cnp.ndarray[int64_t] off = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([len(pieces[k]) for k in order], out=off[1:])
        cdef cnp.ndarray[int32_t] sorted_ids = np.ascontiguousarray(ids[order], dtype=np.int32)
        cdef Py_ssize_t size = max(len(data), 1)
        cdef cnp.ndarray[uint32_t] node = np.empty(size, dtype=np.uint32)
        cdef cnp.ndarray[int32_t] end = np.empty(size, dtype=np.int32)
        cdef cnp.ndarray[int32_t] tok_off = np.empty(size + 1, dtype=np.int32)
        cdef cnp.ndarray[int32_t] tokens = np.empty(max(len(pieces), 1), dtype=np.int32)
        cdef int32_t max_depth = 0
        cdef const uint8_t *raw = data
        n_nodes = gm_trie_build(
            len(pieces), raw, &off[0], &sorted_ids[0], &node[0], &end[0], &tok_off[0],
            &tokens[0], &max_depth,
        )
        if n_nodes < 0:
            raise MemoryError()
        self.n_vocab = n_vocab
        self.n_nodes = n_nodes
        self._arrays = (node, end, tok_off, tokens)
        self.trie.n_nodes = n_nodes
        self.trie.max_depth = max_depth
        self.trie.node = &node[0]
        self.trie.end = &end[0]
        self.trie.tok_off = &tok_off[0]
        self.trie.tokens = &tokens[0]


@cython.final
cdef class Recognizer:
    """Where one text stands in a compiled grammar's language, advanced a byte at a time."""

    cdef gm_engine *engine
    cdef readonly int32_t state  # the current set of stacks; ids are reused after a compaction
    cdef readonly int64_t epoch  # how many compactions so far: (epoch, state) names a state
    cdef object _arrays  # keeps the grammar's arrays alive

    def __cinit__(self, cnp.ndarray elems, cnp.ndarray rule_off, cnp.ndarray alt_start,
                  cnp.ndarray bitsets, int32_t root):
        cdef cnp.ndarray[int32_t] e = np.ascontiguousarray(elems, dtype=np.int32)
        cdef cnp.ndarray[int32_t] r = np.ascontiguousarray(rule_off, dtype=np.int32)
        cdef cnp.ndarray[int32_t] a = np.ascontiguousarray(alt_start, dtype=np.int32)
        cdef cnp.ndarray[uint8_t, ndim=2] b = np.ascontiguousarray(bitsets, dtype=np.uint8)
        cdef gm_grammar g
        self._arrays = (e, r, a, b)
        g.elems = &e[0]
        g.rule_off = &r[0]
        g.alt_start = &a[0]
        g.bitsets = &b[0, 0] if b.shape[0] else NULL
        g.root = root
        self.engine = gm_new(&g)
        if self.engine == NULL:
            raise MemoryError()
        self.state = self._checked(gm_initial(self.engine))

    def __dealloc__(self):
        gm_free(self.engine)

    cdef int32_t _checked(self, int32_t state) except -1:
        if state == GM_NOMEM:
            raise MemoryError()
        return state

    @property
    def can_end(self) -> bool:
        return bool(gm_can_end(self.engine, self.state))

    @property
    def must_end(self) -> bool:
        return bool(gm_must_end(self.engine, self.state))

    def accepts_prefix(self, const uint8_t[:] data) -> bool:
        """Whether the text so far followed by `data` is still a prefix of the language."""
        cdef int32_t state = self.state
        cdef Py_ssize_t i
        for i in range(data.shape[0]):
            state = self._checked(gm_step(self.engine, state, data[i]))
            if state == GM_DEAD:
                return False
        return True

    def feed(self, const uint8_t[:] data) -> None:
        """Advances over `data`; GrammarError (and no change) if it leaves the language."""
        cdef int32_t state = self.state
        cdef Py_ssize_t i
        for i in range(data.shape[0]):
            state = self._checked(gm_step(self.engine, state, data[i]))
            if state == GM_DEAD:
                raise GrammarError(
                    f"the text cannot continue with {bytes(data)!r}: byte {i} leaves the grammar"
                )
        if gm_n_sets(self.engine) > MAX_CACHED_SETS:
            state = self._checked(gm_compact(self.engine, state))
            self.epoch += 1
        self.state = state

    def mask(self, TokenTrie trie, cnp.ndarray[uint8_t, cast=True] out) -> None:
        """Sets out[token] for every trie token that keeps the text in the language."""
        if out.shape[0] < trie.n_vocab:
            raise ValueError("the mask is shorter than the vocabulary")
        cdef int rc
        cdef uint8_t *dst = <uint8_t *> out.data
        with nogil:
            rc = gm_mask(self.engine, self.state, &trie.trie, dst)
        if rc == GM_NOMEM:
            raise MemoryError()
