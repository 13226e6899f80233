"""The merge loops of llama.cpp's SentencePiece (SPM) and BPE tokenizers, step for step.

Both hold a piece of text as a linked list of symbols, one UTF-8 character each to begin with,
and a priority queue of adjacent pairs that form a known token (SPM: the highest token score
first) or a known merge (BPE: the lowest merge rank first); ties go to the leftmost pair. Popping
a pair merges its right symbol into its left one and queues the two new neighbour pairs; a queued
pair whose symbols changed since is skipped. What remains is looked up in the vocabulary, and a
symbol that is no token falls back to byte tokens.

Tokens (and BPE merges, as b"left right") are looked up in a `StringTable`: a hash table over
byte strings that the loops query in C, without making a Python object per candidate pair.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

from llamay.errors import TokenizerError


# --- a read-only hash table from byte strings to ints -------------------------------------------

cdef inline uint64_t fnv1a(const char *p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ <unsigned char> p[i]) * 1099511628211ULL
    return h


@cython.final
cdef class StringTable:
    """Byte strings to their index, for the merge loops: key i is blob[offsets[i]:offsets[i + 1]]
    (a llamay.gguf.StringArray's two parts). The first of equal keys keeps its index;
    `first_duplicate` is (i, j) for the first key j equal to an earlier key i, or None."""

    cdef bytes _blob  # every key, back to back
    cdef const char *_data  # _blob's bytes
    cdef object _offsets_owner  # the array that _offsets points into
    cdef const int64_t *_offsets  # key i is _blob[_offsets[i]:_offsets[i + 1]]
    cdef int32_t *_slots  # key index, or -1
    cdef uint64_t _mask
    cdef readonly object first_duplicate

    def __cinit__(self, bytes blob, const int64_t[::1] offsets):
        cdef Py_ssize_t n = offsets.shape[0] - 1, i, size = 16
        if n < 0 or offsets[0] != 0 or offsets[n] != len(blob):
            raise ValueError("offsets must run from 0 to the blob's length")
        while size < 2 * n:
            size *= 2
        self._mask = size - 1
        for i in range(n):
            if offsets[i + 1] < offsets[i]:
                raise ValueError("offsets must not decrease")
        self._blob = blob
        self._data = PyBytes_AS_STRING(self._blob)
        self._offsets_owner = offsets  # read-only from here on: the keys never change
        self._offsets = &offsets[0]
        self._slots = <int32_t *> malloc(size * sizeof(int32_t))
        if self._slots == NULL:
            raise MemoryError()
        for i in range(size):
            self._slots[i] = -1
        cdef uint64_t slot
        for i in range(n):
            slot = self._find(
                self._data + self._offsets[i], self._offsets[i + 1] - self._offsets[i]
            )
            if self._slots[slot] < 0:
                self._slots[slot] = <int32_t> i
            elif self.first_duplicate is None:
                self.first_duplicate = (self._slots[slot], i)

    def __dealloc__(self):
        free(self._slots)

    cdef uint64_t _find(self, const char *key, Py_ssize_t n) noexcept nogil:
        """The slot holding `key`, or the empty slot where it would go."""
        cdef uint64_t slot = fnv1a(key, n) & self._mask
        cdef int32_t entry
        while True:
            entry = self._slots[slot]
            if entry < 0:
                return slot
            if (self._offsets[entry + 1] - self._offsets[entry] == n
                    and memcmp(self._data + self._offsets[entry], key, n) == 0):
                return slot
            slot = (slot + 1) & self._mask

    cdef inline int32_t lookup(self, const char *key, Py_ssize_t n) noexcept nogil:
        """The index of `key`, or -1."""
        return self._slots[self._find(key, n)]

    def get(self, bytes key) -> int | None:
        cdef int32_t value = self.lookup(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
        return None if value < 0 else value


# --- symbols and the pair queue -----------------------------------------------------------------

cdef struct Pair:
    double priority  # higher pops first
    int left
    int right
    Py_ssize_t size  # bytes of the two symbols when queued; a mismatch means stale


cdef struct Symbols:
    const char *text
    Py_ssize_t *start
    Py_ssize_t *length  # 0 once merged into its left neighbour
    int *prev
    int *next
    int count
    char *scratch  # BPE: room for the b"left right" key of a pair
    Pair *heap
    Py_ssize_t heap_len
    Py_ssize_t heap_cap


cdef inline Py_ssize_t utf8_length(unsigned char lead) noexcept nogil:
    # As llama.cpp's unicode_len_utf8: from the lead byte alone, without validation.
    if lead < 0xC0:
        return 1
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    return 4


cdef int symbols_init(Symbols *s, const char *text, Py_ssize_t n) except -1:
    s.text = text
    s.count = 0
    s.heap_len = 0
    s.heap_cap = 0
    s.heap = NULL
    s.start = <Py_ssize_t *> malloc((n + 1) * sizeof(Py_ssize_t))
    s.length = <Py_ssize_t *> malloc((n + 1) * sizeof(Py_ssize_t))
    s.prev = <int *> malloc((n + 1) * sizeof(int))
    s.next = <int *> malloc((n + 1) * sizeof(int))
    s.scratch = <char *> malloc(n + 1)
    if s.start == NULL or s.length == NULL or s.prev == NULL or s.next == NULL or s.scratch == NULL:
        raise MemoryError()
    cdef Py_ssize_t offset = 0, size
    while offset < n:
        size = min(utf8_length(<unsigned char> text[offset]), n - offset)
        s.start[s.count] = offset
        s.length[s.count] = size
        s.prev[s.count] = s.count - 1
        offset += size
        s.next[s.count] = -1 if offset == n else s.count + 1
        s.count += 1
    return 0


cdef void symbols_free(Symbols *s) noexcept:
    free(s.start)
    free(s.length)
    free(s.prev)
    free(s.next)
    free(s.scratch)
    free(s.heap)


cdef inline bint goes_first(const Pair *a, const Pair *b) noexcept nogil:
    return a.priority > b.priority or (a.priority == b.priority and a.left < b.left)


cdef int heap_push(Symbols *s, Pair pair) except -1:
    cdef Pair *grown
    if s.heap_len == s.heap_cap:
        s.heap_cap = 2 * s.heap_cap + 16
        grown = <Pair *> realloc(s.heap, s.heap_cap * sizeof(Pair))
        if grown == NULL:
            raise MemoryError()
        s.heap = grown
    cdef Py_ssize_t i = s.heap_len, parent
    s.heap_len += 1
    while i > 0:
        parent = (i - 1) // 2
        if not goes_first(&pair, &s.heap[parent]):
            break
        s.heap[i] = s.heap[parent]
        i = parent
    s.heap[i] = pair
    return 0


cdef Pair heap_pop(Symbols *s) noexcept:
    cdef Pair top = s.heap[0]
    s.heap_len -= 1
    cdef Pair last = s.heap[s.heap_len]
    cdef Py_ssize_t i = 0, child
    while True:
        child = 2 * i + 1
        if child >= s.heap_len:
            break
        if child + 1 < s.heap_len and goes_first(&s.heap[child + 1], &s.heap[child]):
            child += 1
        if not goes_first(&s.heap[child], &last):
            break
        s.heap[i] = s.heap[child]
        i = child
    if s.heap_len > 0:
        s.heap[i] = last
    return top


cdef enum Scoring:
    BY_SCORE  # SPM: the two symbols together must be a token; its score ranks the pair
    BY_RANK   # BPE: "left right" must be a merge; its rank ranks the pair


cdef int queue_pair(
    Symbols *s, int left, int right, Scoring scoring, StringTable table, const double *scores
) except -1:
    if left < 0 or right < 0:
        return 0
    cdef Py_ssize_t n_left = s.length[left], n_right = s.length[right]
    cdef int32_t found
    cdef Pair pair
    if scoring == BY_SCORE:
        found = table.lookup(s.text + s.start[left], n_left + n_right)
        if found < 0:
            return 0
        pair.priority = scores[found]
    else:
        memcpy(s.scratch, s.text + s.start[left], n_left)
        s.scratch[n_left] = b" "
        memcpy(s.scratch + n_left + 1, s.text + s.start[right], n_right)
        found = table.lookup(s.scratch, n_left + 1 + n_right)
        if found < 0:
            return 0
        pair.priority = -<double> found
    pair.left = left
    pair.right = right
    pair.size = n_left + n_right
    heap_push(s, pair)
    return 0


cdef int merge_all(Symbols *s, Scoring scoring, StringTable table, const double *scores) except -1:
    cdef int i, left, right
    cdef Pair pair
    for i in range(1, s.count):
        queue_pair(s, i - 1, i, scoring, table, scores)
    while s.heap_len > 0:
        pair = heap_pop(s)
        left = pair.left
        right = pair.right
        if s.length[left] == 0 or s.length[right] == 0:
            continue
        if s.length[left] + s.length[right] != pair.size:
            continue
        s.length[left] += s.length[right]
        s.length[right] = 0
        s.next[left] = s.next[right]
        if s.next[right] >= 0:
            s.prev[s.next[right]] = left
        queue_pair(s, s.prev[left], left, scoring, table, scores)
        queue_pair(s, left, s.next[left], scoring, table, scores)
    return 0


# --- the two tokenizers -------------------------------------------------------------------------

def spm_encode(
    bytes text, StringTable tokens, const double[::1] scores, const int32_t[::1] byte_tokens
):
    """Token ids of one text fragment (spaces already escaped), as llm_tokenizer_spm_session.

    `byte_tokens[b]` is the token of byte b (<0xXX>, else the byte itself), or -1 if none.
    """
    cdef Symbols s
    cdef Py_ssize_t n = PyBytes_GET_SIZE(text), j
    cdef const unsigned char *raw = <const unsigned char *> PyBytes_AS_STRING(text)
    cdef int i
    cdef int32_t found
    cdef list out = []
    symbols_init(&s, PyBytes_AS_STRING(text), n)
    try:
        merge_all(&s, BY_SCORE, tokens, &scores[0] if scores.shape[0] else NULL)
        i = 0 if s.count else -1
        while i != -1:
            found = tokens.lookup(s.text + s.start[i], s.length[i])
            if found >= 0:
                out.append(found)
            else:
                for j in range(s.start[i], s.start[i] + s.length[i]):
                    if byte_tokens[raw[j]] < 0:
                        raise TokenizerError(
                            f"the vocabulary has no token for byte 0x{raw[j]:02X} "
                            "(no <0x..> byte tokens to fall back on)"
                        )
                    out.append(byte_tokens[raw[j]])
            i = s.next[i]
    finally:
        symbols_free(&s)
    return out


def bpe_encode(
    list words,
    StringTable tokens,
    StringTable merges,
    const int32_t[::1] byte_tokens,
    bint ignore_merges,
    bint whole_newlines,
):
    """Token ids of pre-tokenized words (bytes, already in the vocabulary's alphabet), as
    llm_tokenizer_bpe_session.

    `merges` maps b"left right" to the merge's rank. `ignore_merges`: a word that is a token is
    taken whole. `whole_newlines`: so is a word of newlines only (Gemma 4). A symbol that is no
    token becomes `byte_tokens[b]` for each of its bytes, and bytes without one are dropped, as
    in llama.cpp.
    """
    cdef Symbols s
    cdef bytes word
    cdef Py_ssize_t n, j
    cdef const unsigned char *raw
    cdef int i
    cdef int32_t found
    cdef list out = []
    for word in words:
        n = PyBytes_GET_SIZE(word)
        raw = <const unsigned char *> PyBytes_AS_STRING(word)
        if ignore_merges or (whole_newlines and not word.strip(b"\n")):
            found = tokens.lookup(<const char *> raw, n)
            if found >= 0:
                out.append(found)
                continue
        symbols_init(&s, <const char *> raw, n)
        try:
            merge_all(&s, BY_RANK, merges, NULL)
            i = 0 if s.count else -1
            while i != -1:
                found = tokens.lookup(s.text + s.start[i], s.length[i])
                if found >= 0:
                    out.append(found)
                else:
                    for j in range(s.start[i], s.start[i] + s.length[i]):
                        if byte_tokens[raw[j]] >= 0:
                            out.append(byte_tokens[raw[j]])
                i = s.next[i]
        finally:
            symbols_free(&s)
    return out


def wpm_encode(list words, StringTable tokens, Py_ssize_t max_token_len, int32_t unknown):
    """Token ids of words (bytes, each led by U+2581), as llm_tokenizer_wpm_session: the longest
    token at each position, left to right; a word with a part that no token covers becomes the
    unknown token as a whole."""
    cdef bytes word
    cdef const char *text
    cdef Py_ssize_t n, i, j, start
    cdef int32_t found
    cdef list out = []
    for word in words:
        text = PyBytes_AS_STRING(word)
        n = PyBytes_GET_SIZE(word)
        start = len(out)
        i = 0
        while i < n:
            found = -1
            j = min(n, i + max_token_len + 1)
            while j > i:
                found = tokens.lookup(text + i, j - i)
                if found >= 0:
                    break
                j -= 1
            if found < 0:
                del out[start:]
                break
            out.append(found)
            i = j
        if len(out) == start:
            if unknown < 0:
                raise TokenizerError("the vocabulary has no unknown token for a word it cannot spell")
            out.append(unknown)
    return out
