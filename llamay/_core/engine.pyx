# cython: language_level=3, annotation_typing=False
"""The forward step, from Python: the CPU backend's executor (llamay/backends/cpu.py).

`Engine` binds a model's blocks (llamay.models.spec.ModelSpec) to the C model descriptor of
csrc/forward.h (declared once in forward.pxd), packs the weights whose kernels read a packed
copy, owns the scratch buffers, and runs each step over the pages of a PageMemory in one C call
without the GIL. Single kernels, for tests and for scoring, are wrapped by llamay._core.kernels.

Kernel sets: 'reference' (plain C), 'avx2', 'avx512', 'neon', or 'best' (the fastest this CPU
runs; csrc/kernel_set.h). Every set gives the same bits; the matmul and the other kernels use the
same set.
"""

import os

import numpy as np

from libc.errno cimport EINTR, EIO, errno
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset
from posix.unistd cimport close, pread

from llamay._core.forward cimport *
from llamay._core.kernel_sets cimport kernel_set_names, kernel_set_of, usable_kernel_sets
from llamay._core.pages cimport PageMemory, llamay_pages

from llamay.errors import LlamayError, UnsupportedModel


QK_NORMS = {
    "none": LLAMAY_QK_NORM_NONE,
    "head": LLAMAY_QK_NORM_HEAD,
    "projection": LLAMAY_QK_NORM_PROJECTION,
}
NORMS = {"rms": LLAMAY_NORM_RMS, "layer": LLAMAY_NORM_LAYER}
GATINGS = {"softmax": LLAMAY_GATING_SOFTMAX, "softmax_weight": LLAMAY_GATING_SOFTMAX_WEIGHT}
ACTIVATIONS = {"silu": LLAMAY_SILU, "gelu_tanh": LLAMAY_GELU_TANH, "swiglu_oai": LLAMAY_SWIGLU_OAI}


def kernel_sets() -> list:
    """The kernel sets this build has and this CPU runs, slowest first ('reference' first)."""
    return usable_kernel_sets()


# ---- the engine ----

