/* Banded attention kernel body, included once per instruction set by band.c with:
 *   SFX    name suffix (token)           VL  float lanes per vector
 *   RT     query rows per score tile     NQ  vectors per score-tile pass (RT x NQ accumulators)
 *   PR     rows per output pass          NP  vectors per output pass (PR x NP accumulators)
 *   KATTR  function attributes (the target instruction set)
 * and #undefs them at its end, so the next inclusion can set them again.
 *
 * Shapes (float32, contiguous): q (N, L, E), k (N, L, E), v (N, L, Ev), out (N, L, Ev);
 * optionally dense weights and scores (N, L, L). Query i attends to the keys
 * [i - left, i + right] within [0, L), with scores q_i . k_j * scale.
 *
 * Work is cut into chunks of rows of one head. A chunk first transposes its key window
 * [r0 - left, r1 + right) into kt (E, ks) (zeros outside [0, L)), so that a score tile is
 * RT rows x NQ*VL keys of broadcast-q times kt-row FMAs, over only the columns whose keys
 * lie in [0, L). Each row keeps its band: the columns outside it are set to -inf before the
 * softmax, which runs in base 2 with the scale folded in; the output accumulates p . v over
 * the rows' union band and is divided by the row's sum when stored.
 */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, SFX)
#define INLINE static inline __attribute__((always_inline)) KATTR

typedef float FN(vf) __attribute__((vector_size(VL * 4)));
typedef float FN(vfu) __attribute__((vector_size(VL * 4), aligned(4)));
typedef int32_t FN(vi) __attribute__((vector_size(VL * 4)));

INLINE FN(vf) FN(load)(const float *p) { return *(const FN(vfu) *)p; }
INLINE void FN(store)(float *p, FN(vf) x) { *(FN(vfu) *)p = x; }
INLINE FN(vf) FN(splat)(float x) { FN(vf) r = {0}; return r + x; }
INLINE FN(vf) FN(select)(FN(vi) m, FN(vf) a, FN(vf) b) {
    return (FN(vf))(((FN(vi))a & m) | ((FN(vi))b & ~m));
}

/* 2^x, elementwise, for x <= 0: 0 below -126 (and for -inf); about 2 ulp elsewhere. */
INLINE FN(vf) FN(exp2v)(FN(vf) x) {
    const FN(vf) lowest = FN(splat)(-126.0f);
    FN(vi) under = x < lowest;
    x = FN(select)(under, lowest, x);
    const FN(vf) magic = FN(splat)(12582912.0f);  /* 1.5 * 2^23: adding it rounds to int */
    FN(vf) n = (x + magic) - magic;
    FN(vf) f = x - n;                              /* [-0.5, 0.5] */
    FN(vf) p = FN(splat)(1.5353362e-4f);           /* 2^f, degree-6 minimax */
    p = p * f + 1.3398874e-3f;
    p = p * f + 9.6180604e-3f;
    p = p * f + 5.5503365e-2f;
    p = p * f + 2.4022654e-1f;
    p = p * f + 6.9314720e-1f;
    p = p * f + 1.0f;
    FN(vi) bits = (__builtin_convertvector(n, FN(vi)) + 127) << 23;  /* 2^n */
    FN(vf) r = p * (FN(vf))bits;
    return (FN(vf))((FN(vi))r & ~under);
}

INLINE float FN(hmax)(FN(vf) x) {
    float m = x[0];
    for (int u = 1; u < VL; u++) m = x[u] > m ? x[u] : m;
    return m;
}

INLINE float FN(hsum)(FN(vf) x) {
    float s = 0.0f;
    for (int u = 0; u < VL; u++) s += x[u];
    return s;
}

/* Transpose keys [base, base + cols) of one head into kt (E, ks), zeros outside [0, L). */
INLINE void FN(transpose_keys)(const float *k, int64_t L, int64_t E, int64_t base, int64_t cols,
                               int64_t ks, float *kt) {
    for (int64_t c = 0; c < cols; c++) {
        int64_t key = base + c;
        if (key < 0 || key >= L) {
            for (int64_t e = 0; e < E; e++) kt[e * ks + c] = 0.0f;
        } else {
            const float *row = k + key * E;
            for (int64_t e = 0; e < E; e++) kt[e * ks + c] = row[e];
        }
    }
}

/* s (RT, columns [u0, u1) of a row stride sw) = q rows [i0, i0 + RT) . kt columns
 * [col0 + u0, col0 + u1); u1 - u0 a multiple of NQ * VL; rows past L repeat row i0. */
