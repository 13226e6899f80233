#include "grammar.h"

#include <stdlib.h>
#include <string.h>

#define UNKNOWN (-1)

struct gm_engine {
    gm_grammar g;

    /* Stacks: node i is (node_pos[i], node_parent[i]); node 0 is the empty stack. */
    int32_t *node_pos, *node_parent;
    int32_t n_nodes, cap_nodes;
    uint64_t *node_keys;
    int32_t *node_ids; /* open addressing; -1 = free */
    uint32_t node_map_cap;

    /* Sets of stacks: sorted node ids, stored one after another in pool. */
    int32_t *pool;
    int64_t pool_len, pool_cap;
    int64_t *set_off;
    int32_t *set_len;
    uint64_t *set_hash;
    int32_t n_sets, cap_sets;
    int32_t *set_ids; /* open addressing; -1 = free */
    uint32_t set_map_cap;
    int32_t *trans; /* cap_sets * 256: the set after each byte, UNKNOWN until computed */

    /* Scratch for one step: the stacks reached, and the (rule, return frame) pairs expanded. */
    int32_t *out;
    int32_t n_out, cap_out;
    int32_t *todo; /* (pos, parent) pairs still to walk */
    int32_t n_todo, cap_todo;
    uint64_t *seen_keys;
    uint32_t *seen_stamp;
    uint32_t seen_cap, seen_n, stamp;

    int nomem;
};

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void *grow(void *p, int64_t n, size_t size, int *nomem) {
    void *q = realloc(p, (size_t)n * size);
    if (!q) *nomem = 1;
    return q;
}

/* --- nodes ------------------------------------------------------------------------------------ */

static int node_map_resize(gm_engine *e, uint32_t cap) {
    uint64_t *keys = malloc(sizeof(uint64_t) * cap);
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    if (!keys || !ids) {
        free(keys);
        free(ids);
        e->nomem = 1;
        return 0;
    }
    memset(ids, 0xff, sizeof(int32_t) * cap);
    for (int32_t i = 1; i < e->n_nodes; i++) {
        uint64_t key = ((uint64_t)(uint32_t)e->node_pos[i] << 32) | (uint32_t)e->node_parent[i];
        uint32_t h = (uint32_t)mix(key) & (cap - 1);
        while (ids[h] >= 0) h = (h + 1) & (cap - 1);
        keys[h] = key;
        ids[h] = i;
    }
    free(e->node_keys);
    free(e->node_ids);
    e->node_keys = keys;
    e->node_ids = ids;
    e->node_map_cap = cap;
    return 1;
}

static void nodes_reset(gm_engine *e) {
    e->n_nodes = 1;
    e->node_pos[0] = -1;
    e->node_parent[0] = -1;
    memset(e->node_ids, 0xff, sizeof(int32_t) * e->node_map_cap);
}

static int32_t intern_node(gm_engine *e, int32_t pos, int32_t parent) {
    uint64_t key = ((uint64_t)(uint32_t)pos << 32) | (uint32_t)parent;
    uint32_t mask = e->node_map_cap - 1;
    uint32_t h = (uint32_t)mix(key) & mask;
    while (e->node_ids[h] >= 0) {
        if (e->node_keys[h] == key) return e->node_ids[h];
        h = (h + 1) & mask;
    }
    if (e->n_nodes == e->cap_nodes) {
        int32_t cap = e->cap_nodes * 2;
        int32_t *p = grow(e->node_pos, cap, sizeof(int32_t), &e->nomem);
        if (p) e->node_pos = p;
        int32_t *q = grow(e->node_parent, cap, sizeof(int32_t), &e->nomem);
        if (q) e->node_parent = q;
        if (e->nomem) return 0;
        e->cap_nodes = cap;
    }
    int32_t id = e->n_nodes++;
    e->node_pos[id] = pos;
    e->node_parent[id] = parent;
    e->node_keys[h] = key;
    e->node_ids[h] = id;
    if ((uint32_t)e->n_nodes * 2 > e->node_map_cap) node_map_resize(e, e->node_map_cap * 2);
    return id;
}

/* --- sets ------------------------------------------------------------------------------------- */

