/* lmq's one thread pool (lmq_format.h): n-1 worker threads plus the caller
 * as thread 0. The kernels keep one per context for its life; quantize,
 * convert and verify make one for an operation (lmq_pool_for).
 *
 * A run publishes (fn, ctx) and bumps a generation counter; workers notice by
 * spinning briefly (token generation issues hundreds of short runs per
 * second, and a futex wake costs more than the work of a small matvec) and
 * then sleep on a condition variable, so idle pools use no CPU. The last
 * worker to finish wakes the caller if it went to sleep. Nothing is
 * allocated per run. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "lmq_format.h"

/* The spin is a plain re-read of the counter, not PAUSE/YIELD: under a
 * hypervisor with pause-loop exiting (this project's CI machines are VMs) a
 * PAUSE loop traps to the host and a worker took ~40 us to notice a new run,
 * which made 2-thread matrix-vector products of small matrices 3x slower
 * than one thread. Measured with a 256 x 2048 q4_K matvec: 60.6 us with
 * PAUSE, 8.9 us without (1 thread: 17.5 us). */
static inline void cpu_relax(void) { __asm__ volatile("" ::: "memory"); }

/* Polling iterations before sleeping: tens of microseconds. */
#define LMQ_SPIN_ITERS (1 << 16)

typedef struct worker {
    struct lmq_pool *pool;
    pthread_t tid;
    int ith;
} worker;

struct lmq_pool {
    int n_threads;
    worker *workers; /* (n_threads - 1) */
    int n_started;

    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers wait here for a new generation */
    pthread_cond_t done; /* the caller waits here for pending == 0 */
    int sleepers;        /* workers blocked on `wake` (under mu) */
    bool caller_sleeping;

    atomic_uint gen;     /* incremented once per run */
    atomic_int pending;  /* workers still running the current job */
    atomic_bool stop;
    lmq_pool_fn fn;      /* the current job (published by gen's release) */
    void *ctx;
};

static void *worker_main(void *arg)
{
    worker *w = arg;
    lmq_pool *p = w->pool;
    unsigned seen = 0; /* not a fresh read: a run may be posted before this thread starts */
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && spins < LMQ_SPIN_ITERS) {
            cpu_relax();
            spins++;
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
                p->sleepers++;
                pthread_cond_wait(&p->wake, &p->mu);
                p->sleepers--;
            }
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        p->fn(p->ctx, w->ith, p->n_threads);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            if (p->caller_sleeping) pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Publishes a new generation and wakes sleeping workers. */
static void post(lmq_pool *p)
{
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
    if (p->sleepers) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
}

lmq_status lmq_pool_new(int n_threads, lmq_pool **out)
{
    *out = NULL;
    if (n_threads <= 0) n_threads = lmq_n_cpus();
    if (n_threads > LMQ_MAX_THREADS)
        return lmq_error(LMQ_ERR_INVALID_ARG, "thread pool: %d threads requested, at most %d", n_threads,
                         LMQ_MAX_THREADS);
    lmq_pool *p = calloc(1, sizeof *p);
    if (!p) return lmq_error(LMQ_ERR_NOMEM, "thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, false);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            lmq_pool_free(p);
            return lmq_error(LMQ_ERR_NOMEM, "thread pool: %d workers", n_threads - 1);
        }
        for (int i = 0; i < n_threads - 1; i++) {
            worker *w = &p->workers[i];
            w->pool = p;
            w->ith = i + 1;
            int rc = pthread_create(&w->tid, NULL, worker_main, w);
            if (rc != 0) {
                lmq_pool_free(p);
                return lmq_error(LMQ_ERR_RUNTIME, "thread pool: cannot start thread %d of %d", i + 2,
                                 n_threads);
            }
            p->n_started++;
        }
    }
    *out = p;
    return LMQ_OK;
}

void lmq_pool_free(lmq_pool *p)
{
    if (!p) return;
    if (p->n_started > 0) {
        atomic_store_explicit(&p->stop, true, memory_order_release);
        post(p);
        for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i].tid, NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->workers);
    free(p);
}

int lmq_pool_n_threads(const lmq_pool *p)
{
    return p ? p->n_threads : 1;
}

void lmq_pool_run(lmq_pool *p, lmq_pool_fn fn, void *ctx)
{
    if (!p || p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    post(p);
    fn(ctx, 0, p->n_threads);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0 && spins < LMQ_SPIN_ITERS * 4) {
        cpu_relax();
        spins++;
    }
    if (atomic_load_explicit(&p->pending, memory_order_acquire) != 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0) {
            p->caller_sleeping = true;
            pthread_cond_wait(&p->done, &p->mu);
        }
        p->caller_sleeping = false;
        pthread_mutex_unlock(&p->mu);
    }
}

typedef struct for_job {
    lmq_pool_fn fn;
    void *ctx;
    int n;
} for_job;

lmq_status lmq_pool_for(int n_threads, lmq_pool_fn fn, void *ctx)
{
    if (n_threads <= 0) n_threads = lmq_n_cpus();
    if (n_threads > LMQ_MAX_THREADS)
        return lmq_error(LMQ_ERR_INVALID_ARG, "thread pool: %d threads requested, at most %d", n_threads,
                         LMQ_MAX_THREADS);
    lmq_pool *p = NULL;
    if (n_threads > 1 && lmq_pool_new(n_threads, &p) == LMQ_OK) {
        lmq_pool_run(p, fn, ctx);
        lmq_pool_free(p);
        return LMQ_OK;
    }
    lmq_error_clear(); /* no threads: the caller does every share itself */
    for (int i = 0; i < n_threads; i++) fn(ctx, i, n_threads);
    return LMQ_OK;
}
