/* A byte-level pushdown recognizer for compiled grammars, run as a lazily built DFA over sets of
 * stacks, and the token-trie walk that turns the current set into a vocabulary mask.
 *
 * A compiled grammar is a flat element array: each rule's alternatives are runs of elements ended
 * by GM_END. An element >= 0 is a terminal (the index of a 256-bit byte set); an element <= -2 is
 * a reference to rule (-2 - element). Every stack is interned as a node (position, parent), node 0
 * being the empty stack (the text so far is complete). Sets of stacks are interned too, and each
 * (set, byte) transition is computed once and cached, so a mask over a big vocabulary costs one
 * table lookup per trie node it visits.
 */
#ifndef LLAMAY_GRAMMAR_H
#define LLAMAY_GRAMMAR_H

#include <stdint.h>

#define GM_END (-1)
#define GM_DEAD (-2)
#define GM_NOMEM (-3)

typedef struct gm_engine gm_engine;

typedef struct {
    const int32_t *elems;     /* the element array; the last element is GM_END */
    const int32_t *rule_off;  /* rule r's alternatives are alt_start[rule_off[r] .. rule_off[r+1]) */
    const int32_t *alt_start; /* the element position where each alternative begins */
    const uint8_t *bitsets;   /* 32 bytes per terminal; bit b of byte b/8 set = byte b matches */
    int32_t root;
} gm_grammar;

/* Tokens ordered by their bytes, as a trie laid out in pre-order: node i packs the byte that
 * leads to it and its depth (>= 1) as byte | depth << 8, end[i] is the index just past its
 * subtree, and tokens[tok_off[i] .. tok_off[i + 1]) end there. */
typedef struct {
    int32_t n_nodes;
    int32_t max_depth;
    const uint32_t *node;
    const int32_t *end;
    const int32_t *tok_off;
    const int32_t *tokens;
} gm_trie;

gm_engine *gm_new(const gm_grammar *grammar);
void gm_free(gm_engine *e);

/* The set of stacks before any byte; GM_NOMEM when out of memory. */
int32_t gm_initial(gm_engine *e);
/* The set after `byte`: a set id, GM_DEAD when no stack accepts it, or GM_NOMEM. */
int32_t gm_step(gm_engine *e, int32_t set, uint8_t byte);
int gm_can_end(const gm_engine *e, int32_t set);
int gm_must_end(const gm_engine *e, int32_t set);
int32_t gm_n_sets(const gm_engine *e);
/* Forget every cached set and node except `keep`; returns its new id (or GM_NOMEM). */
int32_t gm_compact(gm_engine *e, int32_t keep);

/* Sets mask[token] = 1 for every trie token whose bytes keep `set` alive; 0 or GM_NOMEM. */
int gm_mask(gm_engine *e, int32_t set, const gm_trie *trie, uint8_t *mask);

/* Builds the trie of n tokens already sorted by their bytes (token k: data[off[k] .. off[k+1]),
 * id ids[k], non-empty). `node` and `end` hold at least off[n] - off[0] entries, tok_off one more;
 * `tokens` n. Returns the node count and writes the deepest depth to *max_depth. */
int32_t gm_trie_build(int32_t n, const uint8_t *data, const int64_t *off, const int32_t *ids,
                      uint32_t *node, int32_t *end, int32_t *tok_off, int32_t *tokens,
                      int32_t *max_depth);

#endif