static uint64_t hash_nodes(const int32_t *nodes, int32_t n) {
    uint64_t h = (uint64_t)n;
    for (int32_t i = 0; i < n; i++) h = mix(h ^ (uint32_t)nodes[i]);
    return h;
}

static int set_map_resize(gm_engine *e, uint32_t cap) {
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    if (!ids) {
        e->nomem = 1;
        return 0;
    }
    memset(ids, 0xff, sizeof(int32_t) * cap);
    for (int32_t s = 0; s < e->n_sets; s++) {
        uint32_t h = (uint32_t)e->set_hash[s] & (cap - 1);
        while (ids[h] >= 0) h = (h + 1) & (cap - 1);
        ids[h] = s;
    }
    free(e->set_ids);
    e->set_ids = ids;
    e->set_map_cap = cap;
    return 1;
}

static void sets_reset(gm_engine *e) {
    e->n_sets = 0;
    e->pool_len = 0;
    memset(e->set_ids, 0xff, sizeof(int32_t) * e->set_map_cap);
}

static int32_t intern_set(gm_engine *e, const int32_t *nodes, int32_t n) {
    uint64_t hash = hash_nodes(nodes, n);
    uint32_t mask = e->set_map_cap - 1;
    uint32_t h = (uint32_t)hash & mask;
    while (e->set_ids[h] >= 0) {
        int32_t s = e->set_ids[h];
        if (e->set_hash[s] == hash && e->set_len[s] == n &&
            memcmp(e->pool + e->set_off[s], nodes, sizeof(int32_t) * (size_t)n) == 0)
            return s;
        h = (h + 1) & mask;
    }
    if (e->pool_len + n > e->pool_cap) {
        int64_t cap = e->pool_cap * 2;
        while (cap < e->pool_len + n) cap *= 2;
        int32_t *p = grow(e->pool, cap, sizeof(int32_t), &e->nomem);
        if (!p) return GM_NOMEM;
        e->pool = p;
        e->pool_cap = cap;
    }
    if (e->n_sets == e->cap_sets) {
        int32_t cap = e->cap_sets * 2;
        int64_t *o = grow(e->set_off, cap, sizeof(int64_t), &e->nomem);
        if (o) e->set_off = o;
        int32_t *l = grow(e->set_len, cap, sizeof(int32_t), &e->nomem);
        if (l) e->set_len = l;
        uint64_t *hs = grow(e->set_hash, cap, sizeof(uint64_t), &e->nomem);
        if (hs) e->set_hash = hs;
        int32_t *t = grow(e->trans, (int64_t)cap * 256, sizeof(int32_t), &e->nomem);
        if (t) e->trans = t;
        if (e->nomem) return GM_NOMEM;
        e->cap_sets = cap;
    }
    int32_t s = e->n_sets++;
    memcpy(e->pool + e->pool_len, nodes, sizeof(int32_t) * (size_t)n);
    e->set_off[s] = e->pool_len;
    e->set_len[s] = n;
    e->set_hash[s] = hash;
    e->pool_len += n;
    memset(e->trans + (int64_t)s * 256, 0xff, sizeof(int32_t) * 256);
    e->set_ids[h] = s;
    if ((uint32_t)e->n_sets * 2 > e->set_map_cap) set_map_resize(e, e->set_map_cap * 2);
    return s;
}

/* --- one step ----------------------------------------------------------------------------------- */

static void out_push(gm_engine *e, int32_t node) {
    if (e->n_out == e->cap_out) {
        int32_t *p = grow(e->out, e->cap_out * 2, sizeof(int32_t), &e->nomem);
        if (!p) return;
        e->out = p;
        e->cap_out *= 2;
    }
    e->out[e->n_out++] = node;
}

static void seen_resize(gm_engine *e, uint32_t cap) {
    uint64_t *keys = malloc(sizeof(uint64_t) * cap);
    uint32_t *stamps = calloc(cap, sizeof(uint32_t));
    if (!keys || !stamps) {
        free(keys);
        free(stamps);
        e->nomem = 1;
        return;
    }
    for (uint32_t i = 0; i < e->seen_cap; i++) {
        if (e->seen_stamp[i] != e->stamp) continue;
        uint32_t h = (uint32_t)mix(e->seen_keys[i]) & (cap - 1);
        while (stamps[h] == e->stamp) h = (h + 1) & (cap - 1);
        keys[h] = e->seen_keys[i];
        stamps[h] = e->stamp;
    }
    free(e->seen_keys);
    free(e->seen_stamp);
    e->seen_keys = keys;
    e->seen_stamp = stamps;
    e->seen_cap = cap;
}

