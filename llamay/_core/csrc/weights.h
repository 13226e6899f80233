/* Weights at load: the packed copies some matmul kernels read (matmul.h), laid out in one
   2 MiB-aligned region that asks for transparent huge pages (decode streams every weight once
   per token, and huge pages lift that bandwidth), and the file's pages handed back as each
   matrix is packed, so that a packed matrix is not resident twice. */
#ifndef LLAMAY_WEIGHTS_H
#define LLAMAY_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "matmul.h"

#define LLAMAY_HUGE_PAGE ((size_t)2 << 20)

/* Bytes of w's copy in the huge-page region, rounded up to 64: its packed layout, or its
   bytes as they are where its kernel reads the file's layout. */
size_t llamay_copy_bytes(const llamay_weight *w);

/* n bytes (rounded up to whole huge pages), 2 MiB-aligned and advised to use huge pages; free()
   them. NULL when memory runs out. */
uint8_t *llamay_huge_alloc(size_t n);

/* Packs w into dest (llamay_copy_bytes(w) bytes) and sets w->packed, or where its kernel
   reads the file's layout, copies it there and points w->data at the copy; threads split
   rows. The file pages that were read are dropped from this process as it goes (they stay in
   the page cache, and the file's mapping reads them back on demand). */
void llamay_copy_weight(llamay_weight *w, uint8_t *dest, int n_threads);

#endif
