/* attention_core._ggml: the two steps of loading a 4-bit GGUF model that torch ops do in many
 * passes over memory, done in one pass each, straight from the file's memory map.
 *
 * - ``q6_k_bfloat16``: Q6_K blocks (210 bytes, 256 values) -> bfloat16 values. Each value is
 *   computed as ggml's reference dequantiser computes it in float32, (d * scale) * (q - 32),
 *   a product then a product (this file is built with -ffp-contract=off: no fused
 *   multiply-add), then rounded to bfloat16 to nearest, ties to even, as torch rounds. So
 *   the bits equal torch's decode to float32 then .to(bfloat16), but for a NaN (a block whose
 *   scale is one): it becomes the quiet NaN 0x7FC0, c10's scalar rule, where torch's
 *   vectorised conversion may keep other NaN bits.
 * - ``pack_int4``: Q4_0, Q4_1 or Q4_K matrices (N, K) -> torch's CPU int4 layout (the layout
 *   attention_core.pretrained.int4_fast checks at run time: per block of B rows, byte j of
 *   column k holds the code of row bB + j (low nibble) and row bB + B/2 + j (high nibble),
 *   column after column), and each group of 32 values' scale and minimum as float32, in a
 *   (2, K/32, row_stride) array: d * sc and -(dmin * mn) for Q4_K, d and m for Q4_1, d and
 *   d * -8 for Q4_0 (the products int4_fast computes, the same bits).
 *
 * Work is cut into items (chunks of blocks, or blocks of B rows) that threads claim one by one
 * (PyTorch's OpenMP team when the Python side hands over its GOMP_parallel, else POSIX
 * threads); each output byte is written by one item, so the result does not depend on the
 * thread count. The Python side (attention_core.pretrained.ggml_kernel) checks every size.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define GGML_KERNEL_VERSION 1
#define MAX_THREADS 256
#define Q6_K_BYTES 210
#define QK_K 256
#define Q6_K_CHUNK 512 /* blocks per work item: 105 KiB of file, 256 KiB of output */

/* ggml's type ids of the 4-bit types packed here */
#define GGML_Q4_0 2
#define GGML_Q4_1 3
#define GGML_Q4_K 12

