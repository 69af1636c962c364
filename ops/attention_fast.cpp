#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/attention.h"
#include "simd/math.h"
#include "simd/microkernel.h"
#include "simd/simd.h"

namespace reftrain {

namespace {

// Logical vector width: head channels and keys are padded to multiples of it, and every sum
// across lanes goes through 16 lanes in a fixed tree, so a native vector of 8 (AVX2) or 16
// (AVX-512) floats computes the same bits.
constexpr int kLanes = 16;
// Queries and keys are walked in square tiles of kTile, so the tiles that straddle the causal
// diagonal are exactly those with query tile == key tile. 32 measured fastest of 16, 32 and 64
// (bench_attention, T = 256 and 2048): 16 pays more per-tile overhead, 64 leaves L1.
constexpr int kTile = 32;

// ---------------------------------------------------------------------------------------------
// The one product every tile uses: C[m][n] (+)= Σ_{p<P} A(m,p)·B[p][n] for m < M, n < N, with
// A(m,p) = a[m·as + p·ap] (any strides) and B[p][n] = b[p·ldb + n] (rows of N contiguous, N a
// multiple of kLanes). Each element of C is one chain of fused multiply-adds in ascending p,
// started from C (kLoad) or from 0: lanes are independent, so no blocking, vector width or
// thread count changes a bit. Blocks of MR rows × NV vectors keep their accumulators in
// registers (half the register file: 16 on AVX-512 and NEON, 8 on AVX2; on AVX-512, 12 and 24
// measured slower): the register micro-kernel of the blocked matmul (simd/microkernel.h), fed from
// the packed head rows in place (B unaligned in general, no bias).

template <typename T, int NV, bool kLoad>
void gemm_rows(T* c, size_t ldc, const T* a, size_t as, size_t ap, const T* b, size_t ldb, int M,
               int P) {
  constexpr int kAcc = simd::kVectorRegisters / 2;
  constexpr int MR = kAcc / NV;
  int m = 0;
  for (; m + MR <= M; m += MR) {
    simd::microkernel::run<T, MR, NV, false>({c + m * ldc, ldc, a + m * as, as, ap, b, ldb}, P,
                                             kLoad, nullptr);
  }
  for (; m < M; ++m) {
    simd::microkernel::run<T, 1, NV, false>({c + m * ldc, ldc, a + m * as, as, ap, b, ldb}, P,
                                            kLoad, nullptr);
  }
}

template <typename T, bool kLoad>
void gemm(T* c, size_t ldc, const T* a, size_t as, size_t ap, const T* b, size_t ldb, int M, int N,
          int P) {
  constexpr int W = int(simd::Batch<T>::size);
  static_assert(kLanes % W == 0, "the logical width must be a whole number of vectors");
  for (int n0 = 0; n0 < N; n0 += 4 * W) {
    T* cn = c + n0;
    const T* bn = b + n0;
    switch (std::min(4, (N - n0) / W)) {
      case 4:
        gemm_rows<T, 4, kLoad>(cn, ldc, a, as, ap, bn, ldb, M, P);
        break;
      case 3:
        gemm_rows<T, 3, kLoad>(cn, ldc, a, as, ap, bn, ldb, M, P);
        break;
      case 2:
        gemm_rows<T, 2, kLoad>(cn, ldc, a, as, ap, bn, ldb, M, P);
        break;
      default:
        gemm_rows<T, 1, kLoad>(cn, ldc, a, as, ap, bn, ldb, M, P);
        break;
    }
  }
}

// The causal products of a diagonal tile, still one ascending chain per element.
// Lower: row r += Σ_{p ≤ r} A(r,p)·B[p] (query r sees keys 0..r). Rows go in groups of G: the
// keys 0..r0 every row of the group sees in one block product, then each row its own r0+1..r.
constexpr int kCausalGroup = 8;

template <typename T>
void gemm_causal_lower(T* c, size_t ldc, const T* a, size_t as, size_t ap, const T* b, size_t ldb,
                       int M, int N) {
  for (int r0 = 0; r0 < M; r0 += kCausalGroup) {
    const int g = std::min(kCausalGroup, M - r0);
    gemm<T, true>(c + r0 * ldc, ldc, a + r0 * as, as, ap, b, ldb, g, N, r0 + 1);
    for (int r = r0 + 1; r < r0 + g; ++r) {
      gemm<T, true>(c + r * ldc, ldc, a + r * as + (r0 + 1) * ap, as, ap, b + (r0 + 1) * ldb, ldb,
                    1, N, r - r0);
    }
  }
}

// Upper: row j += Σ_{j ≤ p < M} A(j,p)·B[p] (key j is seen by queries j..M-1): each row of a
// group first its own p = j..end-1, then the queries end..M-1 every row of the group sees.
template <typename T>
void gemm_causal_upper(T* c, size_t ldc, const T* a, size_t as, size_t ap, const T* b, size_t ldb,
                       int M, int N) {
  for (int j0 = 0; j0 < M; j0 += kCausalGroup) {
    const int end = std::min(j0 + kCausalGroup, M);
    for (int j = j0; j < end; ++j) {
      gemm<T, true>(c + j * ldc, ldc, a + j * as + j * ap, as, ap, b + j * ldb, ldb, 1, N, end - j);
    }
    if (end < M) {
      gemm<T, true>(c + j0 * ldc, ldc, a + j0 * as + end * ap, as, ap, b + end * ldb, ldb, end - j0,
                    N, M - end);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Lane helpers.

// Σ of 16 lanes in a fixed tree: lane j += lane j+8, then +4, +2, +1.
template <typename T>
T sum_lanes(T* lanes) {
  for (int s = kLanes / 2; s >= 1; s /= 2) {
    for (int j = 0; j < s; ++j) lanes[j] += lanes[j + s];
  }
  return lanes[0];
}

// a · b over n elements: lane j takes the elements i ≡ j (mod 16) in ascending i, then sum_lanes.
template <typename T>
T dot_lanes(const T* a, const T* b, int n) {
  using V = simd::Batch<T>;
  constexpr int W = int(V::size), G = kLanes / W;
  V acc[G];
  for (int g = 0; g < G; ++g) acc[g] = V(T(0));
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int g = 0; g < G; ++g) {
      acc[g] =
          simd::fma(V::load_unaligned(a + i + g * W), V::load_unaligned(b + i + g * W), acc[g]);
    }
  }
  alignas(64) T lanes[kLanes];
  for (int g = 0; g < G; ++g) acc[g].store_aligned(lanes + g * W);
  for (int j = 0; i + j < n; ++j) lanes[j] = simd::fma(a[i + j], b[i + j], lanes[j]);
  return sum_lanes(lanes);
}

template <typename T>
T max_lane(const simd::Batch<T>& x) {
  alignas(64) T v[simd::Batch<T>::size];
  x.store_aligned(v);
  T m = v[0];
  for (T e : v) m = std::max(m, e);
  return m;
}

// exp of every lane: simd::exp for float (the same bits on every ISA); the double oracle uses
// libm's exp lane by lane.
inline simd::Batch<float> exp_lanes(const simd::Batch<float>& x) {
  return simd::exp(x);
}
inline simd::Batch<double> exp_lanes(const simd::Batch<double>& x) {
  alignas(64) double v[simd::Batch<double>::size];
  x.store_aligned(v);
  for (double& e : v) e = std::exp(e);
  return simd::Batch<double>::load_aligned(v);
}

// ---------------------------------------------------------------------------------------------
// One head's operands, packed by the thread that works on it.

struct Dims {
  int hs, hsp, Tn, Tp, NB;  // head size, padded to kLanes; T, padded to kTile; tiles
};

Dims make_dims(int Tn, int hs) {
  return {hs, simd::round_up(hs, kLanes), Tn, simd::round_up(Tn, kTile), (Tn + kTile - 1) / kTile};
}

template <typename T>
struct Carver {
  T* base;
  size_t used = 0;
  T* take(size_t n) {
    T* p = base ? base + used : nullptr;
    used += size_t(simd::round_up(int(n), 64 / int(sizeof(T))));
    return p;
  }
};

// kt, vt [NB][hs][kTile]: channel i of key u at [(u / kTile)·hs·kTile + i·kTile + u % kTile], so
// a score tile's lanes run over keys and the panel of one key tile is 8 KiB in one piece. (With
// rows of Tp keys, 1 KiB apart at T = 256, the 64 rows a tile reads fell into 8 of L1's 64 sets:
// the score products took 1.4x the time per FLOP of the others on a Zen 3 core.)
// k, v, q, dout [Tp][hsp]: rows, channels zero-padded to hsp. lse, d [Tp]. The forward packs
// k, kt and v; the backward all of them (kt and vt are transposed from the packed rows, which
// are contiguous and cache-resident, rather than from the strided qkv).
template <typename T>
struct Workspace {
  T *kt, *vt, *k, *v, *q, *dout, *lse, *d;
  T *s, *ds;        // tiles [kTile][kTile]: scores, then probabilities; dp, then ds
  T *acc, *m, *l;   // forward: [kTile][hsp] running outputs, [kTile] maxima, [kTile][kLanes] sums
  T *dq, *dk, *dv;  // backward: dq [Tp][hsp] (one head's), dk and dv [kTile][hsp]
};

template <typename T>
Workspace<T> carve_workspace(Carver<T>& c, const Dims& d, bool backward) {
  const size_t rows = size_t(d.Tp) * d.hsp, cols = size_t(d.hs) * d.Tp, tile = kTile * d.hsp;
  Workspace<T> w{};
  w.kt = c.take(cols), w.k = c.take(rows), w.v = c.take(rows);
  w.s = c.take(kTile * kTile);
  if (!backward) {
    w.acc = c.take(tile), w.m = c.take(kTile), w.l = c.take(kTile * kLanes);
    return w;
  }
  w.vt = c.take(cols), w.q = c.take(rows), w.dout = c.take(rows);
  w.lse = c.take(d.Tp), w.d = c.take(d.Tp), w.ds = c.take(kTile * kTile);
  w.dq = c.take(rows), w.dk = c.take(tile), w.dv = c.take(tile);
  return w;
}

// This thread's workspace: grows to the largest request, then is reused by every later call,
// so a training step allocates nothing once the first step has run.
template <typename T>
Workspace<T> thread_workspace(const Dims& d, bool backward) {
  static thread_local std::vector<T> buf;
  Carver<T> count{nullptr};
  carve_workspace(count, d, backward);
  const size_t pad = 64 / sizeof(T);
  if (buf.size() < count.used + pad) buf.resize(count.used + pad);
  const size_t misalign = reinterpret_cast<uintptr_t>(buf.data()) % 64;
  Carver<T> c{buf.data() + (misalign ? (64 - misalign) / sizeof(T) : 0)};
  return carve_workspace(c, d, backward);
}

// src rows t (stride ld) of one head's q, k, v, out or dout.
template <typename T>
void pack_rows(T* dst, const T* src, size_t ld, const Dims& d) {
  for (int t = 0; t < d.Tp; ++t) {
    T* row = dst + size_t(t) * d.hsp;
    if (t < d.Tn) std::copy(src + t * ld, src + t * ld + d.hs, row);
    std::fill(row + (t < d.Tn ? d.hs : 0), row + d.hsp, T(0));
  }
}

// The panel [hs][kTile] of the key tile that starts at key u0 (a multiple of kTile).
template <typename T>
T* key_panel(T* kt, int u0, const Dims& d) {
  return kt + size_t(u0) * d.hs;
}

// The key-tile panels of kt (or vt) from the packed rows (zero-padded to Tp): dst[(t / kTile)·
// hs·kTile + i·kTile + t % kTile] = rows[t·hsp + i]. In blocks of 16 rows, so each channel's 16
// values are gathered from 4 KiB in L1 and written contiguously.
template <typename T>
void pack_transposed(T* dst, const T* rows, const Dims& d) {
  constexpr int kRows = 16;
  for (int t0 = 0; t0 < d.Tp; t0 += kRows) {
    const T* block = rows + size_t(t0) * d.hsp;
    for (int i = 0; i < d.hs; ++i) {
      T* col = key_panel(dst, t0 - t0 % kTile, d) + size_t(i) * kTile + t0 % kTile;
      for (int j = 0; j < kRows; ++j) col[j] = block[j * d.hsp + i];
    }
  }
}

// Where head (b, h) lives in the packed qkv (and dqkv) and in out (and dout).
struct HeadAt {
  size_t qkv, row;  // offsets of row 0 of the head's q in qkv, and of its channels in out
  size_t ld3;       // 3C
  size_t ld;        // C
};

HeadAt head_at(int b, int h, int Tn, int C, int hs) {
  return {size_t(b) * Tn * 3 * C + size_t(h) * hs, size_t(b) * Tn * C + size_t(h) * hs,
          size_t(3) * C, size_t(C)};
}

// dst rows (stride ld) += src rows (stride hsp), channels < hs; with accumulate false,
// dst = 0 + src (dst never read). Every element of dqkv is written by one such call.
template <typename T>
void add_rows(T* dst, size_t ld, const T* src, int rows, const Dims& d, bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < d.hs; ++i) {
      dst[r * ld + i] = (accumulate ? dst[r * ld + i] : T(0)) + src[size_t(r) * d.hsp + i];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Work sharing: units [0, n), each of cost(k) ≥ 1, cut into contiguous ranges of about equal
// cost, one per thread (unit k goes to the thread in whose share the middle of its cost falls).
// Only the speed depends on the cut: every unit computes the same bits wherever it runs.
struct Range {
  int begin, end;
};

template <typename Cost>
Range balanced_range(int n, Cost cost, int tid, int nt) {
  int64_t total = 0;
  for (int k = 0; k < n; ++k) total += cost(k);
  Range r{n, n};
  int64_t before = 0;
  for (int k = 0; k < n; ++k) {
    const int64_t c = cost(k);
    const int owner = int(std::min<int64_t>(nt - 1, (2 * before + c) * nt / (2 * total)));
    if (owner == tid && r.begin == n) r.begin = k;
    if (owner > tid) {
      r.end = k;
      break;
    }
    before += c;
  }
  if (r.begin == n) r.end = n;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Forward.

// Row s[0..kTile) of raw q·k becomes p = exp(s·scale − m_new), 0 for keys j ≥ limit; the running
// max m, the 16 lane sums l and the row's output acc (hsp) are rescaled by exp(m − m_new) first.
template <typename T>
void online_softmax_step(T* s, T& m, T* l, T* acc, int hsp, int limit, T scale) {
  using V = simd::Batch<T>;
  constexpr int W = int(V::size);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (int j = limit; j < kTile; ++j) s[j] = kNegInf;  // keys after the query: masked
  V vmax(kNegInf);
  for (int j = 0; j < kTile; j += W) {
    const V x = V::load_unaligned(s + j) * V(scale);
    x.store_unaligned(s + j);
    vmax = xsimd::select(x > vmax, x, vmax);  // (xsimd::max: a false GCC 12 warning)
  }
  const T m_new = std::max(m, max_lane(vmax));
  if (m != kNegInf && m_new != m) {  // (on the first tile l and acc are still 0)
    const T c = simd::exp(m - m_new);
    for (int j = 0; j < kLanes; ++j) l[j] *= c;
    for (int i = 0; i < hsp; ++i) acc[i] *= c;
  }
  m = m_new;
  for (int j = 0; j < kTile; j += W) {
    exp_lanes(V::load_unaligned(s + j) - V(m)).store_unaligned(s + j);
  }
  for (int j = limit; j < kTile; ++j) s[j] = 0;
  for (int j = 0; j < kTile; j += W) {
    T* lj = l + j % kLanes;
    (V::load_unaligned(lj) + V::load_unaligned(s + j)).store_unaligned(lj);
  }
}

// Query tile qb of one head: out rows (stride ldo) and lse, from q rows (stride ldq) and the
// packed kt and v.
template <typename T>
void forward_query_tile(T* out, size_t ldo, T* lse, const T* q, size_t ldq, const Workspace<T>& w,
                        const Dims& d, int qb, T scale) {
  const int t0 = qb * kTile, rows = std::min(kTile, d.Tn - t0), hsp = d.hsp;
  std::fill(w.acc, w.acc + size_t(rows) * hsp, T(0));
  std::fill(w.l, w.l + rows * kLanes, T(0));
  std::fill(w.m, w.m + rows, -std::numeric_limits<T>::infinity());
  for (int kb = 0; kb <= qb; ++kb) {
    const int u0 = kb * kTile;
    const bool diag = kb == qb;
    gemm<T, false>(w.s, kTile, q + t0 * ldq, ldq, 1, key_panel(w.kt, u0, d), kTile, rows, kTile,
                   d.hs);
    for (int r = 0; r < rows; ++r) {
      online_softmax_step(w.s + r * kTile, w.m[r], w.l + r * kLanes, w.acc + size_t(r) * hsp, hsp,
                          diag ? r + 1 : kTile, scale);
    }
    const T* v = w.v + size_t(u0) * hsp;
    if (diag) {
      gemm_causal_lower(w.acc, hsp, w.s, kTile, 1, v, hsp, rows, hsp);
    } else {
      gemm<T, true>(w.acc, hsp, w.s, kTile, 1, v, hsp, rows, hsp, kTile);
    }
  }
  for (int r = 0; r < rows; ++r) {
    alignas(64) T lanes[kLanes];
    std::copy(w.l + r * kLanes, w.l + (r + 1) * kLanes, lanes);
    const T sum = sum_lanes(lanes);
    const T* acc = w.acc + size_t(r) * hsp;
    for (int i = 0; i < d.hs; ++i) out[(t0 + r) * ldo + i] = acc[i] / sum;
    lse[t0 + r] = T(double(w.m[r]) + std::log(double(sum)));
  }
}

}  // namespace

template <typename T>
void attention_forward_fast(T* out, T* lse, const T* qkv, int B, int Tn, int C, int NH) {
  const Dims d = make_dims(Tn, C / NH);
  const T scale = T(1) / std::sqrt(T(d.hs));
  const int units = B * NH * d.NB;  // (head, query tile); a query tile costs its key tiles
#pragma omp parallel
  {
    const Range range = balanced_range(
        units, [&d](int k) { return k % d.NB + 1; }, omp_get_thread_num(), omp_get_num_threads());
    const Workspace<T> w = thread_workspace<T>(d, false);
    int packed = -1;
    for (int k = range.begin; k < range.end; ++k) {
      const int bh = k / d.NB, b = bh / NH, h = bh % NH;
      const HeadAt at = head_at(b, h, Tn, C, d.hs);
      if (bh != packed) {
        pack_rows(w.k, qkv + at.qkv + C, at.ld3, d);
        pack_rows(w.v, qkv + at.qkv + 2 * size_t(C), at.ld3, d);
        pack_transposed(w.kt, w.k, d);
        packed = bh;
      }
      forward_query_tile(out + at.row, at.ld, lse + size_t(bh) * Tn, qkv + at.qkv, at.ld3, w, d,
                         k % d.NB, scale);
    }
  }
}

namespace {

// Query row t alone, against the packed kt and v of keys 0..t: the steps forward_query_tile
// takes for that row of its tile. Its key tiles, the scores' chains over hs, the online-softmax
// steps with the diagonal tile masked after key t, and the output's chain over keys are the
// same; the diagonal's causal product (gemm_causal_lower: keys 0..r0, then r0+1..r) is one chain
// over keys 0..r here, which continues from the stored accumulator with the same FMAs.
template <typename T>
void decode_query_row(T* out, T* lse, const T* q, const Workspace<T>& w, const Dims& d, int t,
                      T scale) {
  const int hsp = d.hsp, qb = t / kTile;
  std::fill(w.acc, w.acc + hsp, T(0));
  std::fill(w.l, w.l + kLanes, T(0));
  T m = -std::numeric_limits<T>::infinity();
  for (int kb = 0; kb <= qb; ++kb) {
    const int u0 = kb * kTile, keys = kb == qb ? t - u0 + 1 : kTile;
    gemm<T, false>(w.s, kTile, q, 0, 1, key_panel(w.kt, u0, d), kTile, 1, kTile, d.hs);
    online_softmax_step(w.s, m, w.l, w.acc, hsp, keys, scale);
    gemm<T, true>(w.acc, hsp, w.s, kTile, 1, w.v + size_t(u0) * hsp, hsp, 1, hsp, keys);
  }
  alignas(64) T lanes[kLanes];
  std::copy(w.l, w.l + kLanes, lanes);
  const T sum = sum_lanes(lanes);
  for (int i = 0; i < d.hs; ++i) out[i] = w.acc[i] / sum;
  *lse = T(double(m) + std::log(double(sum)));
}

}  // namespace

// Parallel over heads; each thread packs its head's keys and values 0..t as the forward does.
template <typename T>
void attention_decode_fast(T* out, T* lse, const T* qkv, int t, int C, int NH) {
  const Dims d = make_dims(t + 1, C / NH);
  const T scale = T(1) / std::sqrt(T(d.hs));
#pragma omp parallel
  {
    const Workspace<T> w = thread_workspace<T>(d, false);
#pragma omp for schedule(static)
    for (int h = 0; h < NH; ++h) {
      const HeadAt at = head_at(0, h, t + 1, C, d.hs);
      pack_rows(w.k, qkv + at.qkv + C, at.ld3, d);
      pack_rows(w.v, qkv + at.qkv + 2 * size_t(C), at.ld3, d);
      pack_transposed(w.kt, w.k, d);
      decode_query_row(out + size_t(h) * d.hs, lse + h, qkv + at.qkv + size_t(t) * at.ld3, w, d, t,
                       scale);
    }
  }
}

namespace {

// ---------------------------------------------------------------------------------------------
// Backward.

// Packs head (b, h) for the backward: k, v, their transposes, q, dout, lse and D_t = dout_t ·
// out_t.
template <typename T>
void pack_backward(const Workspace<T>& w, const T* dout, const T* qkv, const T* out, const T* lse,
                   const HeadAt& at, size_t C, const Dims& d) {
  pack_rows(w.k, qkv + at.qkv + C, at.ld3, d);
  pack_rows(w.v, qkv + at.qkv + 2 * C, at.ld3, d);
  pack_transposed(w.kt, w.k, d);
  pack_transposed(w.vt, w.v, d);
  pack_rows(w.q, qkv + at.qkv, at.ld3, d);
  pack_rows(w.dout, dout + at.row, at.ld, d);
  for (int t = 0; t < d.Tn; ++t) {
    w.lse[t] = lse[t];
    w.d[t] = dot_lanes(dout + at.row + t * at.ld, out + at.row + t * at.ld, d.hs);
  }
}

// The tile (queries t0.., keys u0..): w.s = p = exp(s − lse_t) and w.ds = p·(dp − D_t)·scale,
// both 0 for keys after the query on a diagonal tile.
template <typename T>
void backward_tile(const Workspace<T>& w, const Dims& d, int t0, int u0, int rows, bool diag,
                   T scale) {
  using V = simd::Batch<T>;
  constexpr int W = int(V::size);
  const size_t hsp = d.hsp;
  gemm<T, false>(w.s, kTile, w.q + t0 * hsp, hsp, 1, key_panel(w.kt, u0, d), kTile, rows, kTile,
                 d.hs);
  gemm<T, false>(w.ds, kTile, w.dout + t0 * hsp, hsp, 1, key_panel(w.vt, u0, d), kTile, rows, kTile,
                 d.hs);
  for (int r = 0; r < rows; ++r) {
    T* p = w.s + r * kTile;
    T* ds = w.ds + r * kTile;
    const V lse(w.lse[t0 + r]), D(w.d[t0 + r]), sc(scale);
    for (int j = 0; j < kTile; j += W) {
      const V pj = exp_lanes(V::load_unaligned(p + j) * sc - lse);
      pj.store_unaligned(p + j);
      ((pj * (V::load_unaligned(ds + j) - D)) * sc).store_unaligned(ds + j);
    }
    for (int j = diag ? r + 1 : kTile; j < kTile; ++j) p[j] = ds[j] = 0;
  }
}

// dq rows of the tile (stride hsp) += ds · k.
template <typename T>
void accumulate_dq(T* dq, const Workspace<T>& w, const Dims& d, int u0, int rows, bool diag) {
  const T* k = w.k + size_t(u0) * d.hsp;
  if (diag) {
    gemm_causal_lower(dq, d.hsp, w.ds, kTile, 1, k, d.hsp, rows, d.hsp);
  } else {
    gemm<T, true>(dq, d.hsp, w.ds, kTile, 1, k, d.hsp, rows, d.hsp, kTile);
  }
}

// w.dk += dsᵀ · q and w.dv += pᵀ · dout over the tile's rows t0..t0+rows-1.
template <typename T>
void accumulate_dkdv(const Workspace<T>& w, const Dims& d, int t0, int rows, bool diag) {
  const T* q = w.q + size_t(t0) * d.hsp;
  const T* g = w.dout + size_t(t0) * d.hsp;
  if (diag) {
    gemm_causal_upper(w.dk, d.hsp, w.ds, 1, kTile, q, d.hsp, rows, d.hsp);
    gemm_causal_upper(w.dv, d.hsp, w.s, 1, kTile, g, d.hsp, rows, d.hsp);
  } else {
    gemm<T, true>(w.dk, d.hsp, w.ds, 1, kTile, q, d.hsp, kTile, d.hsp, rows);
    gemm<T, true>(w.dv, d.hsp, w.s, 1, kTile, g, d.hsp, kTile, d.hsp, rows);
  }
}

int tile_rows(const Dims& d, int tile) {
  return std::min(kTile, d.Tn - tile * kTile);
}

// Key tile kb of a packed head, over every query tile that sees it: dk and dv rows += .
// With dq non-null, also dq (the whole head's, [Tp][hsp]) += each tile's ds·k.
template <typename T>
void backward_key_tile(T* dk, T* dv, size_t ld, T* dq, const Workspace<T>& w, const Dims& d, int kb,
                       T scale, bool accumulate) {
  const int u0 = kb * kTile;
  std::fill(w.dk, w.dk + kTile * d.hsp, T(0));
  std::fill(w.dv, w.dv + kTile * d.hsp, T(0));
  for (int qb = kb; qb < d.NB; ++qb) {
    const int t0 = qb * kTile, rows = tile_rows(d, qb);
    backward_tile(w, d, t0, u0, rows, qb == kb, scale);
    if (dq) accumulate_dq(dq + size_t(t0) * d.hsp, w, d, u0, rows, qb == kb);
    accumulate_dkdv(w, d, t0, rows, qb == kb);
  }
  add_rows(dk + u0 * ld, ld, w.dk, tile_rows(d, kb), d, accumulate);
  add_rows(dv + u0 * ld, ld, w.dv, tile_rows(d, kb), d, accumulate);
}

// Query tile qb of a packed head, over every key tile it sees: dq rows += .
template <typename T>
void backward_query_tile(T* dq, size_t ld, const Workspace<T>& w, const Dims& d, int qb, T scale,
                         bool accumulate) {
  const int t0 = qb * kTile, rows = tile_rows(d, qb);
  std::fill(w.dq, w.dq + size_t(rows) * d.hsp, T(0));
  for (int kb = 0; kb <= qb; ++kb) {
    backward_tile(w, d, t0, kb * kTile, rows, kb == qb, scale);
    accumulate_dq(w.dq, w, d, kb * kTile, rows, kb == qb);
  }
  add_rows(dq + t0 * ld, ld, w.dq, rows, d, accumulate);
}

// The two-pass split does 7 tile products per (query tile, key tile) where the per-head split
// does 5, but the per-head split's busiest thread has ⌈heads/threads⌉ heads. Measured
// (bench_attention, 1 thread, T = 256 to 2048): the two-pass backward takes 1.40–1.47× the
// per-head one, as the product count predicts.
bool per_head_is_faster(int heads, int threads) {
  const int64_t busiest = (heads + threads - 1) / threads;
  return 5 * busiest * threads <= 7 * int64_t(heads);
}

struct BackwardArgs {
  int B, Tn, C, NH;
};

// A parallel pass over `units` (cost(k) each), packing a head whenever a unit is of a new one
// and calling work(workspace, bh, head, unit).
template <typename T, typename Cost, typename Work>
void backward_pass(const T* dout, const T* qkv, const T* out, const T* lse, const BackwardArgs& a,
                   const Dims& d, int units, int units_per_head, Cost cost, Work work) {
#pragma omp parallel
  {
    const Range range = balanced_range(units, cost, omp_get_thread_num(), omp_get_num_threads());
    const Workspace<T> w = thread_workspace<T>(d, true);
    int packed = -1;
    for (int k = range.begin; k < range.end; ++k) {
      const int bh = k / units_per_head;
      const HeadAt at = head_at(bh / a.NH, bh % a.NH, a.Tn, a.C, d.hs);
      if (bh != packed) {
        pack_backward(w, dout, qkv, out, lse + size_t(bh) * a.Tn, at, size_t(a.C), d);
        packed = bh;
      }
      work(w, at, k % units_per_head);
    }
  }
}

}  // namespace

template <typename T>
void attention_backward_fast(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                             int B, int Tn, int C, int NH, AttentionSplit split, bool accumulate) {
  const Dims d = make_dims(Tn, C / NH);
  const T scale = T(1) / std::sqrt(T(d.hs));
  const BackwardArgs a{B, Tn, C, NH};
  const int heads = B * NH, NB = d.NB;
  if (split == AttentionSplit::kAuto) {
    split = per_head_is_faster(heads, omp_get_max_threads()) ? AttentionSplit::kPerHead
                                                             : AttentionSplit::kTwoPass;
  }
  if (split == AttentionSplit::kPerHead) {
    backward_pass(
        dout, qkv, out, lse, a, d, heads, 1, [](int) { return 1; },
        [&](const Workspace<T>& w, const HeadAt& at, int) {
          T* g = dqkv + at.qkv;
          std::fill(w.dq, w.dq + size_t(d.Tp) * d.hsp, T(0));
          for (int kb = 0; kb < NB; ++kb) {
            backward_key_tile(g + C, g + 2 * size_t(C), at.ld3, w.dq, w, d, kb, scale, accumulate);
          }
          add_rows(g, at.ld3, w.dq, Tn, d, accumulate);
        });
    return;
  }
  backward_pass(
      dout, qkv, out, lse, a, d, heads * NB, NB, [NB](int k) { return k % NB + 1; },
      [&](const Workspace<T>& w, const HeadAt& at, int qb) {
        backward_query_tile(dqkv + at.qkv, at.ld3, w, d, qb, scale, accumulate);
      });
  backward_pass(
      dout, qkv, out, lse, a, d, heads * NB, NB, [NB](int k) { return NB - k % NB; },
      [&](const Workspace<T>& w, const HeadAt& at, int kb) {
        T* g = dqkv + at.qkv;
        backward_key_tile(g + C, g + 2 * size_t(C), at.ld3, static_cast<T*>(nullptr), w, d, kb,
                          scale, accumulate);
      });
}

size_t attention_fast_workspace_bytes(int Tn, int hs, bool backward, size_t elem_bytes) {
  const Dims d = make_dims(Tn, hs);
  if (elem_bytes == sizeof(double)) {
    Carver<double> c{nullptr};
    carve_workspace(c, d, backward);
    return c.used * sizeof(double);
  }
  Carver<float> c{nullptr};
  carve_workspace(c, d, backward);
  return c.used * sizeof(float);
}

#define REFTRAIN_INSTANTIATE(T)                                                                  \
  template void attention_forward_fast<T>(T*, T*, const T*, int, int, int, int);                 \
  template void attention_decode_fast<T>(T*, T*, const T*, int, int, int);                       \
  template void attention_backward_fast<T>(T*, const T*, const T*, const T*, const T*, int, int, \
                                           int, int, AttentionSplit, bool);
REFTRAIN_INSTANTIATE(float)
REFTRAIN_INSTANTIATE(double)
#undef REFTRAIN_INSTANTIATE

}  // namespace reftrain
