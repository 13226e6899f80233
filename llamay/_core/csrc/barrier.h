/* The barrier between the stages of a forward step.

   It spins for a while and then sleeps, so that a thread preempted by another process does not
   have its core taken by a spinning partner for long. (libgomp's own barrier, which the core
   used before it had its own threads, spun only while the threads of every OpenMP team in the
   process numbered no more than the cores, and went straight to the kernel's futex once a
   second thread had started a team: a server's request threads, or a model loaded by one
   thread and run by another. A decode step of the 1B shape at two threads on two cores took
   36 ms instead of 30.)

   Sense by counting: every arrival adds to `count`; the last one resets it and advances `phase`,
   which the others watch. A sleeper counts itself in `sleepers` before its last look at the
   phase, and the last arrival looks at `sleepers` after advancing it (both sequentially
   consistent), so a wake-up is never lost. */

#ifndef LLAMAY_BARRIER_H
#define LLAMAY_BARRIER_H

#include "threads.h"

typedef struct {
    int count;    /* arrivals at the current barrier */
    int phase;    /* barriers passed */
    int sleepers; /* threads asleep on phase */
    long spin_ns; /* how long a waiting thread spins before it sleeps */
} llamay_barrier;

/* A barrier for a team of n_threads. With more threads than the CPUs this process may use, a
   spinning thread holds the core that the one it waits for needs, so it sleeps at once. */
static inline llamay_barrier llamay_barrier_make(int n_threads) {
    const int spin = n_threads <= llamay_cpu_count();
    const llamay_barrier b = {0, 0, 0, spin ? LLAMAY_SPIN_NS : 0};
    return b;
}

/* Waits until all n threads of the team have arrived at b (llamay_barrier_make's). */
static inline void llamay_barrier_wait(llamay_barrier *b, int n) {
    if (n <= 1) {
        return;
    }
    const int seen = __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == n) {
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        llamay_announce(&b->phase, &b->sleepers);
        return;
    }
    llamay_await_change(&b->phase, seen, &b->sleepers, b->spin_ns);
}

#endif
