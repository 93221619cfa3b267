/* attention_core._band: banded (local window) self-attention on the CPU, float32.
 *
 * One entry point, ``attend``, computes out = softmax_band(q k^T * scale) v for every query
 * i over the keys [i - left, i + right] (a local window, a causal one, or all keys), in
 * O(L * (left + right + 1) * E) time and a few per-thread buffers of memory, and optionally
 * the dense scores and weights. The kernel body (band_impl.h) is compiled once per instruction set it can use
 * (AVX-512, AVX2+FMA on x86-64 with GCC or Clang; portable vectors everywhere) and the best
 * one the running CPU supports is picked at call time. Threads (PyTorch's OpenMP team when
 * the Python side hands over its GOMP_parallel, else POSIX threads) claim items of (head,
 * chunk of rows) one by one; each row is computed by one thread, so results do not depend
 * on the thread count. The Python side (attention_core.variants.band_kernel) checks tensors.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BAND_VERSION 3
#define CHUNK 512   /* rows per work item: its key window stays in L2 */
#define MAX_THREADS 256

typedef struct {
    const float *q, *k, *v;
    float *out;
    float *scores, *weights;  /* dense (N, L, L) outputs, or NULL */
    int64_t N, L, E, Ev, left, right, chunk;
    double scale;
    float blocked;            /* the scores of keys outside the band */
} band_args;

typedef int (*band_fn)(const band_args *, int64_t *);

/* portable: 4 lanes (SSE2, NEON, or scalar code from the compiler) */
#define SFX _portable
#define VL 4
#define RT 4
#define NQ 3
#define PR 4
#define NP 2
#define KATTR
#include "band_impl.h" /* it #undefs its parameters */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BAND_X86 1
#define SFX _avx2
#define VL 8
#define RT 4
#define NQ 3
#define PR 4
#define NP 2
#define KATTR __attribute__((target("avx2,fma")))
#include "band_impl.h" /* it #undefs its parameters */

#define SFX _avx512
#define VL 16
#define RT 8
#define NQ 3
#define PR 4
#define NP 4
#define KATTR __attribute__((target("avx512f,avx2,fma")))
#include "band_impl.h" /* it #undefs its parameters */
#endif

typedef struct {
    const char *name;
    band_fn fn;
} band_isa;

/* Instruction sets this CPU runs, best first; returns how many were written. */
static int supported_isas(band_isa *out) {
    int n = 0;
#ifdef BAND_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        out[n++] = (band_isa){"avx512", band_worker_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        out[n++] = (band_isa){"avx2", band_worker_avx2};
#endif
    out[n++] = (band_isa){"portable", band_worker_portable};
    return n;
}

/* The OpenMP runtime PyTorch runs its own ops on (set by use_openmp): its worker threads
 * spin for a while after each parallel op, so threads of our own would share the cores
 * with them; handing our work to the same team avoids that. */
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
static gomp_parallel_fn omp_parallel = NULL;

typedef struct {
    band_fn fn;
    const band_args *args;
    int64_t next;  /* the next unclaimed item, shared */
    int rc;        /* nonzero when any worker failed */
} band_job;

static void run_worker(void *p) {
    band_job *job = p;
    if (job->fn(job->args, &job->next) != 0) __atomic_store_n(&job->rc, -1, __ATOMIC_RELAXED);
}

static void *run_thread(void *p) {
    run_worker(p);
    return NULL;
}

/* Run the job on ``threads`` threads: PyTorch's OpenMP team when known, else POSIX threads
 * of our own (the calling thread is one of them). */
static int run_threads(band_fn fn, const band_args *a, int threads) {
    const int64_t items = a->N * ((a->L + a->chunk - 1) / a->chunk);
    if (threads > items) threads = (int)items;
    band_job job = {fn, a, 0, 0};
    if (threads > 1 && omp_parallel != NULL) {
        omp_parallel(run_worker, &job, (unsigned)threads, 0);
        return job.rc;
    }
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&ids[t], NULL, run_thread, &job) == 0;
    run_worker(&job);  /* claims whatever a thread that failed to start would have */
    for (int t = 1; t < threads; t++)
        if (started[t]) pthread_join(ids[t], NULL);
    return job.rc;
}