/* An IEEE half's bits -> float32, exact (subnormals, infinities and NaNs included). */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1F;
    uint32_t mantissa = h & 0x3FF;
    uint32_t bits;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        exponent = 113;
        while (!(mantissa & 0x400)) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3FF) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t read_half(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* float32 -> bfloat16 bits, to nearest, ties to even; NaN -> 0x7FC0 (c10's scalar rule). */
static inline uint16_t float_to_bfloat16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const uint16_t rounded = (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    return (bits & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)0x7FC0 : rounded;
}

typedef struct {
    const uint8_t *src;
    uint16_t *dst;
    int64_t blocks;
} q6_args;

/* One half of a Q6_K block (128 values) -> bfloat16, as ggml's dequantize_row_q6_K: first
 * the codes (quarter k of 32 takes the low (k = 0, 1) or high (k = 2, 3) nibbles of
 * ql[l + 32 (k mod 2)] and bits 2k, 2k + 1 of qh[l]), then value p is
 * (d * scale[p / 16]) * (q - 32). Simple loops over bytes and floats, which the compiler
 * turns into vector code. */
static inline void q6_k_half(const uint8_t *restrict ql, const uint8_t *restrict qh,
                             const int8_t *restrict scales, float d, uint16_t *restrict y) {
    int8_t q[128];
    for (int l = 0; l < 32; l++) q[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
    for (int l = 0; l < 32; l++)
        q[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
    for (int l = 0; l < 32; l++)
        q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
    for (int l = 0; l < 32; l++)
        q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    float factor[128];
    for (int p = 0; p < 128; p++) factor[p] = d * (float)scales[p / 16];
    for (int p = 0; p < 128; p++) y[p] = float_to_bfloat16(factor[p] * (float)q[p]);
}

/* Q6_K blocks [first, stop) -> bfloat16 (built for AVX2 too where the CPU runs it). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void q6_k_range(const q6_args *a, int64_t first, int64_t stop) {
    for (int64_t i = first; i < stop; i++) {
        const uint8_t *block = a->src + i * Q6_K_BYTES;
        const float d = half_to_float(read_half(block + 208));
        const int8_t *scales = (const int8_t *)(block + 192);
        uint16_t *y = a->dst + i * QK_K;
        q6_k_half(block, block + 128, scales, d, y);
        q6_k_half(block + 64, block + 160, scales + 8, d, y + 128);
    }
}

typedef struct {
    const uint8_t *src;
    uint8_t *packed;   /* (rows / B, cols, B / 2) */
    float *scales;     /* (2, cols / 32, row_stride): scale, minimum */
    int64_t rows, cols, row_stride, block_rows;
    int type;
    int64_t block_values, block_bytes, nibble_offset, groups, group_bytes;
} pack_args;

/* One ggml block's scale and minimum of each group of 32 values, as int4_fast computes them. */
static void block_scales(const pack_args *a, const uint8_t *block, float *scale, float *minimum) {
    const float d = half_to_float(read_half(block));
    if (a->type == GGML_Q4_0) {
        scale[0] = d;
        minimum[0] = d * -8.0f;
        return;
    }
    if (a->type == GGML_Q4_1) {
        scale[0] = d;
        minimum[0] = half_to_float(read_half(block + 2));
        return;
    }
    const float dmin = half_to_float(read_half(block + 2));
    const uint8_t *q = block + 4; /* twelve bytes: a[0:4], b[0:4], c[0:4] */
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        if (s < 4) {
            sc = q[s] & 63;
            mn = q[s + 4] & 63;
        } else {
            sc = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
            mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
        }
        scale[s] = d * (float)sc;
        minimum[s] = -(dmin * (float)mn);
    }
}

/* Blocks of B rows [first, stop): their nibbles into ``packed`` and their scales. */
static void pack_range(const pack_args *a, int64_t first, int64_t stop) {
    const int64_t per_row = a->cols / a->block_values; /* ggml blocks in a row */
    const int64_t row_bytes = per_row * a->block_bytes;
    const int64_t half = a->block_rows / 2, groups_per_block = a->block_values / 32;
    const int64_t L = a->group_bytes;
    float scale[8], minimum[8];
    for (int64_t b = first; b < stop; b++) {
        const uint8_t *top_rows = a->src + b * a->block_rows * row_bytes;
        const uint8_t *bottom_rows = top_rows + half * row_bytes;
        uint8_t *out = a->packed + b * a->cols * half; /* (cols, B/2) */
        for (int64_t c = 0; c < per_row; c++) {
            for (int64_t g = 0; g < a->groups; g++) {
                const int64_t offset = c * a->block_bytes + a->nibble_offset + g * L;
                const int64_t column = c * a->block_values + g * 2 * L;
                for (int64_t l = 0; l < L; l++) {
                    uint8_t *low = out + (column + l) * half, *high = out + (column + L + l) * half;
                    for (int64_t j = 0; j < half; j++) {
                        const uint8_t t = top_rows[j * row_bytes + offset + l];
                        const uint8_t u = bottom_rows[j * row_bytes + offset + l];
                        low[j] = (uint8_t)((t & 0xF) | (u << 4));
                        high[j] = (uint8_t)((t >> 4) | (u & 0xF0));
                    }
                }
            }
        }
        for (int64_t r = b * a->block_rows; r < (b + 1) * a->block_rows; r++) {
            const uint8_t *row = a->src + r * row_bytes;
            for (int64_t c = 0; c < per_row; c++) {
                block_scales(a, row + c * a->block_bytes, scale, minimum);
                for (int64_t s = 0; s < groups_per_block; s++) {
                    const int64_t group = c * groups_per_block + s;
                    a->scales[group * a->row_stride + r] = scale[s];
                    a->scales[(a->cols / 32 + group) * a->row_stride + r] = minimum[s];
                }
            }
        }
    }
}

/* The OpenMP runtime PyTorch runs its own ops on (set by use_openmp), as in band.c. */
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
static gomp_parallel_fn omp_parallel = NULL;

typedef struct {
    void (*range)(const void *, int64_t, int64_t);
    const void *args;
    int64_t items, per_item, total;
    int64_t next; /* the next unclaimed item, shared */
} job;

static void run_worker(void *p) {
    job *w = p;
    for (;;) {
        const int64_t item = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (item >= w->items) return;
        const int64_t first = item * w->per_item;
        const int64_t stop = first + w->per_item < w->total ? first + w->per_item : w->total;
        w->range(w->args, first, stop);
    }
}

static void *run_thread(void *p) {
    run_worker(p);
    return NULL;
}

static void run_job(job *w, int threads) {
    if (threads > w->items) threads = (int)w->items;
    if (threads > 1 && omp_parallel != NULL) {
        omp_parallel(run_worker, w, (unsigned)threads, 0);
        return;
    }
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int t = 1; t < threads; t++) started[t] = pthread_create(&ids[t], NULL, run_thread, w) == 0;
    run_worker(w); /* claims whatever a thread that failed to start would have */
    for (int t = 1; t < threads; t++)
        if (started[t]) pthread_join(ids[t], NULL);
}

static int check_threads(int threads) {
    if (threads < 1 || threads > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "threads must be in [1, %d], got %d", MAX_THREADS, threads);
        return -1;
    }
    return 0;
}

