/* llamay's own threads: a pool that runs a function on n threads at once, in place of OpenMP,
   so that the core builds with any C11 compiler that has POSIX threads (gcc or clang, Apple's
   included) and behaves the same wherever it runs.

   llamay_parallel(n, fn, arg) calls fn(arg, i, n) for i = 0..n-1, each on its own thread (the
   caller runs i = 0), and returns once every call has. The team always has exactly n threads,
   so a split of work by (i, n) is fixed by n alone: results never depend on which thread is
   fast (ARCHITECTURE.md, determinism rule 1). Within a region, llamay_barrier (barrier.h)
   separates the stages.

   The workers are started on the first region that needs them and live for the process,
   spinning a moment after each region (the next forward step usually follows within
   microseconds) and then sleeping. One region runs at a time: a second caller waits for the
   first to finish, so two models stepping at once take turns with every core instead of
   dividing them. A region started from inside a region (a kernel that calls a parallel
   helper) runs on its caller's thread alone, as a team of one. */
#ifndef LLAMAY_THREADS_H
#define LLAMAY_THREADS_H

/* One thread's share of a region: `thread` of `n_threads`. */
typedef void (*llamay_task)(void *arg, int thread, int n_threads);

/* The most threads a region may have. */
#define LLAMAY_MAX_THREADS 256

/* Runs task(arg, i, n_threads) on n_threads threads, i = 0..n_threads-1 (n_threads <= 0: one
   per CPU this process may run on; more than LLAMAY_MAX_THREADS: that many). Returns -1 when
   the threads could not be started (the task then ran on the caller alone, as a team of one),
   else 0. */
int llamay_parallel(int n_threads, llamay_task task, void *arg);

/* [begin, end) of n items for thread i of n_threads, in whole multiples of `grain` (the last
   thread's share may end short). */
static inline void llamay_thread_share(int n, int grain, int i, int n_threads, int *begin,
                                       int *end) {
    const int n_grains = (n + grain - 1) / grain;
    const int per_thread = (n_grains + n_threads - 1) / n_threads;
    const long b = (long)i * per_thread * grain, e = (long)(i + 1) * per_thread * grain;
    *begin = b < n ? (int)b : n;
    *end = e < n ? (int)e : n;
}

/* The threads regions run on so far: the caller and the workers started (at least 1). A
   region of this many reaches every worker without starting another. */
int llamay_pool_threads(void);

/* The CPUs this process may run on (its affinity mask where the OS has one), at least 1. */
int llamay_cpu_count(void);

/* Waiting for a word of memory to change, as the pool and the barrier do: spinning for up to
   spin_ns, then asleep (a futex on Linux), counted in *sleepers so that llamay_announce wakes
   sleepers only where there are some. Returns the word's new value. */
int llamay_await_change(int *word, int seen, int *sleepers, long spin_ns);
/* Adds one to *word and wakes the threads waiting for it to change. */
void llamay_announce(int *word, int *sleepers);

/* How long a waiting thread spins before it sleeps: longer than the stages of a step differ
   between threads (tens of microseconds), and long enough that a decode's next step usually
   finds the workers awake; shorter than a scheduler's time slice. */
#define LLAMAY_SPIN_NS 200000L

#endif
