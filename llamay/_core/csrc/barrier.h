/* The barrier between the stages of a forward step, in place of `#pragma omp barrier`.

   libgomp spins at its barriers only while the threads of every OpenMP team in the process
   number no more than the cores. Each thread that starts a parallel region keeps a team of its
   own, so once a second one has (a model loaded by the main thread and run by the scheduler's,
   or a server's request threads), every barrier went straight to the kernel's futex: a decode
   step of the 1B shape at two threads on two cores took 36 ms instead of 30 (`llamay run`
   28.6 against `llamay bench`'s 33.2 t/s). This barrier spins for a while, whatever the other
   teams, and then sleeps, so that a thread preempted by another process does not have its core
   taken by a spinning partner for long.

   Sense by counting: every arrival adds to `count`; the last one resets it and advances `phase`,
   which the others watch. A sleeper counts itself in `sleepers` before its last look at the
   phase, and the last arrival looks at `sleepers` after advancing it (both sequentially
   consistent), so a wake-up is never lost. */

#ifndef LLAMAY_BARRIER_H
#define LLAMAY_BARRIER_H

#include <limits.h>
#include <time.h>

#include <omp.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <sched.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LLAMAY_SPIN_PAUSE() _mm_pause()
#else
#define LLAMAY_SPIN_PAUSE() ((void)0)
#endif

typedef struct {
    int count;    /* arrivals at the current barrier */
    int phase;    /* barriers passed */
    int sleepers; /* threads asleep on phase */
    long spin_ns; /* how long a waiting thread spins before it sleeps */
} llamay_barrier;

/* The spin: longer than a stage's imbalance between threads (tens of microseconds), shorter
   than a scheduler's time slice. */
#define LLAMAY_BARRIER_SPIN_NS 200000L

/* A barrier for a team of n_threads. With more threads than the cores OpenMP may use, a
   spinning thread holds the core that the one it waits for needs, so it sleeps at once (as
   libgomp's own barrier does then). */
static inline llamay_barrier llamay_barrier_make(int n_threads) {
    const int spin = n_threads <= omp_get_num_procs();
    const llamay_barrier b = {0, 0, 0, spin ? LLAMAY_BARRIER_SPIN_NS : 0};
    return b;
}

static inline long llamay_barrier_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

static inline void llamay_barrier_sleep(int *phase, int seen) {
#if defined(__linux__)
    syscall(SYS_futex, phase, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    (void)phase;
    (void)seen;
    sched_yield();
#endif
}

static inline void llamay_barrier_wake(int *phase) {
#if defined(__linux__)
    syscall(SYS_futex, phase, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)phase;
#endif
}

/* Waits until all n threads of the team have arrived at b (llamay_barrier_make's). */
static inline void llamay_barrier_wait(llamay_barrier *b, int n) {
    if (n <= 1) {
        return;
    }
    const int seen = __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == n) {
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&b->phase, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&b->sleepers, __ATOMIC_SEQ_CST) > 0) {
            llamay_barrier_wake(&b->phase);
        }
        return;
    }
    /* the clock is read once every 256 pauses: a pause is tens of cycles */
    const long until = b->spin_ns > 0 ? llamay_barrier_now_ns() + b->spin_ns : 0;
    for (unsigned spins = 1; until > 0; spins++) {
        if (__atomic_load_n(&b->phase, __ATOMIC_ACQUIRE) != seen) {
            return;
        }
        LLAMAY_SPIN_PAUSE();
        if (spins % 256 == 0 && llamay_barrier_now_ns() > until) {
            break;
        }
    }
    __atomic_add_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&b->phase, __ATOMIC_SEQ_CST) == seen) {
        llamay_barrier_sleep(&b->phase, seen);
    }
    __atomic_sub_fetch(&b->sleepers, 1, __ATOMIC_SEQ_CST);
}

#endif