static PyObject *band_use_openmp(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long parallel;
    if (!PyArg_ParseTuple(args, "K", &parallel)) return NULL;
    omp_parallel = (gomp_parallel_fn)(uintptr_t)parallel;
    Py_RETURN_NONE;
}

static PyObject *band_attend(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *names[] = {"q", "k", "v", "out", "n", "length", "dim", "value_dim", "left",
                            "right", "scale", "threads", "isa", "scores", "weights", NULL};
    unsigned long long q, k, v, out, scores = 0, weights = 0;
    long long N, L, E, Ev, left, right;
    double scale;
    int threads;
    const char *isa = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KKKKLLLLLLdi|zKK", names, &q, &k, &v, &out,
                                     &N, &L, &E, &Ev, &left, &right, &scale, &threads, &isa,
                                     &scores, &weights))
        return NULL;
    if (N < 1 || L < 1 || E < 1 || Ev < 1) {
        PyErr_Format(PyExc_ValueError,
                     "n, length, dim and value_dim must be >= 1, got %lld, %lld, %lld, %lld", N,
                     L, E, Ev);
        return NULL;
    }
    if (left < 0 || left >= L || right < 0 || right >= L) {
        PyErr_Format(PyExc_ValueError, "left and right must be in [0, length - 1 = %lld], got %lld and %lld",
                     L - 1, left, right);
        return NULL;
    }
    if (threads < 1 || threads > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "threads must be in [1, %d], got %d", MAX_THREADS, threads);
        return NULL;
    }
    if (!q || !k || !v || !out) {
        PyErr_SetString(PyExc_ValueError, "q, k, v and out must be non-null data pointers");
        return NULL;
    }
    band_isa isas[4];
    int count = supported_isas(isas);
    band_fn fn = isas[0].fn;
    if (isa != NULL) {
        fn = NULL;
        for (int i = 0; i < count; i++)
            if (strcmp(isas[i].name, isa) == 0) fn = isas[i].fn;
        if (fn == NULL) {
            PyErr_Format(PyExc_ValueError, "isa '%s' is not one this CPU runs", isa);
            return NULL;
        }
    }
    band_args a = {(const float *)(uintptr_t)q, (const float *)(uintptr_t)k,
                   (const float *)(uintptr_t)v, (float *)(uintptr_t)out,
                   (float *)(uintptr_t)scores, (float *)(uintptr_t)weights,
                   N, L, E, Ev, left, right, CHUNK, scale, -FLT_MAX};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_threads(fn, &a, threads);
    Py_END_ALLOW_THREADS
    if (rc != 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *band_isas(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    band_isa isas[4];
    int count = supported_isas(isas);
    PyObject *names = PyTuple_New(count);
    if (names == NULL) return NULL;
    for (int i = 0; i < count; i++) PyTuple_SET_ITEM(names, i, PyUnicode_FromString(isas[i].name));
    return names;
}

static PyMethodDef band_methods[] = {
    {"attend", (PyCFunction)(void (*)(void))band_attend, METH_VARARGS | METH_KEYWORDS,
     "attend(q, k, v, out, n, length, dim, value_dim, left, right, scale, threads, isa=None,\n"
     "       scores=0, weights=0)\n"
     "Banded attention on contiguous float32 buffers given by address: q, k (n, length, dim),\n"
     "v and out (n, length, value_dim); scores and weights (n, length, length) when nonzero\n"
     "(keys outside the band: -FLT_MAX and 0). Query i sees keys [i - left, i + right].\n"
     "Releases the GIL."},
    {"isas", band_isas, METH_NOARGS, "The instruction sets this CPU runs, best first."},
    {"use_openmp", band_use_openmp, METH_VARARGS,
     "use_openmp(gomp_parallel)\n"
     "Run on the OpenMP team whose GOMP_parallel is at this address (0: own POSIX threads)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef band_module = {PyModuleDef_HEAD_INIT, "_band",
                                         "Banded attention kernel (see band.c).", -1, band_methods,
                                         NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__band(void) {
    PyObject *m = PyModule_Create(&band_module);
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", BAND_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