static PyObject *ggml_q6_k_bfloat16(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long src, dst;
    long long blocks;
    int threads;
    if (!PyArg_ParseTuple(args, "KKLi", &src, &dst, &blocks, &threads)) return NULL;
    if (check_threads(threads) < 0) return NULL;
    if (blocks < 0 || (blocks > 0 && (!src || !dst))) {
        PyErr_Format(PyExc_ValueError, "blocks must be >= 0 with non-null buffers, got %lld",
                     blocks);
        return NULL;
    }
    if (blocks == 0) Py_RETURN_NONE;
    q6_args a = {(const uint8_t *)(uintptr_t)src, (uint16_t *)(uintptr_t)dst, blocks};
    job w = {(void (*)(const void *, int64_t, int64_t))q6_k_range, &a,
             (blocks + Q6_K_CHUNK - 1) / Q6_K_CHUNK, Q6_K_CHUNK, blocks, 0};
    Py_BEGIN_ALLOW_THREADS
    run_job(&w, threads);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *ggml_pack_int4(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *names[] = {"src", "ggml_type", "rows", "cols", "block_rows", "packed",
                            "scales", "row_stride", "threads", NULL};
    unsigned long long src, packed, scales;
    int type, threads;
    long long rows, cols, block_rows, row_stride;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KiLLLKKLi", names, &src, &type, &rows,
                                     &cols, &block_rows, &packed, &scales, &row_stride, &threads))
        return NULL;
    if (check_threads(threads) < 0) return NULL;
    pack_args a = {(const uint8_t *)(uintptr_t)src, (uint8_t *)(uintptr_t)packed,
                   (float *)(uintptr_t)scales, rows, cols, row_stride, block_rows, type};
    if (type == GGML_Q4_0) {
        a.block_values = 32, a.block_bytes = 18, a.nibble_offset = 2, a.groups = 1,
        a.group_bytes = 16;
    } else if (type == GGML_Q4_1) {
        a.block_values = 32, a.block_bytes = 20, a.nibble_offset = 4, a.groups = 1,
        a.group_bytes = 16;
    } else if (type == GGML_Q4_K) {
        a.block_values = QK_K, a.block_bytes = 144, a.nibble_offset = 16, a.groups = 4,
        a.group_bytes = 32;
    } else {
        PyErr_Format(PyExc_ValueError, "ggml_type must be Q4_0 (2), Q4_1 (3) or Q4_K (12), got %d",
                     type);
        return NULL;
    }
    if (block_rows < 2 || block_rows % 2 || rows < block_rows || rows % block_rows ||
        cols < a.block_values || cols % a.block_values || row_stride < rows) {
        PyErr_Format(PyExc_ValueError,
                     "rows (%lld) must be a multiple of block_rows (%lld, even), cols (%lld) of "
                     "%lld, and row_stride (%lld) at least rows",
                     rows, block_rows, cols, (long long)a.block_values, row_stride);
        return NULL;
    }
    if (!src || !packed || !scales) {
        PyErr_SetString(PyExc_ValueError, "src, packed and scales must be non-null addresses");
        return NULL;
    }
    job w = {(void (*)(const void *, int64_t, int64_t))pack_range, &a, rows / block_rows, 1,
             rows / block_rows, 0};
    Py_BEGIN_ALLOW_THREADS
    run_job(&w, threads);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *ggml_use_openmp(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long parallel;
    if (!PyArg_ParseTuple(args, "K", &parallel)) return NULL;
    omp_parallel = (gomp_parallel_fn)(uintptr_t)parallel;
    Py_RETURN_NONE;
}

static PyMethodDef ggml_methods[] = {
    {"q6_k_bfloat16", ggml_q6_k_bfloat16, METH_VARARGS,
     "q6_k_bfloat16(src, dst, blocks, threads)\n"
     "Decode ``blocks`` Q6_K blocks at address src (210 bytes each) into blocks * 256\n"
     "bfloat16 values at address dst. Releases the GIL."},
    {"pack_int4", (PyCFunction)(void (*)(void))ggml_pack_int4, METH_VARARGS | METH_KEYWORDS,
     "pack_int4(src, ggml_type, rows, cols, block_rows, packed, scales, row_stride, threads)\n"
     "A (rows, cols) Q4_0/Q4_1/Q4_K matrix at address src -> packed (rows / block_rows, cols,\n"
     "block_rows / 2) bytes and scales (2, cols / 32, row_stride) float32 (its first rows\n"
     "columns). Releases the GIL."},
    {"use_openmp", ggml_use_openmp, METH_VARARGS,
     "use_openmp(gomp_parallel)\n"
     "Run on the OpenMP team whose GOMP_parallel is at this address (0: own POSIX threads)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef ggml_module = {PyModuleDef_HEAD_INIT, "_ggml",
                                         "GGUF loading kernels (see ggml.c).", -1, ggml_methods,
                                         NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ggml(void) {
    PyObject *m = PyModule_Create(&ggml_module);
    if (m != NULL && PyModule_AddIntConstant(m, "VERSION", GGML_KERNEL_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