INLINE void FN(score_tile)(const float *q, int64_t E, int64_t i0, int rows, const float *kt,
                           int64_t ks, int64_t col0, int64_t u0, int64_t u1, int64_t sw,
                           float *s) {
    const float *qr[RT];
    for (int r = 0; r < RT; r++) qr[r] = q + (i0 + (r < rows ? r : 0)) * E;
    for (int64_t jv = u0; jv < u1; jv += NQ * VL) {
        FN(vf) acc[RT][NQ];
        for (int r = 0; r < RT; r++)
            for (int t = 0; t < NQ; t++) acc[r][t] = FN(splat)(0.0f);
        const float *kc = kt + col0 + jv;
        for (int64_t e = 0; e < E; e++) {
            FN(vf) b[NQ];
            for (int t = 0; t < NQ; t++) b[t] = FN(load)(kc + e * ks + t * VL);
            for (int r = 0; r < RT; r++) {
                FN(vf) a = FN(splat)(qr[r][e]);
                for (int t = 0; t < NQ; t++) acc[r][t] += a * b[t];
            }
        }
        for (int r = 0; r < RT; r++)
            for (int t = 0; t < NQ; t++) FN(store)(s + r * sw + jv + t * VL, acc[r][t]);
    }
}

/* Row r of a tile: keep columns [lo, hi] of the computed [u0, u1) (a multiple of VL wide),
 * softmax in base 2 with ``l2s`` = scale * log2(e) folded in; the row becomes unnormalised
 * weights (0 outside [lo, hi]), and 1 / their sum is returned. */
INLINE float FN(softmax_row)(float *sr, int64_t u0, int64_t u1, int64_t lo, int64_t hi,
                             float l2s) {
    const FN(vf) sc = FN(splat)(l2s);
    for (int64_t j = u0; j < u1; j += VL) FN(store)(sr + j, FN(load)(sr + j) * sc);
    for (int64_t j = u0; j < lo; j++) sr[j] = -INFINITY;  /* after scaling: any sign of scale */
    for (int64_t j = hi + 1; j < u1; j++) sr[j] = -INFINITY;
    FN(vf) m = FN(splat)(-INFINITY);
    for (int64_t j = u0; j < u1; j += VL) {
        FN(vf) x = FN(load)(sr + j);
        m = FN(select)(x > m, x, m);
    }
    const FN(vf) mx = FN(splat)(FN(hmax)(m));
    FN(vf) sum = FN(splat)(0.0f);
    for (int64_t j = u0; j < u1; j += VL) {
        FN(vf) p = FN(exp2v)(FN(load)(sr + j) - mx);
        FN(store)(sr + j, p);
        sum += p;
    }
    return 1.0f / FN(hsum)(sum);
}

/* One dense row (L keys) of scores or weights: ``inside`` * src[key - key0] for the keys
 * [key0 + lo, key0 + hi], ``outside`` elsewhere. */
INLINE void FN(dense_row)(float *dst, int64_t L, const float *src, int64_t key0, int64_t lo,
                          int64_t hi, float inside, float outside) {
    for (int64_t key = 0; key < key0 + lo; key++) dst[key] = outside;
    for (int64_t j = lo; j <= hi; j++) dst[key0 + j] = src[j] * inside;
    for (int64_t key = key0 + hi + 1; key < L; key++) dst[key] = outside;
}

/* out rows [p0, p0 + PR) of the tile, columns [ev, ev + nv*VL): Σ_j p[r][j] v[key(j)]. */
INLINE void FN(output_pass)(const float *s, int64_t sw, const float *v, int64_t Ev, int64_t key0,
                            int64_t jlo, int64_t jhi, int p0, int rows, const float *inv,
                            int64_t ev, const int nv, float *out) {
    FN(vf) acc[PR][NP];
    for (int r = 0; r < PR; r++)
        for (int t = 0; t < nv; t++) acc[r][t] = FN(splat)(0.0f);
    for (int64_t j = jlo; j <= jhi; j++) {
        const float *vr = v + (key0 + j) * Ev + ev;
        FN(vf) b[NP];
        for (int t = 0; t < nv; t++) b[t] = FN(load)(vr + t * VL);
        for (int r = 0; r < PR; r++) {
            FN(vf) a = FN(splat)(s[(p0 + r) * sw + j]);
            for (int t = 0; t < nv; t++) acc[r][t] += a * b[t];
        }
    }
    for (int r = 0; r < PR && p0 + r < rows; r++) {
        FN(vf) w = FN(splat)(inv[p0 + r]);
        for (int t = 0; t < nv; t++) FN(store)(out + (int64_t)(p0 + r) * Ev + ev + t * VL, acc[r][t] * w);
    }
}