cdef class Engine:
    """A model bound for forward steps of up to max_tokens tokens over the pages of `memory`.

    threads: the threads of each step (and of packing at load).
    """

    cdef llamay_model c
    cdef llamay_layer *layers
    cdef llamay_moe *moes  # one per layer (unused for dense layers)
    cdef llamay_weight *expert_weights  # every expert's matrix of every layer
    cdef int n_expert_weights
    cdef llamay_scratch *scratch
    cdef uint8_t *packed
    cdef PageMemory memory
    cdef readonly int threads
    cdef readonly int max_tokens
    cdef readonly str kernels
    cdef readonly size_t packed_bytes  # the huge-page region of the weight matrices
    cdef readonly size_t scratch_bytes
    # Where the token table is read from its file (a row per token into embd_rows, with
    # pread): embd_fd -1 where the table is in memory.
    cdef int embd_fd
    cdef int64_t embd_start
    cdef size_t embd_row_bytes
    cdef uint8_t *embd_rows
    cdef list _keep  # the arrays the C descriptor points into

    def __cinit__(self, spec, PageMemory memory not None, int threads, int max_tokens,
                  str kernels="best"):
        cdef int kernel_set = kernel_set_of(kernels)
        cdef int il
        cdef llamay_layer *l
        if threads < 1 or max_tokens < 1:
            raise ValueError(
                f"threads and max_tokens must be positive, not {threads} and {max_tokens}"
            )
        hp = spec.hparams
        _check_shape(spec, memory)
        self.memory = memory
        self.threads = threads
        self.max_tokens = max_tokens
        self.kernels = kernel_set_names()[kernel_set]
        self._keep = []
        memset(&self.c, 0, sizeof(self.c))
        self.embd_fd = -1
        self.layers = <llamay_layer *>calloc(hp.n_layer, sizeof(llamay_layer))
        self.moes = <llamay_moe *>calloc(hp.n_layer, sizeof(llamay_moe))
        self.n_expert_weights = sum(3 * layer.moe.n_expert for layer in spec.layers if layer.moe)
        self.expert_weights = <llamay_weight *>calloc(max(1, self.n_expert_weights),
                                                      sizeof(llamay_weight))
        if self.layers == NULL or self.moes == NULL or self.expert_weights == NULL:
            raise MemoryError()
        cdef llamay_weight *next_experts = self.expert_weights

        c = &self.c
        c.n_embd = hp.n_embd
        c.n_layer = hp.n_layer
        c.n_vocab = spec.n_vocab
        c.head_dim = spec.head_dim
        c.activation = ACTIVATIONS[spec.activation]
        c.norm = NORMS[spec.norm]
        c.norm_eps = hp.norm_eps
        c.attn_scale = hp.attn_scale
        c.attn_softcap = hp.attn_softcap
        c.final_softcap = hp.final_softcap
        c.embd_scale = spec.embd_scale
        c.logit_scale = spec.logit_scale
        c.tok_embd = self._bytes(spec.token_embd.data)
        c.tok_embd_type = spec.token_embd.type_id
        c.output_norm = self._floats(spec.output_norm)
        self._linear(&c.output, spec.output, kernel_set)
        c.bidirectional = not spec.causal
        c.type_embd = self._floats(spec.type_embd)
        if spec.pos_embd is not None:
            c.pos_embd = self._bytes(spec.pos_embd.data)
            c.pos_embd_type = spec.pos_embd.type_id
            c.n_pos = spec.pos_embd.shape[1]
        if spec.embd_norm is not None:
            c.embd_norm = self._floats(spec.embd_norm[0])
            c.embd_norm_b = self._floats(spec.embd_norm[1])
        c.n_ropes = len(spec.ropes)
        for r, rope in enumerate(spec.ropes):
            self._rope(&c.ropes[r], rope)
        for il, layer in enumerate(spec.layers):
            l = &self.layers[il]
            l.attn_norm = self._floats(layer.attn_norm)
            l.fused_qkv = layer.fused_qkv
            self._linear(&l.q, layer.q, kernel_set)
            if not layer.fused_qkv:
                self._linear(&l.k, layer.k, kernel_set)
                self._linear(&l.v, layer.v, kernel_set)
            l.qk_norm = QK_NORMS[layer.qk_norm]
            l.q_norm = self._floats(layer.q_norm)
            l.k_norm = self._floats(layer.k_norm)
            self._linear(&l.o, layer.o, kernel_set)
            l.post_attn_norm = self._floats(layer.post_attn_norm)
            l.ffn_norm = self._floats(layer.ffn_norm)
            l.has_ffn = layer.has_ffn
            l.fused_gate_up = layer.fused_gate_up
            if layer.gate is not None:
                self._linear(&l.gate, layer.gate, kernel_set)
            if layer.has_ffn:
                self._linear(&l.up, layer.up, kernel_set)
                self._linear(&l.down, layer.down, kernel_set)
            l.post_ffn_norm = self._floats(layer.post_ffn_norm)
            if layer.moe is not None:
                next_experts = self._moe(&self.moes[il], layer.moe, kernel_set, next_experts)
                l.moe = &self.moes[il]
            l.n_head = layer.n_head
            l.n_head_kv = layer.n_head_kv
            l.n_ff = layer.n_ff
            l.window = layer.window
            l.rope = layer.rope
            l.residual_scale = layer.residual_scale
            l.parallel = layer.parallel
            l.sinks = self._floats(layer.sinks)
            if layer.attn_out_norm is not None:
                l.attn_out_norm = self._floats(layer.attn_out_norm[0])
                l.attn_out_norm_b = self._floats(layer.attn_out_norm[1])
            if layer.layer_out_norm is not None:
                l.layer_out_norm = self._floats(layer.layer_out_norm[0])
                l.layer_out_norm_b = self._floats(layer.layer_out_norm[1])
            l.plain_ffn = not layer.gated
        c.layers = self.layers
        c.kernels = llamay_kernels_of(kernel_set)

        self._pack()
        if spec.output.tensor is spec.token_embd and not c.output.w.packed_row_bytes:
            c.tok_embd = c.output.w.data  # tied, and copied as it is: read the copy
        elif spec.token_embd.span is not None:  # a file's tensor: its data views the mapping
            # Read a row per token from the file, not through the mapping: each row touched
            # there would map the 64 KiB around it, tens of MB over a long prompt beside the
            # table's packed copy (tied) or for good (untied).
            self.embd_row_bytes = spec.token_embd.nbytes // spec.n_vocab
            self.embd_start = spec.token_embd.span.start
            self.embd_rows = <uint8_t *>malloc(max_tokens * self.embd_row_bytes)
            if self.embd_rows == NULL:
                raise MemoryError()
            self.embd_fd = spec.token_embd.span.open()
        self.scratch_bytes = llamay_scratch_bytes(c, max_tokens)
        self.scratch = llamay_scratch_new(c, max_tokens)
        if self.scratch == NULL:
            raise MemoryError(f"cannot allocate {self.scratch_bytes} bytes of scratch buffers")

    def __dealloc__(self):
        self._free()

    cdef void _free(self):
        llamay_scratch_free(self.scratch)
        free(self.packed)
        free(self.layers)
        free(self.moes)
        free(self.expert_weights)
        free(self.embd_rows)
        if self.embd_fd >= 0:
            close(self.embd_fd)
        self.embd_fd = -1
        self.embd_rows = NULL
        self.scratch = NULL
        self.packed = NULL
        self.layers = NULL
        self.moes = NULL
        self.expert_weights = NULL

    cdef const uint8_t *_bytes(self, const uint8_t[::1] data) except NULL:
        self._keep.append(data)
        return &data[0]

    cdef const float *_floats(self, object array) except? NULL:
        if array is None:
            return NULL
        cdef const float[::1] view = np.ascontiguousarray(array, dtype=np.float32)
        self._keep.append(view)
        return &view[0]

    cdef int _linear(self, llamay_linear *l, object lin, int kernel_set) except -1:
        cdef const uint8_t[::1] data = lin.tensor.data
        status = llamay_weight_init(&l.w, &data[0], lin.tensor.type_id, lin.n_rows, lin.n_cols,
                                    kernel_set)
        if status != 0:
            raise UnsupportedModel(
                f"{lin.name}: no matrix multiplication for {lin.tensor.type} weights of "
                f"{lin.n_cols} columns"
            )
        if l.w.row_bytes * <size_t>lin.n_rows != <size_t>data.shape[0]:
            raise ValueError(f"{lin.name}: {data.shape[0]} bytes for {lin.n_rows} rows")
        self._keep.append(data)
        l.bias = self._floats(lin.bias)
        return 0

    cdef llamay_weight *_moe(self, llamay_moe *e, object moe, int kernel_set,
                             llamay_weight *weights) except NULL:
        """Fills e from a spec Moe; the experts' matrices take 3 * n_expert of `weights`,
        and the rest is returned."""
        if not 0 < moe.n_used <= moe.n_expert <= LLAMAY_MAX_EXPERTS:
            raise UnsupportedModel(
                f"{moe.router.name}: {moe.n_used} of {moe.n_expert} experts (llamay runs up "
                f"to {LLAMAY_MAX_EXPERTS})"
            )
        cdef int n_expert = moe.n_expert
        e.n_expert = n_expert
        e.n_used = moe.n_used
        e.gating = GATINGS[moe.gating]
        e.normalize = moe.normalize
        e.activation = ACTIVATIONS[moe.activation]
        self._linear(&e.router, moe.router, kernel_set)
        if moe.shared_gate is not None:
            self._linear(&e.shared_gate, moe.shared_gate, kernel_set)
        self._experts(&e.gate, moe.gate, kernel_set, weights)
        self._experts(&e.up, moe.up, kernel_set, weights + n_expert)
        self._experts(&e.down, moe.down, kernel_set, weights + 2 * n_expert)
        return weights + 3 * n_expert

    cdef int _experts(self, llamay_experts *x, object lin, int kernel_set,
                      llamay_weight *weights) except -1:
        """One llamay_weight per expert, each pointing at its matrix in the tensor (where
        packing copies it from, expert by expert)."""
        cdef const uint8_t[::1] data = lin.tensor.data
        cdef size_t expert_bytes = <size_t>data.shape[0] // <size_t>lin.n_expert
        cdef int i
        for i in range(lin.n_expert):
            status = llamay_weight_init(&weights[i], &data[0] + i * expert_bytes,
                                        lin.tensor.type_id, lin.n_rows, lin.n_cols, kernel_set)
            if status != 0:
                raise UnsupportedModel(
                    f"{lin.name}: no matrix multiplication for {lin.tensor.type} weights of "
                    f"{lin.n_cols} columns"
                )
        if weights[0].row_bytes * <size_t>lin.n_rows * <size_t>lin.n_expert != <size_t>data.shape[0]:
            raise ValueError(
                f"{lin.name}: {data.shape[0]} bytes for {lin.n_expert} experts of {lin.n_rows} rows"
            )
        self._keep.append(data)
        x.w = weights
        x.bias = self._floats(None if lin.bias is None else lin.bias.reshape(-1))
        return 0

    cdef int _rope(self, llamay_rope *out, object rope) except -1:
        cdef llamay_rope_params p
        rope_params(&p, rope, self._floats(rope.freq_factors))
        if llamay_rope_init(out, &p) != 0:
            raise UnsupportedModel(
                f"RoPE over {rope.n_rot} dimensions is not supported "
                f"(at most {2 * LLAMAY_ROPE_MAX_PAIRS}, and an even number)"
            )
        return 0

    cdef int _pack(self) except -1:
        """Copies every weight matrix into one huge-page region: packed where its kernel reads
        a packed layout, as it is otherwise (decode streams them all once per token). Each
        matrix's file pages are dropped as it is copied (weights.c), so that no weight is ever
        held twice: a mixture-of-experts file of 17 GB takes 17 GB, not 34."""
        cdef int n = 1 + 9 * self.c.n_layer + self.n_expert_weights, i, il, k = 0
        cdef llamay_weight **all = <llamay_weight **>malloc(n * sizeof(llamay_weight *))
        cdef llamay_layer *l
        cdef size_t total = 0, offset = 0
        if all == NULL:
            raise MemoryError()
        try:
            all[k] = &self.c.output.w
            k += 1
            for il in range(self.c.n_layer):
                l = &self.layers[il]
                all[k + 0] = &l.q.w
                all[k + 1] = &l.k.w
                all[k + 2] = &l.v.w
                all[k + 3] = &l.o.w
                all[k + 4] = &l.gate.w
                all[k + 5] = &l.up.w
                all[k + 6] = &l.down.w
                all[k + 7] = &self.moes[il].router.w
                all[k + 8] = &self.moes[il].shared_gate.w
                k += 9
            for i in range(self.n_expert_weights):
                all[k] = &self.expert_weights[i]
                k += 1
            for i in range(n):  # unused slots (fused projections, dense layers) are 0 bytes
                total += llamay_copy_bytes(all[i])
            self.packed_bytes = total
            if total == 0:
                return 0
            self.packed = llamay_huge_alloc(total)
            if self.packed == NULL:
                raise MemoryError(f"cannot allocate {total} bytes for the packed weights")
            for i in range(n):
                if all[i].n_rows:
                    with nogil:
                        llamay_copy_weight(all[i], self.packed + offset, self.threads)
                    offset += llamay_copy_bytes(all[i])
        finally:
            free(all)
        return 0

    cdef int _read_embd_rows(self, int n, const int32_t *tokens) noexcept nogil:
        """Tokens' rows of the table into embd_rows, from the file; 0, or an errno value."""
        cdef size_t size = self.embd_row_bytes, done
        cdef ssize_t got
        cdef int i
        for i in range(n):
            done = 0
            while done < size:
                got = pread(self.embd_fd, self.embd_rows + <size_t>i * size + done, size - done,
                            self.embd_start + <int64_t>tokens[i] * <int64_t>size + <int64_t>done)
                if got > 0:
                    done += got
                elif got == 0:  # the file was cut short under the model
                    return EIO
                elif errno != EINTR:
                    return errno
        return 0

    @property
    def n_vocab(self) -> int:
        return self.c.n_vocab

    def close(self) -> None:
        """Frees the packed weights and the scratch buffers; the engine refuses steps after."""
        self._free()

    def step(self, const int32_t[::1] tokens, const int32_t[::1] positions,
             const int32_t[::1] sequence, list page_tables, const int32_t[::1] logit_tokens,
             float[:, ::1] logits, bint hidden=False):
        """One forward step.

        tokens[i] at positions[i] belongs to sequence[i], whose pages are page_tables[sequence[i]]
        (int32 arrays of page ids, in position order). Writes the logits of tokens
        logit_tokens[j] into logits[j] (shape (len(logit_tokens), n_vocab)); with hidden, their
        final-normed hidden states instead (shape (len(logit_tokens), n_embd)).
        """
        if self.scratch == NULL:
            raise LlamayError("this model is closed")
        cdef int n = tokens.shape[0], n_logits = logit_tokens.shape[0], i, p
        if n == 0:
            return
        if n > self.max_tokens:
            raise ValueError(f"a step takes at most {self.max_tokens} tokens, not {n}")
        if positions.shape[0] != n or sequence.shape[0] != n:
            raise ValueError("tokens, positions and sequence must have the same length")
        cdef int width = self.c.n_embd if hidden else self.c.n_vocab
        if logits.shape[0] != n_logits or logits.shape[1] != width:
            raise ValueError(
                f"logits must have shape ({n_logits}, {width}), not "
                f"({logits.shape[0]}, {logits.shape[1]})"
            )
        for i in range(n_logits):
            if not 0 <= logit_tokens[i] < n:
                raise ValueError(
                    f"logit_tokens[{i}] = {logit_tokens[i]} is not a token of the step"
                )
        cdef const llamay_pages *kv = &self.memory.c
        cdef const int32_t[::1] table
        cdef const int32_t **tables = <const int32_t **>malloc(n * sizeof(int32_t *))
        if tables == NULL:
            raise MemoryError()
        cdef llamay_batch batch
        cdef const int32_t[::1] last
        cdef int status
        try:
            views = [_page_table(t, kv) for t in page_tables]
            for i in range(n):
                if not 0 <= tokens[i] < self.c.n_vocab:
                    raise ValueError(
                        f"token id {tokens[i]} is out of range: the vocabulary has "
                        f"{self.c.n_vocab} tokens"
                    )
                if not 0 <= sequence[i] < len(views):
                    raise ValueError(f"sequence[{i}] = {sequence[i]} has no page table")
                table = views[sequence[i]]
                p = positions[i]
                if p < 0 or p // kv.page_tokens >= table.shape[0]:
                    raise ValueError(
                        f"position {p} has no page: the sequence has {table.shape[0]} pages "
                        f"of {kv.page_tokens} tokens"
                    )
                if self.c.pos_embd != NULL and p >= self.c.n_pos:
                    raise ValueError(
                        f"position {p} is past the model's {self.c.n_pos} learned positions"
                    )
                tables[i] = &table[0]
            if self.c.bidirectional:
                # each token sees its sequence up to the sequence's last position in the step
                seq = np.asarray(sequence)
                ends = np.full(len(page_tables), -1, dtype=np.int64)
                np.maximum.at(ends, seq, np.asarray(positions))
                last = np.ascontiguousarray(ends[seq], dtype=np.int32)
            batch = _batch(n, &tokens[0], &positions[0], tables, n_logits,
                           &logit_tokens[0] if n_logits else NULL,
                           &logits[0, 0] if n_logits else NULL)
            batch.hidden = hidden
            if self.c.bidirectional:
                batch.last_positions = &last[0]
            if self.embd_fd >= 0:
                with nogil:
                    status = self._read_embd_rows(n, &tokens[0])
                if status:
                    raise OSError(status, f"cannot read the token table: {os.strerror(status)}")
                batch.embd_rows = self.embd_rows
            with nogil:
                llamay_forward(&self.c, kv, self.scratch, &batch, self.threads)
        finally:
            free(tables)