/* Whether (rule, frame) is expanded for the first time in this step. Expanding it again would
 * add the same stacks, and through a nullable repetition it would never stop. */
static int first_expansion(gm_engine *e, int32_t rule, int32_t frame) {
    uint64_t key = ((uint64_t)(uint32_t)rule << 32) | (uint32_t)frame;
    uint32_t mask = e->seen_cap - 1;
    uint32_t h = (uint32_t)mix(key) & mask;
    while (e->seen_stamp[h] == e->stamp) {
        if (e->seen_keys[h] == key) return 0;
        h = (h + 1) & mask;
    }
    e->seen_keys[h] = key;
    e->seen_stamp[h] = e->stamp;
    if (++e->seen_n * 2 > e->seen_cap) seen_resize(e, e->seen_cap * 2);
    return 1;
}

static void begin_step(gm_engine *e) {
    e->n_out = 0;
    e->seen_n = 0;
    if (++e->stamp == 0) {
        memset(e->seen_stamp, 0, sizeof(uint32_t) * e->seen_cap);
        e->stamp = 1;
    }
}

/* Pending closures of one step, as (pos, parent) pairs on a stack: a walk without recursion,
 * since a grammar of many nullable or nested references would go deeper than a C stack. */
static void todo_push(gm_engine *e, int32_t pos, int32_t parent) {
    if (e->n_todo + 2 > e->cap_todo) {
        int32_t *p = grow(e->todo, (int64_t)e->cap_todo * 2, sizeof(int32_t), &e->nomem);
        if (!p) return;
        e->todo = p;
        e->cap_todo *= 2;
    }
    e->todo[e->n_todo++] = pos;
    e->todo[e->n_todo++] = parent;
}

/* Expanding (rule, frame) queues its alternatives, last first, so that they are taken in their
 * order: the stacks come out as a depth-first walk would make them. */
static void expand(gm_engine *e, int32_t rule, int32_t frame) {
    if (!first_expansion(e, rule, frame)) return;
    for (int32_t a = e->g.rule_off[rule + 1] - 1; a >= e->g.rule_off[rule]; a--)
        todo_push(e, e->g.alt_start[a], frame);
}

/* Takes the queued (pos, parent) pairs until none is left: each adds the stacks that continue
 * at element `pos` with `parent` below, stopped at a terminal (or empty: the whole text can end
 * here), or queues the alternatives of the rule it expands. */
static void walk(gm_engine *e) {
    while (e->n_todo > 0 && !e->nomem) {
        int32_t parent = e->todo[--e->n_todo];
        int32_t pos = e->todo[--e->n_todo];
        for (;;) {
            int32_t el = e->g.elems[pos];
            if (el >= 0) {
                out_push(e, intern_node(e, pos, parent));
                break;
            }
            if (el == GM_END) {
                if (parent == 0) {
                    out_push(e, 0);
                    break;
                }
                pos = e->node_pos[parent];
                parent = e->node_parent[parent];
                continue;
            }
            /* A reference in tail position needs no frame: that keeps right recursion flat. */
            int32_t ret = pos + 1;
            int32_t frame = e->g.elems[ret] == GM_END ? parent : intern_node(e, ret, parent);
            expand(e, -2 - el, frame);
            break;
        }
    }
    e->n_todo = 0;
}

