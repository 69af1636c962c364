// The kernels of text generation with a KV cache (Model::decode): each computes one position
// exactly as the whole-sequence kernel computes that row, so these tests demand equal bits, not
// closeness.
//   attention_decode / attention_decode_fast: row t of attention_forward / attention_forward_fast
//     (out, the row's probabilities or logsumexp), given only rows 0..t of qkv, for T across tile
//     boundaries (1, 33, 70), padded and unpadded head sizes, 1-3 threads, float and double, and
//     (x86) the AVX2 build.
//   rope at t0: one row rotated at position t0 is row t0 of the rotation of all rows.
//   the one-row product against a transposed B (the linear forward of one token, which the
//     tiled and blocked matmuls run as a GEMV): the naive loop's bits, for f32 and f16 weights.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "ops/attention.h"
#include "ops/cast.h"
#include "ops/matmul.h"
#include "ops/rope.h"
#ifdef REFTRAIN_AVX2_TWIN
#include "tests/common/avx2_kernels.h"
#endif
#include "tests/common/op_check.h"

namespace reftrain {
namespace {

using op_check::cast;
using op_check::Data;

template <typename T>
bool same_bytes(const T* a, const T* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

// Runs body with n OpenMP threads, then restores the previous count.
template <typename F>
void with_omp_threads(int n, F&& body) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(n);
  body();
  omp_set_num_threads(before);
}

struct AttnShape {
  int T, NH, hs;
  int C() const { return NH * hs; }
};

// Every row t of the forward over T rows against the decode of row t from a copy of rows 0..t
// only (so a read past row t would read other data, or past the buffer under the sanitizer).
template <typename T>
void check_attention_decode(const AttnShape& s) {
  const int C = s.C(), NH = s.NH, Tn = s.T;
  Data d(3);
  const std::vector<T> qkv = cast<T>(d.vec(size_t(Tn) * 3 * C, -1.5, 1.5));
  std::vector<T> out_ref(size_t(Tn) * C), att(size_t(NH) * Tn * Tn);
  std::vector<T> out_fast(size_t(Tn) * C), lse(size_t(NH) * Tn);
  attention_forward(out_ref.data(), att.data(), qkv.data(), 1, Tn, C, NH);
  attention_forward_fast(out_fast.data(), lse.data(), qkv.data(), 1, Tn, C, NH);
  for (int t = 0; t < Tn; ++t) {
    const std::vector<T> rows(qkv.begin(), qkv.begin() + std::ptrdiff_t(t + 1) * 3 * C);
    std::vector<T> out(static_cast<size_t>(C)), p(size_t(NH) * (t + 1)),
        row_lse(static_cast<size_t>(NH));
    attention_decode(out.data(), p.data(), rows.data(), t, C, NH);
    EXPECT_TRUE(same_bytes(out.data(), out_ref.data() + size_t(t) * C, size_t(C))) << "t " << t;
    for (int h = 0; h < NH; ++h) {
      const T* want = att.data() + (size_t(h) * Tn + t) * Tn;
      EXPECT_TRUE(same_bytes(p.data() + size_t(h) * (t + 1), want, size_t(t + 1))) << "t " << t;
    }
    attention_decode_fast(out.data(), row_lse.data(), rows.data(), t, C, NH);
    EXPECT_TRUE(same_bytes(out.data(), out_fast.data() + size_t(t) * C, size_t(C))) << "t " << t;
    for (int h = 0; h < NH; ++h) EXPECT_EQ(row_lse[size_t(h)], lse[size_t(h) * Tn + t]);
  }
}

TEST(AttentionDecode, RowOfTheForwardForAnyThreadCount) {
  for (const AttnShape s :
       {AttnShape{1, 3, 12}, AttnShape{33, 3, 12}, AttnShape{70, 2, 64}, AttnShape{70, 3, 20}}) {
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message()
                   << "T " << s.T << " NH " << s.NH << " hs " << s.hs << " threads " << threads);
      with_omp_threads(threads, [&] {
        check_attention_decode<float>(s);
        check_attention_decode<double>(s);
      });
    }
  }
}