cdef llamay_batch _batch(int n, const int32_t *tokens, const int32_t *positions,
                         const int32_t **tables, int n_logits, const int32_t *logit_tokens,
                         float *logits):
    cdef llamay_batch b
    b.n_tokens = n
    b.tokens = tokens
    b.positions = positions
    b.page_tables = tables
    b.n_logits = n_logits
    b.logit_tokens = logit_tokens
    b.logits = logits
    b.hidden = 0
    b.last_positions = NULL
    b.embd_rows = NULL
    return b


cdef object _page_table(object pages, const llamay_pages *kv):
    """pages as a checked int32 view: every id a page of the memory (which ids hold what is the
    state engine's to know; here only that no id reaches outside the memory)."""
    cdef const int32_t[::1] view = pages
    cdef Py_ssize_t i
    for i in range(view.shape[0]):
        if not 0 <= view[i] < kv.n_pages:
            raise ValueError(f"page {view[i]} of a page table is out of range")
    return view


cdef int _check_shape(object spec, PageMemory memory) except -1:
    """What the kernels need of a model and its KV pages, with a reason where they do not."""
    hp = spec.hparams
    d = spec.head_dim
    if d % 16 or d > 1024:
        raise UnsupportedModel(
            f"heads of {d} dimensions: llamay's attention needs a multiple of 16, at most 1024"
        )
    cdef const llamay_pages *kv = &memory.c
    if (kv.n_layers, kv.head_dim) != (hp.n_layer, d) or kv.n_kv_heads < max(hp.n_head_kv):
        raise ValueError(
            f"the KV pages ({kv.n_layers} layers x {kv.n_kv_heads} heads x "
            f"{kv.head_dim}) do not fit the model ({hp.n_layer} x {max(hp.n_head_kv)} x {d})"
        )
    if kv.page_tokens > 64 or kv.page_tokens % 16:
        raise ValueError(f"pages of {kv.page_tokens} tokens: attention tiles take 16 to 64")
    if len(spec.ropes) > LLAMAY_MAX_ROPES:
        raise UnsupportedModel(
            f"{len(spec.ropes)} RoPE configurations (at most {LLAMAY_MAX_ROPES})"
        )
    return 0
