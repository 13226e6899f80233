/* Decode attention of two builds of the attention kernels, step by step in turn, on one KV arena.

A shared machine's speed moves by more than a kernel change, also between runs seconds apart; a
step of build A and then one of build B see about the same machine. One step is one token's
attention over every layer and KV head of the Llama-3.2-1B shape (16 layers, 8 KV heads of 64,
4 query heads each, fp16 KV in pages of 32 positions taken in order, laid out as csrc/pages.h
lays out the engine's, 2 MiB pages asked for as the engine does). Both builds must give the
same output bits; the program says whether they did. Both must also lay out pages as this
file's csrc/pages.h does (its struct is filled here). Built and run by `bench/ab.py attention`,
which names the two builds kern_A and kern_B and reads what this prints: a line a step pair,
"step N: A SECONDS B SECONDS", then "output bits the same|DIFFERENT; kernels SET".

    attention_ab DEPTH STEPS [hot] [stream] [shuffled] [runs]

hot: every position on the first page (in cache), the arithmetic alone.
stream: before each layer's attention, 50 MB of other memory is read (untimed), as a decode
step reads a layer's weights between two layers' attention. Without it the KV bytes of one
step can stay in a large last-level cache for the next: on a Xeon with a 480 MB L3 the
attention took 8.7 ms a step without it once, 12.4 with it, as in the engine.
shuffled: the pages in a shuffled order, as in an arena whose pages have been freed and taken
again many times. runs: the whole arena one group, so that each (layer, KV head)'s blocks of
every page are one run of bytes.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fp16.h"
#include "kernels.h"

const llamay_kernels *kern_A(void);
const llamay_kernels *kern_B(void);

/* GROUP_PAGES: the most pages llamay/_core/pages.pyx puts in a group of these 4 KiB blocks;
   with 64 pages a group, a depth of 4,096 (128 pages) splits as the engine would split it */
enum { LAYERS = 16, KV_HEADS = 8, HEAD_DIM = 64, GROUP = 4, PAGE = 32, GROUP_PAGES = 64 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static float normal(void) { /* Box-Muller */
    const double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = rand() / (RAND_MAX + 1.0);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DEPTH STEPS [hot] [stream] [shuffled] [runs]\n", argv[0]);
        return 2;
    }
    const int depth = atoi(argv[1]), steps = atoi(argv[2]);
    int hot = 0, stream = 0, shuffled = 0, runs = 0;
    for (int i = 3; i < argc; i++) {
        int *option = strcmp(argv[i], "hot") == 0        ? &hot
                      : strcmp(argv[i], "stream") == 0   ? &stream
                      : strcmp(argv[i], "shuffled") == 0 ? &shuffled
                      : strcmp(argv[i], "runs") == 0     ? &runs
                                                         : NULL;
        if (option == NULL) {
            fprintf(stderr, "unknown option %s: hot, stream, shuffled or runs\n", argv[i]);
            return 2;
        }
        *option = 1;
    }
    shuffled &= !hot;
    if (depth < 1 || steps < 1 || steps > 4096) {
        fprintf(stderr, "DEPTH must be at least 1, STEPS 1 to 4096\n");
        return 2;
    }
    const int n_pages = (depth + PAGE - 1) / PAGE;
    llamay_pages kv = {0};
    kv.row_bytes = HEAD_DIM * 2;
    kv.head_bytes = PAGE * kv.row_bytes;
    kv.page_bytes = LAYERS * 2 * KV_HEADS * kv.head_bytes;
    kv.group_pages = runs ? n_pages : GROUP_PAGES;
    kv.group_bytes = kv.group_pages * kv.page_bytes;
    kv.n_pages = n_pages, kv.n_layers = LAYERS, kv.n_kv_heads = KV_HEADS;
    kv.head_dim = HEAD_DIM, kv.page_tokens = PAGE, kv.type = LLAMAY_KV_F16;
    const size_t n_groups = (size_t)(n_pages + kv.group_pages - 1) / kv.group_pages;
    const size_t huge = 2u << 20, used = n_groups * kv.group_bytes;
    const size_t bytes = (used + huge - 1) & ~(huge - 1);
    kv.base = aligned_alloc(huge, bytes);
    madvise(kv.base, bytes, MADV_HUGEPAGE);
    srand(1);
    uint16_t *x = (uint16_t *)kv.base;
    for (size_t i = 0; i < used / 2; i++) x[i] = llamay_fp32_to_fp16(normal());
    /* stream: a layer's weights, read between two layers' attention */
    enum { LAYER_WEIGHTS = 50 << 20, WEIGHTS = 16 * LAYER_WEIGHTS };
    uint64_t *weights = NULL, weights_sum = 0;
    size_t next_layer = 0;
    if (stream) {
        weights = aligned_alloc(huge, WEIGHTS);
        madvise(weights, WEIGHTS, MADV_HUGEPAGE);
        memset(weights, 1, WEIGHTS);
    }
    int32_t *pages = malloc((size_t)n_pages * sizeof *pages);
    for (int i = 0; i < n_pages; i++) pages[i] = hot ? 0 : i;
    for (int i = n_pages - 1; i > 0 && shuffled; i--) {
        const int j = rand() % (i + 1), t = pages[i];
        pages[i] = pages[j], pages[j] = t;
    }
    float q[GROUP * HEAD_DIM], out[2][GROUP * HEAD_DIM];
    for (int i = 0; i < GROUP * HEAD_DIM; i++) q[i] = normal();

    const llamay_kernels *builds[2] = {kern_A(), kern_B()};
    int same = 1;
    for (int r = 0; r < 2 * steps; r++) {
        const int b = r % 2;
        double seconds = 0;
        for (int layer = 0; layer < LAYERS; layer++) {
            if (stream) {
                const uint64_t *w = weights + next_layer * (LAYER_WEIGHTS / sizeof *weights);
                for (size_t i = 0; i < LAYER_WEIGHTS / sizeof *weights; i++) weights_sum += w[i];
                next_layer = (next_layer + 1) % (WEIGHTS / LAYER_WEIGHTS);
            }
            const double started = now();
            for (int head = 0; head < KV_HEADS; head++) {
                const llamay_attention a = {
                    .kv = &kv, .page_table = pages, .layer = layer, .kv_head = head,
                    .n_q = GROUP, .pos = depth - 1, .scale = 0.125f, .q = q, .out = out[b]};
                builds[b]->attention(&a);
            }
            seconds += now() - started;
        }
        if (b == 0) {
            printf("step %d: A %.9f", r / 2 + 1, seconds);
        } else {
            printf(" B %.9f\n", seconds);
            same &= memcmp(out[0], out[1], sizeof out[0]) == 0;
        }
    }
    printf("output bits %s; kernels %s\n", same ? "the same" : "DIFFERENT", builds[0]->name);
    if (weights_sum == 1) printf("\n"); /* the weights' reads are not dead code */
    return same ? 0 : 1;
}