static void closure(gm_engine *e, int32_t pos, int32_t parent) {
    todo_push(e, pos, parent);
    walk(e);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int32_t finish_step(gm_engine *e) {
    if (e->nomem) return GM_NOMEM;
    if (e->n_out == 0) return GM_DEAD;
    qsort(e->out, (size_t)e->n_out, sizeof(int32_t), cmp_i32);
    int32_t n = 1;
    for (int32_t i = 1; i < e->n_out; i++)
        if (e->out[i] != e->out[n - 1]) e->out[n++] = e->out[i];
    return intern_set(e, e->out, n);
}

static int32_t advance(gm_engine *e, int32_t set, uint8_t byte) {
    begin_step(e);
    int64_t off = e->set_off[set];
    int32_t len = e->set_len[set];
    for (int32_t k = 0; k < len; k++) {
        int32_t node = e->pool[off + k];
        if (node == 0) continue;
        int32_t pos = e->node_pos[node];
        const uint8_t *bits = e->g.bitsets + (int64_t)e->g.elems[pos] * 32;
        if ((bits[byte >> 3] >> (byte & 7)) & 1) closure(e, pos + 1, e->node_parent[node]);
    }
    return finish_step(e);
}

int32_t gm_step(gm_engine *e, int32_t set, uint8_t byte) {
    int32_t next = e->trans[(int64_t)set * 256 + byte];
    if (next != UNKNOWN) return next;
    next = advance(e, set, byte);
    if (next != GM_NOMEM) e->trans[(int64_t)set * 256 + byte] = next;
    return next;
}

int32_t gm_initial(gm_engine *e) {
    begin_step(e);
    expand(e, e->g.root, 0);
    walk(e);
    return finish_step(e);
}

int gm_can_end(const gm_engine *e, int32_t set) {
    return e->set_len[set] > 0 && e->pool[e->set_off[set]] == 0;
}

int gm_must_end(const gm_engine *e, int32_t set) {
    return e->set_len[set] == 1 && e->pool[e->set_off[set]] == 0;
}

int32_t gm_n_sets(const gm_engine *e) { return e->n_sets; }

/* --- lifetime --------------------------------------------------------------------------------- */

gm_engine *gm_new(const gm_grammar *grammar) {
    gm_engine *e = calloc(1, sizeof(gm_engine));
    if (!e) return NULL;
    e->g = *grammar;
    e->cap_nodes = 1024;
    e->node_pos = malloc(sizeof(int32_t) * (size_t)e->cap_nodes);
    e->node_parent = malloc(sizeof(int32_t) * (size_t)e->cap_nodes);
    e->pool_cap = 4096;
    e->pool = malloc(sizeof(int32_t) * (size_t)e->pool_cap);
    e->cap_sets = 64;
    e->set_off = malloc(sizeof(int64_t) * (size_t)e->cap_sets);
    e->set_len = malloc(sizeof(int32_t) * (size_t)e->cap_sets);
    e->set_hash = malloc(sizeof(uint64_t) * (size_t)e->cap_sets);
    e->trans = malloc(sizeof(int32_t) * (size_t)e->cap_sets * 256);
    e->cap_out = 256;
    e->out = malloc(sizeof(int32_t) * (size_t)e->cap_out);
    e->cap_todo = 256;
    e->todo = malloc(sizeof(int32_t) * (size_t)e->cap_todo);
    e->seen_cap = 256;
    e->seen_keys = malloc(sizeof(uint64_t) * e->seen_cap);
    e->seen_stamp = calloc(e->seen_cap, sizeof(uint32_t));
    if (!e->node_pos || !e->node_parent || !e->pool || !e->set_off || !e->set_len ||
        !e->set_hash || !e->trans || !e->out || !e->todo || !e->seen_keys || !e->seen_stamp ||
        !node_map_resize(e, 2048) || !set_map_resize(e, 128)) {
        gm_free(e);
        return NULL;
    }
    nodes_reset(e);
    return e;
}

void gm_free(gm_engine *e) {
    if (!e) return;
    free(e->node_pos);
    free(e->node_parent);
    free(e->node_keys);
    free(e->node_ids);
    free(e->pool);
    free(e->set_off);
    free(e->set_len);
    free(e->set_hash);
    free(e->set_ids);
    free(e->trans);
    free(e->out);
    free(e->todo);
    free(e->seen_keys);
    free(e->seen_stamp);
    free(e);
}

static int32_t reintern(gm_engine *e, const int32_t *old_pos, const int32_t *old_parent,
                        int32_t node) {
    if (node == 0) return 0;
    int32_t parent = reintern(e, old_pos, old_parent, old_parent[node]);
    return intern_node(e, old_pos[node], parent);
}

int32_t gm_compact(gm_engine *e, int32_t keep) {
    int32_t n_nodes = e->n_nodes, len = e->set_len[keep];
    int32_t *old_pos = malloc(sizeof(int32_t) * (size_t)n_nodes);
    int32_t *old_parent = malloc(sizeof(int32_t) * (size_t)n_nodes);
    int32_t *kept = malloc(sizeof(int32_t) * (size_t)(len > 0 ? len : 1));
    if (!old_pos || !old_parent || !kept) {
        free(old_pos);
        free(old_parent);
        free(kept);
        return GM_NOMEM;
    }
    memcpy(old_pos, e->node_pos, sizeof(int32_t) * (size_t)n_nodes);
    memcpy(old_parent, e->node_parent, sizeof(int32_t) * (size_t)n_nodes);
    memcpy(kept, e->pool + e->set_off[keep], sizeof(int32_t) * (size_t)len);
    nodes_reset(e);
    sets_reset(e);
    begin_step(e);
    for (int32_t k = 0; k < len; k++) out_push(e, reintern(e, old_pos, old_parent, kept[k]));
    free(old_pos);
    free(old_parent);
    free(kept);
    return finish_step(e);
}

/* --- the vocabulary mask ---------------------------------------------------------------------- */

int gm_mask(gm_engine *e, int32_t set, const gm_trie *trie, uint8_t *mask) {
    int32_t *state = malloc(sizeof(int32_t) * (size_t)(trie->max_depth + 1));
    if (!state) return GM_NOMEM;
    const uint32_t *node = trie->node;
    const int32_t *end = trie->end, *tok_off = trie->tok_off, *tokens = trie->tokens;
    const int32_t n = trie->n_nodes;
    state[0] = set;
    int32_t i = 0;
    while (i < n) {
        const int32_t depth = (int32_t)(node[i] >> 8);
        const uint8_t byte = (uint8_t)node[i];
        const int32_t from = state[depth - 1];
        int32_t next = e->trans[(int64_t)from * 256 + byte];
        if (next == UNKNOWN) {
            next = gm_step(e, from, byte);
            if (next == GM_NOMEM) {
                free(state);
                return GM_NOMEM;
            }
        }
        if (next == GM_DEAD) {
            i = end[i];
            continue;
        }
        state[depth] = next;
        for (int32_t k = tok_off[i]; k < tok_off[i + 1]; k++) mask[tokens[k]] = 1;
        i++;
    }
    free(state);
    return 0;
}

int32_t gm_trie_build(int32_t n, const uint8_t *data, const int64_t *off, const int32_t *ids,
                      uint32_t *node, int32_t *end, int32_t *tok_off, int32_t *tokens,
                      int32_t *max_depth) {
    int32_t n_nodes = 0, deepest = 0, open_depth = 0;
    int64_t longest = 0;
    for (int32_t k = 0; k < n; k++)
        if (off[k + 1] - off[k] > longest) longest = off[k + 1] - off[k];
    int32_t *open = malloc(sizeof(int32_t) * (size_t)(longest + 1)); /* the path's nodes */
    if (!open) return GM_NOMEM;
    const uint8_t *prev = NULL;
    int64_t prev_len = 0;
    for (int32_t k = 0; k < n; k++) {
        const uint8_t *s = data + off[k];
        int64_t len = off[k + 1] - off[k];
        int64_t common = 0;
        while (common < len && common < prev_len && s[common] == prev[common]) common++;
        for (int32_t d = open_depth; d > common; d--) end[open[d]] = n_nodes;
        /* Sorted order is pre-order: a node's tokens come right after it is opened. */
        for (int64_t d = common + 1; d <= len; d++) {
            open[d] = n_nodes;
            node[n_nodes] = (uint32_t)s[d - 1] | (uint32_t)d << 8;
            tok_off[n_nodes++] = k;
        }
        open_depth = (int32_t)len;
        if (open_depth > deepest) deepest = open_depth;
        tokens[k] = ids[k];
        prev = s;
        prev_len = len;
    }
    for (int32_t d = open_depth; d > 0; d--) end[open[d]] = n_nodes;
    tok_off[n_nodes] = n;
    free(open);
    *max_depth = deepest;
    return n_nodes;
}
