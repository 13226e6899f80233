/* The thread pool of threads.h.

   Each worker has a slot of its own, a cache line apart from the others': the region's task,
   and `go`, which the caller bumps to start the worker on it. A worker waits on its own `go`
   (spinning a moment, then asleep), runs its share, and counts itself off `pending`; the last
   one bumps `done`, which the caller waits on. Only the workers a region needs are started on
   it, and a slot is written only while its worker is idle, so no worker can read a task meant
   for another region. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_getaffinity, pthread_setname_np */
#endif

#include "threads.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPIN_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define SPIN_PAUSE() __asm__ __volatile__("yield")
#else
#define SPIN_PAUSE() ((void)0)
#endif

/* ---- waiting for a word to change ---- */

#if defined(__linux__)

static void wait_while(int *word, int seen) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void wake_all(int *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#else

/* Elsewhere one condition variable serves every word: a sleeper looks at its word under the
   lock, and a waker changes the word before it takes the lock to broadcast, so no wake-up is
   lost; the others woken look again and sleep on. */
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;

static void wait_while(int *word, int seen) {
    pthread_mutex_lock(&sleep_lock);
    while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen) {
        pthread_cond_wait(&sleep_cond, &sleep_lock);
    }
    pthread_mutex_unlock(&sleep_lock);
}

static void wake_all(int *word) {
    (void)word;
    pthread_mutex_lock(&sleep_lock);
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
}

#endif

int llamay_cpu_count(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) {
            return n;
        }
    }
#endif
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n < INT_MAX ? n : INT_MAX) : 1;
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

int llamay_await_change(int *word, int seen, int *sleepers, long spin_ns) {
    /* the clock is read once every 256 pauses: a pause is tens of cycles */
    const long until = spin_ns > 0 ? now_ns() + spin_ns : 0;
    for (unsigned spins = 1; until > 0; spins++) {
        const int now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (now != seen) {
            return now;
        }
        SPIN_PAUSE();
        if (spins % 256 == 0 && now_ns() > until) {
            break;
        }
    }
    __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    int now;
    while ((now = __atomic_load_n(word, __ATOMIC_SEQ_CST)) == seen) {
        wait_while(word, seen);
    }
    __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    return now;
}

void llamay_announce(int *word, int *sleepers) {
    __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) > 0) {
        wake_all(word);
    }
}

/* ---- the pool ---- */

typedef struct {
    _Alignas(64) int go; /* regions this worker was started on */
    int sleepers;
    llamay_task task;
    void *arg;
    int n_threads;
} worker_slot;

static struct {
    pthread_mutex_t lock; /* one region at a time; starting workers */
    int n_started;        /* workers 1..n_started run */
    worker_slot slots[LLAMAY_MAX_THREADS];
    _Alignas(64) int pending; /* workers of the region still running */
    int done;                 /* regions finished */
    int done_sleepers;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* 1 on a worker, and on a caller inside its region: a region started there runs alone. */
static _Thread_local int in_region;

static void *worker_main(void *arg) {
    worker_slot *slot = arg;
    const int index = (int)(slot - pool.slots);
    in_region = 1;
#if defined(__linux__)
    char name[16];
    snprintf(name, sizeof name, "llamay-%d", index);
    pthread_setname_np(pthread_self(), name);
#endif
    int seen = 0;
    for (;;) {
        seen = llamay_await_change(&slot->go, seen, &slot->sleepers, LLAMAY_SPIN_NS);
        slot->task(slot->arg, index, slot->n_threads);
        if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_ACQ_REL) == 0) {
            llamay_announce(&pool.done, &pool.done_sleepers);
        }
    }
    return NULL;
}

/* A forked child has none of its parent's workers: it starts its own when it needs them. */
static void forget_workers(void) {
    pthread_mutex_init(&pool.lock, NULL);
    pool.n_started = 0;
    for (int i = 0; i < LLAMAY_MAX_THREADS; i++) {
        pool.slots[i].go = 0;
        pool.slots[i].sleepers = 0;
    }
    pool.pending = 0;
    pool.done_sleepers = 0;
}

/* Starts workers up to `wanted` (under pool.lock); returns how many run. Their stacks are
   8 MiB, as a main thread's usually is (some systems give other threads 512 KiB). */
static int start_workers(int wanted) {
    if (pool.n_started >= wanted) {
        return pool.n_started;
    }
    static int registered;
    if (!registered) {
        pthread_atfork(NULL, NULL, forget_workers);
        registered = 1;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)8 << 20);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (pool.n_started < wanted) {
        pthread_t thread;
        worker_slot *slot = &pool.slots[pool.n_started + 1];
        if (pthread_create(&thread, &attr, worker_main, slot) != 0) {
            break;
        }
        pool.n_started++;
    }
    pthread_attr_destroy(&attr);
    return pool.n_started;
}

int llamay_pool_threads(void) {
    pthread_mutex_lock(&pool.lock);
    const int n = pool.n_started + 1;
    pthread_mutex_unlock(&pool.lock);
    return n;
}

int llamay_parallel(int n_threads, llamay_task task, void *arg) {
    if (n_threads <= 0) {
        n_threads = llamay_cpu_count();
    }
    if (n_threads > LLAMAY_MAX_THREADS) {
        n_threads = LLAMAY_MAX_THREADS;
    }
    if (n_threads == 1 || in_region) {
        const int outer = in_region;
        in_region = 1;
        task(arg, 0, 1);
        in_region = outer;
        return 0;
    }
    pthread_mutex_lock(&pool.lock);
    const int workers = start_workers(n_threads - 1);
    const int n = workers + 1 < n_threads ? workers + 1 : n_threads;
    if (n == 1) {
        pthread_mutex_unlock(&pool.lock);
        in_region = 1;
        task(arg, 0, 1);
        in_region = 0;
        return -1;
    }
    const int done = __atomic_load_n(&pool.done, __ATOMIC_ACQUIRE);
    __atomic_store_n(&pool.pending, n - 1, __ATOMIC_RELAXED);
    for (int i = 1; i < n; i++) {
        worker_slot *slot = &pool.slots[i];
        slot->task = task;
        slot->arg = arg;
        slot->n_threads = n;
        llamay_announce(&slot->go, &slot->sleepers);
    }
    in_region = 1;
    task(arg, 0, n);
    in_region = 0;
    llamay_await_change(&pool.done, done, &pool.done_sleepers, LLAMAY_SPIN_NS);
    pthread_mutex_unlock(&pool.lock);
    return n == n_threads ? 0 : -1;
}