#ifdef REFTRAIN_AVX2_TWIN
// The AVX2 build's decode gives the native build's bits.
TEST(AttentionDecode, SameBitsAsTheAvx2Build) {
  const int Tn = 45, NH = 3, hs = 20, C = NH * hs;
  Data d(4);
  const std::vector<float> qkv = cast<float>(d.vec(size_t(Tn) * 3 * C, -1.5, 1.5));
  std::vector<float> native(static_cast<size_t>(C)), avx2(static_cast<size_t>(C)),
      lse_n(static_cast<size_t>(NH)), lse_a(static_cast<size_t>(NH));
  for (int t : {0, 31, 32, 44}) {
    attention_decode_fast(native.data(), lse_n.data(), qkv.data(), t, C, NH);
    reftrain_avx2::attention_decode_fast(avx2.data(), lse_a.data(), qkv.data(), t, C, NH);
    EXPECT_TRUE(same_bytes(native.data(), avx2.data(), native.size())) << "t " << t;
    EXPECT_TRUE(same_bytes(lse_n.data(), lse_a.data(), lse_n.size())) << "t " << t;
  }
}
#endif

// Row t0 rotated alone at position t0 is row t0 of the rotation of rows 0..T-1 (forward and
// backward, reference and fast).
TEST(RopeDecode, OneRowAtItsPositionIsThatRowOfTheWhole) {
  const int Tn = 50, NH = 3, hs = 20, C = NH * hs;
  const double theta = 10000.0;
  Data d(5);
  const std::vector<float> x = cast<float>(d.vec(size_t(Tn) * C, -1, 1));
  std::vector<float> all(x.size()), all_fast(x.size()), back(x.size(), 0.5f);
  rope_forward(all.data(), x.data(), 1, Tn, NH, hs, theta);
  rope_forward_fast(all_fast.data(), x.data(), 1, Tn, NH, hs, theta);
  rope_backward(back.data(), x.data(), 1, Tn, NH, hs, theta);
  for (int t : {0, 1, 17, 49}) {
    const float* row = x.data() + size_t(t) * C;
    std::vector<float> one(static_cast<size_t>(C)), one_fast(static_cast<size_t>(C)),
        one_back(size_t(C), 0.5f);
    rope_forward(one.data(), row, 1, 1, NH, hs, theta, t);
    rope_forward_fast(one_fast.data(), row, 1, 1, NH, hs, theta, t);
    rope_backward(one_back.data(), row, 1, 1, NH, hs, theta, t);
    EXPECT_TRUE(same_bytes(one.data(), all.data() + size_t(t) * C, size_t(C))) << t;
    EXPECT_TRUE(same_bytes(one_fast.data(), all_fast.data() + size_t(t) * C, size_t(C))) << t;
    EXPECT_TRUE(same_bytes(one_back.data(), back.data() + size_t(t) * C, size_t(C))) << t;
  }
}

// c[1×N] (+)= a[1×K]·Bᵀ (+ bias) with B [N,K] in BT: every variant but eigen against the naive
// loop, bit for bit, for N around the GEMV's blocks of 8 and 32 and K around its 8×8 tiles.
template <typename BT>
void check_one_row(MatmulKind kind, int threads) {
  Data d(6);
  for (int N : {1, 7, 8, 33, 100}) {
    for (int K : {1, 8, 17, 64}) {
      const std::vector<float> a = cast<float>(d.vec(size_t(K), -1, 1));
      const std::vector<float> bias = cast<float>(d.vec(size_t(N), -1, 1));
      const std::vector<float> b32 = cast<float>(d.vec(size_t(N) * K, -1, 1));
      std::vector<BT> b(b32.size());
      if constexpr (std::is_same_v<BT, f16>) {
        cast_f32_to_f16(b.data(), b32.data(), b.size());
      } else {
        b = b32;
      }
      const std::vector<float> c0 = cast<float>(d.vec(size_t(N), -1, 1));
      for (bool accumulate : {false, true}) {
        for (const float* bi : {static_cast<const float*>(nullptr), bias.data()}) {
          std::vector<float> want = c0, got = c0;
          Gemm<float, BT> g{1,         N,          K,           a.data(),  Trans::kNo,
                            size_t(K), b.data(),   Trans::kYes, size_t(K), want.data(),
                            size_t(N), accumulate, bi};
          Matmul(MatmulKind::kNaive).run(g);
          g.c = got.data();
          Matmul(kind, threads).run(g);
          EXPECT_TRUE(same_bytes(got.data(), want.data(), want.size()))
              << "N " << N << " K " << K << " accumulate " << accumulate << " bias " << !!bi;
        }
      }
    }
  }
}

TEST(MatmulOneRow, TransposedBIsTheNaiveProduct) {
  for (MatmulKind kind : {MatmulKind::kTiled, MatmulKind::kBlocked}) {
    for (int threads : {1, 2, 3}) {
      with_omp_threads(threads, [&] {
        check_one_row<float>(kind, threads);
        check_one_row<f16>(kind, threads);
      });
    }
  }
}

}  // namespace
}  // namespace reftrain