/* Rows [r0, r1) of head n. */
static KATTR void FN(band_chunk)(const band_args *a, int64_t n, int64_t r0, int64_t r1,
                                 int64_t ks, int64_t sw, float *kt, float *s) {
    const int64_t L = a->L, E = a->E, Ev = a->Ev, reach = a->left + a->right;
    const float *q = a->q + n * L * E, *v = a->v + n * L * Ev;
    const float l2s = (float)(a->scale * 1.4426950408889634);
    FN(transpose_keys)(a->k + n * L * E, L, E, r0 - a->left, (r1 - r0) + sw, ks, kt);
    float inv[RT];
    for (int64_t i0 = r0; i0 < r1; i0 += RT) {
        const int rows = (int)(r1 - i0 < RT ? r1 - i0 : RT);
        const int64_t key0 = i0 - a->left;              /* key of tile column 0 */
        const int64_t first = -key0 > 0 ? -key0 : 0;    /* columns of keys in [0, L) */
        const int64_t last = L - 1 - key0;
        const int64_t jmax = RT - 1 + reach < last ? RT - 1 + reach : last;
        const int64_t u0 = first / VL * VL;             /* the tile's computed columns */
        const int64_t u1 = u0 + (jmax - u0 + NQ * VL) / (NQ * VL) * (NQ * VL);
        const int64_t us = (jmax + VL) / VL * VL;       /* softmax columns [u0, us) */
        FN(score_tile)(q, E, i0, rows, kt, ks, i0 - r0, u0, u1, sw, s);
        for (int r = 0; r < RT; r++) {
            float *sr = s + r * sw;
            if (r >= rows) {
                memset(sr + u0, 0, sizeof(float) * (size_t)(us - u0));
                inv[r] = 0.0f;
                continue;
            }
            const int64_t lo = r > first ? r : first, hi = r + reach < last ? r + reach : last;
            const int64_t row = n * L + i0 + r;
            if (a->scores != NULL)
                FN(dense_row)(a->scores + row * L, L, sr, key0, lo, hi, (float)a->scale, a->blocked);
            inv[r] = FN(softmax_row)(sr, u0, us, lo, hi, l2s);
            if (a->weights != NULL) FN(dense_row)(a->weights + row * L, L, sr, key0, lo, hi, inv[r], 0.0f);
        }
        float *orow = a->out + (n * L + i0) * Ev;
        for (int p0 = 0; p0 < rows; p0 += PR) {
            const int64_t jlo = p0 > first ? p0 : first;
            const int64_t jhi = p0 + PR - 1 + reach < last ? p0 + PR - 1 + reach : last;
            int64_t ev = 0;
            for (; ev + NP * VL <= Ev; ev += NP * VL)
                FN(output_pass)(s, sw, v, Ev, key0, jlo, jhi, p0, rows, inv, ev, NP, orow);
            for (; ev + VL <= Ev; ev += VL)
                FN(output_pass)(s, sw, v, Ev, key0, jlo, jhi, p0, rows, inv, ev, 1, orow);
            for (int r = 0; r < PR && p0 + r < rows; r++) {  /* Ev % VL columns */
                for (int64_t c = ev; c < Ev; c++) {
                    float acc = 0.0f;
                    for (int64_t j = jlo; j <= jhi; j++)
                        acc += s[(p0 + r) * sw + j] * v[(key0 + j) * Ev + c];
                    orow[(int64_t)(p0 + r) * Ev + c] = acc * inv[p0 + r];
                }
            }
        }
    }
}

/* Claim items (one head's chunk of ``a->chunk`` rows) from ``*next`` until none is left,
 * so any number of threads shares the work. Returns 0, or -1 when out of memory. */
static KATTR int FN(band_worker)(const band_args *a, int64_t *next) {
    const int64_t span = RT + a->left + a->right;   /* a tile's union band */
    const int64_t sw = (span + NQ * VL + VL - 1) / VL * VL;  /* with slack for alignment */
    const int64_t ks = (a->chunk + sw + VL - 1) / VL * VL;
    float *kt = malloc(sizeof(float) * (size_t)(a->E * ks));
    float *s = malloc(sizeof(float) * (size_t)(RT * sw));
    if (kt == NULL || s == NULL) {
        free(kt);
        free(s);
        return -1;
    }
    const int64_t chunks = (a->L + a->chunk - 1) / a->chunk;
    for (;;) {
        const int64_t item = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
        if (item >= a->N * chunks) break;
        const int64_t n = item / chunks, r0 = (item % chunks) * a->chunk;
        const int64_t r1 = r0 + a->chunk < a->L ? r0 + a->chunk : a->L;
        FN(band_chunk)(a, n, r0, r1, ks, sw, kt, s);
    }
    free(kt);
    free(s);
    return 0;
}

#undef INLINE
#undef CAT_
#undef CAT
#undef FN
#undef SFX
#undef VL
#undef RT
#undef NQ
#undef PR
#undef NP
#undef KATTR
