/* Packing weights at load (weights.h). */
#include "weights.h"

#include <stdlib.h>
#include <string.h>

#include "threads.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

size_t llamay_copy_bytes(const llamay_weight *w) {
    const size_t bytes =
        w->packed_row_bytes ? llamay_packed_bytes(w) : w->row_bytes * (size_t)w->n_rows;
    return (bytes + 63) / 64 * 64;
}

uint8_t *llamay_huge_alloc(size_t n) {
    const size_t size = (n + LLAMAY_HUGE_PAGE - 1) / LLAMAY_HUGE_PAGE * LLAMAY_HUGE_PAGE;
    uint8_t *p = aligned_alloc(LLAMAY_HUGE_PAGE, size ? size : LLAMAY_HUGE_PAGE);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p != NULL) {
        madvise(p, size, MADV_HUGEPAGE); /* advice: failure costs only speed */
    }
#endif
    return p;
}

/* Drops the whole 4 KiB pages inside [p, p + n), which must lie in a read-only file mapping,
   from this process: they stay in the page cache, and the mapping reads them back on demand. */
static void release_file_pages(const uint8_t *p, size_t n) {
#if defined(__linux__) && defined(MADV_DONTNEED)
    const uintptr_t page = 4096, begin = ((uintptr_t)p + page - 1) & ~(page - 1);
    const uintptr_t end = ((uintptr_t)p + n) & ~(page - 1);
    if (end > begin) {
        madvise((void *)begin, end - begin, MADV_DONTNEED);
    }
#else
    (void)p, (void)n;
#endif
}

typedef struct {
    llamay_weight *w;
    uint8_t *dest;
    int r0, r1;
} copy_job;

/* Thread i's share of rows [r0, r1): packed, or copied as they are. */
static void copy_rows(void *arg, int i, int n) {
    const copy_job *job = arg;
    const llamay_weight *w = job->w;
    int begin, end;
    llamay_thread_share(job->r1 - job->r0, 1, i, n, &begin, &end);
    begin += job->r0;
    end += job->r0;
    if (w->packed_row_bytes) {
        llamay_weight_pack(w, job->dest, begin, end);
    } else if (end > begin) {
        memcpy(job->dest + (size_t)begin * w->row_bytes, w->data + (size_t)begin * w->row_bytes,
               (size_t)(end - begin) * w->row_bytes);
    }
}

void llamay_copy_weight(llamay_weight *w, uint8_t *dest, int n_threads) {
    /* a few MiB of the file at a time, so that the file pages and the copy never both hold the
       whole matrix */
    const int chunk_rows = (int)((4u << 20) / (w->row_bytes ? w->row_bytes : 1)) + 1;
    for (int r0 = 0; r0 < w->n_rows; r0 += chunk_rows) {
        const int r1 = r0 + chunk_rows < w->n_rows ? r0 + chunk_rows : w->n_rows;
        copy_job job = {w, dest, r0, r1};
        llamay_parallel(n_threads, copy_rows, &job);
        release_file_pages(w->data + (size_t)r0 * w->row_bytes, (size_t)(r1 - r0) * w->row_bytes);
    }
    if (w->packed_row_bytes) {
        w->packed = dest;
    } else {
        w->data = dest;
    }
}
