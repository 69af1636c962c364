// The matmul family (ops/matmul.h) and the linear layer on top of it (ops/linear.h). The
// linear layer's backward is also checked against central finite differences of its own forward
// in double, with accumulation, float against double and the forward against its formula
// (tests/common/op_check.h; at the end of this file).
//
// Two oracles:
//   - naive, the textbook loop: tiled and blocked must equal it bit for bit (the same FMA chain
//     per output), on every shape, layout, thread count and ISA;
//   - the exact product, computed in long double (a float or double product of two operands is
//     exact in it, and its 64-bit sums err ~2^-64 relative): every variant, eigen included,
//     must be within the rounding bound below.
//
// Tolerance, per element: |C − exact| ≤ γ(K+3) · S, S = |C0| + Σ_p |A(i,p)·B(p,j)| + |bias_j|,
// γ(n) = n·u/(1 − n·u), u = 2^-24 (float) or 2^-53 (double). Why: every term of the sum reaches
// the result through at most K + 3 roundings — an FMA chain of K steps (naive, tiled, blocked),
// or for eigen a chain over its K block, one add per K block into C and possibly one to merge
// two partial accumulators (kc + ceil(K/kc) ≤ K + 1) — plus the bias add; the standard bound
// for a sum evaluated with at most n roundings per term is γ(n)·Σ|terms| (Higham, Accuracy and
// Stability, §3.1/§4.2). The bound is per element and relative to that element's own magnitude
// S, so it is tight where it matters: a dropped or doubled term, a garbage edge lane or a wrong
// row moves an element by about one term, |A·B| ~ S/K, two to three orders above γ(K+3)·S
// (checked once by planting such bugs in the edge path: every one failed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/model/model_config.h"
#include "ops/cast.h"
#include "ops/linear.h"
#include "ops/matmul.h"
#include "tests/common/op_check.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using namespace op_check;
using testing::OmpThreads;
using testing::TestData;

constexpr MatmulKind kAllKinds[] = {MatmulKind::kNaive, MatmulKind::kTiled, MatmulKind::kBlocked,
                                    MatmulKind::kEigen};
constexpr MatmulKind kPackedKinds[] = {MatmulKind::kTiled, MatmulKind::kBlocked};

template <typename T>
constexpr double unit_roundoff() {
  return std::is_same_v<T, float> ? 0x1p-24 : 0x1p-53;
}

// One product's operands in storage, with the layout under test: each matrix starts `offset`
// elements past an aligned allocation and its rows are `pad` elements longer than needed.
// C's padding holds a NaN sentinel that must survive (no write outside the M×N outputs).
template <typename T, typename BT>
struct Problem {
  int M, N, K;
  Trans ta, tb;
  bool accumulate, with_bias;
  int offset, pad;
  size_t lda, ldb, ldc;
  std::vector<T> a, c0, bias;
  std::vector<BT> b;

  Problem(int m, int n, int k, Trans ta_, Trans tb_, bool acc, bool bias_, int off, int pad_,
          uint64_t seed)
      : M(m),
        N(n),
        K(k),
        ta(ta_),
        tb(tb_),
        accumulate(acc),
        with_bias(bias_),
        offset(off),
        pad(pad_) {
    TestData d(seed);
    lda = size_t(ta == Trans::kNo ? K : M) + pad;
    ldb = size_t(tb == Trans::kNo ? N : K) + pad;
    ldc = size_t(N) + pad;
    a = fill<T>(d, offset + lda * size_t(ta == Trans::kNo ? M : K));
    b = fill<BT>(d, offset + ldb * size_t(tb == Trans::kNo ? K : N));
    c0 = fill<T>(d, offset + ldc * size_t(M));
    for (int i = 0; i < M; ++i) {  // the sentinel in C's row padding
      for (int j = N; j < int(ldc); ++j)
        c0[offset + i * ldc + j] = std::numeric_limits<T>::quiet_NaN();
    }
    bias = fill<T>(d, offset + size_t(N));
  }
  template <typename U>
  static std::vector<U> fill(TestData& d, size_t n) {
    std::vector<U> v(n);
    for (U& x : v) x = static_cast<U>(d.uniform(-1, 1));
    return v;
  }
  T A(int i, int p) const { return a[offset + (ta == Trans::kNo ? i * lda + p : p * lda + i)]; }
  T B(int p, int j) const {
    return static_cast<T>(b[offset + (tb == Trans::kNo ? p * ldb + j : j * ldb + p)]);
  }
  Gemm<T, BT> gemm(std::vector<T>& c) const {
    return {M,
            N,
            K,
            a.data() + offset,
            ta,
            lda,
            b.data() + offset,
            tb,
            ldb,
            c.data() + offset,
            ldc,
            accumulate,
            with_bias ? bias.data() + offset : nullptr};
  }
  std::vector<T> run(const Matmul& mm) const {
    std::vector<T> c = c0;
    mm.run(gemm(c));
    return c;
  }
};

template <typename T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

// The exact product and each element's tolerance γ(K+3)·S, computed once per problem.
template <typename T, typename BT>
struct Exact {
  std::vector<long double> value;
  std::vector<double> tol;
  explicit Exact(const Problem<T, BT>& pr) : value(size_t(pr.M) * pr.N), tol(value.size()) {
    const double n = pr.K + 3, u = unit_roundoff<T>(), gamma = n * u / (1 - n * u);
    for (int i = 0; i < pr.M; ++i) {
      for (int j = 0; j < pr.N; ++j) {
        const long double c0 = pr.accumulate ? pr.c0[pr.offset + i * pr.ldc + j] : 0.0L;
        const long double bj = pr.with_bias ? pr.bias[pr.offset + j] : 0.0L;
        long double sum = c0 + bj, scale = std::fabs(c0) + std::fabs(bj);
        for (int p = 0; p < pr.K; ++p) {
          const long double t = (long double)pr.A(i, p) * (long double)pr.B(p, j);
          sum += t, scale += std::fabs(t);
        }
        value[size_t(i) * pr.N + j] = sum;
        tol[size_t(i) * pr.N + j] = gamma * double(scale);
      }
    }
  }
};

// Checks every output of c against the exact product within its tolerance, and that C's
// padding still holds its sentinel. Returns the largest error as a fraction of its tolerance.
template <typename T, typename BT>
double check_exact(const Problem<T, BT>& pr, const Exact<T, BT>& ex, const std::vector<T>& c,
                   const char* what) {
  double worst = 0;
  int failures = 0;
  for (int i = 0; i < pr.M; ++i) {
    const size_t row = pr.offset + i * pr.ldc;
    for (int j = 0; j < pr.N; ++j) {
      const size_t e = size_t(i) * pr.N + j;
      const double err = double(std::fabs((long double)c[row + j] - ex.value[e]));
      if (ex.tol[e] > 0) worst = std::max(worst, err / ex.tol[e]);
      if (!(err <= ex.tol[e]) && ++failures <= 3) {
        ADD_FAILURE() << what << ": C(" << i << "," << j << ") = " << c[row + j] << ", exact "
                      << double(ex.value[e]) << ", |err| " << err << " > " << ex.tol[e];
      }
    }
    for (size_t j = pr.N; j < pr.ldc; ++j) {
      if (!std::isnan(c[row + j]) && ++failures <= 3) {
        ADD_FAILURE() << what << ": wrote C's padding at row " << i << ", column " << j;
      }
    }
  }
  return worst;
}

std::string describe(int M, int N, int K, Trans ta, Trans tb, bool acc, bool bias, int off,
                     int pad) {
  return "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K) +
         (ta == Trans::kYes ? " Aᵀ" : " A") + (tb == Trans::kYes ? " Bᵀ" : " B") +
         (acc ? " C+=" : " C=") + (bias ? " +bias" : "") + " offset " + std::to_string(off) +
         " pad " + std::to_string(pad);
}

// Every shape from `sizes`³; the transposes, accumulate, bias and layout rotate with the shape
// index so that every combination meets edges in every dimension.
template <typename T, typename BT, typename F>
void for_each_case(const std::vector<int>& sizes, F&& f) {
  int idx = 0;
  for (int M : sizes) {
    for (int N : sizes) {
      for (int K : sizes) {
        const Trans ta = idx & 1 ? Trans::kYes : Trans::kNo,
                    tb = idx & 2 ? Trans::kYes : Trans::kNo;
        const bool acc = idx % 3 != 0, bias = idx % 5 < 3;
        const int off = idx % 7 < 5 ? 1 : 0, pad = idx % 7 < 5 ? 5 : 0;  // mostly unaligned
        SCOPED_TRACE(describe(M, N, K, ta, tb, acc, bias, off, pad));
        f(Problem<T, BT>(M, N, K, ta, tb, acc, bias, off, pad, uint64_t(idx) + 1));
        ++idx;
      }
    }
  }
}

const std::vector<int> kEdgeSizes = {1, 3, 17, 63, 65, 130, 257};

TEST(Matmul, PackedVariantsAreBitIdenticalToNaive) {
  const Matmul naive(MatmulKind::kNaive), tiled(MatmulKind::kTiled), blocked(MatmulKind::kBlocked);
  for_each_case<float, float>(kEdgeSizes, [&](const Problem<float, float>& pr) {
    const std::vector<float> ref = pr.run(naive);
    EXPECT_TRUE(same_bits(pr.run(tiled), ref)) << "tiled";
    EXPECT_TRUE(same_bits(pr.run(blocked), ref)) << "blocked";
  });
}

TEST(Matmul, EveryVariantWithinRoundingOfTheExactProduct) {
  const Matmul mms[] = {Matmul(MatmulKind::kNaive), Matmul(MatmulKind::kTiled),
                        Matmul(MatmulKind::kBlocked), Matmul(MatmulKind::kEigen)};
  double worst[4] = {};
  for_each_case<float, float>(kEdgeSizes, [&](const Problem<float, float>& pr) {
    const Exact<float, float> ex(pr);
    for (const Matmul& mm : mms) {
      const int k = int(mm.kind());
      worst[k] = std::max(worst[k], check_exact(pr, ex, pr.run(mm), enum_name(mm.kind())));
    }
  });
  for (MatmulKind k : kAllKinds) {
    std::printf("%s: worst element uses %.2f%% of its bound\n", enum_name(k), 100 * worst[int(k)]);
  }
}

TEST(Matmul, DoubleInstantiation) {
  const Matmul naive(MatmulKind::kNaive), tiled(MatmulKind::kTiled), blocked(MatmulKind::kBlocked),
      eigen(MatmulKind::kEigen);
  for_each_case<double, double>({1, 5, 33, 67, 129, 260}, [&](const Problem<double, double>& pr) {
    const std::vector<double> ref = pr.run(naive);
    EXPECT_TRUE(same_bits(pr.run(tiled), ref)) << "tiled";
    EXPECT_TRUE(same_bits(pr.run(blocked), ref)) << "blocked";
    const Exact<double, double> ex(pr);
    check_exact(pr, ex, ref, "naive");
    check_exact(pr, ex, pr.run(eigen), "eigen");
  });
}

// The f16 weight mirror: B stored as f16 and widened while packing gives exactly the product on
// a widened f32 copy of B (the widening is exact), for every variant.
TEST(Matmul, F16OperandEqualsItsWidenedCopy) {
  const size_t widen = size_t(260) * 260;
  const Matmul mms[] = {Matmul(MatmulKind::kNaive), Matmul(MatmulKind::kTiled),
                        Matmul(MatmulKind::kBlocked), Matmul(MatmulKind::kEigen, 0, widen)};
  for_each_case<float, f16>({2, 31, 65, 260}, [&](const Problem<float, f16>& pr) {
    Problem<float, float> wide(pr.M, pr.N, pr.K, pr.ta, pr.tb, pr.accumulate, pr.with_bias,
                               pr.offset, pr.pad, 1);
    wide.a = pr.a, wide.c0 = pr.c0, wide.bias = pr.bias;
    wide.b.resize(pr.b.size());
    cast_f16_to_f32_fast(wide.b.data(), pr.b.data(), pr.b.size());
    const Exact<float, f16> ex(pr);
    for (const Matmul& mm : mms) {
      const std::vector<float> c = pr.run(mm);
      EXPECT_TRUE(same_bits(c, wide.run(mm))) << enum_name(mm.kind());
      check_exact(pr, ex, c, enum_name(mm.kind()));
    }
  });
}

// Larger than one cache block in every dimension (K > KC = 256, N > NC = 512 floats, many row
// tiles), run on 1, 2 and 3 threads: the same bits. Eigen included (fixed chunks).
TEST(Matmul, ThreadCountDoesNotChangeBits) {
  OmpThreads omp;
  for (const Trans ta : {Trans::kNo, Trans::kYes}) {
    const Problem<float, float> pr(131, 540, 300, ta, Trans(int(ta) ^ 1), true, true, 1, 3, 9);
    const Exact<float, float> ex(pr);
    for (MatmulKind k : kAllKinds) {
      std::vector<float> ref;
      for (int t : {1, 2, 3}) {
        omp.set(t);
        ASSERT_EQ(OmpThreads::team_size(), t);
        const std::vector<float> c = pr.run(Matmul(k, t));
        if (t == 1) {
          ref = c;
          check_exact(pr, ex, c, enum_name(k));
        } else {
          EXPECT_TRUE(same_bits(c, ref)) << enum_name(k) << " at " << t << " threads";
        }
      }
    }
  }
}

// More op(B) blocks (K × N in blocks of KC × NC) than the packed products' shared buffer holds
// (16 blocks, or one per thread when there are more): the threads pack and run a phase of blocks
// at a time, and here a phase ends inside a column block's K range (5 column blocks × 5 K
// blocks). Tiled and blocked against naive on 1, 2 and 3 threads: the same bits.
TEST(Matmul, PhasesOfSharedPanelsDoNotChangeBits) {
  OmpThreads omp;
  for (const bool acc : {false, true}) {
    const Problem<float, float> pr(37, 2100, 1200, Trans::kNo, Trans::kYes, acc, true, 1, 3, 11);
    const std::vector<float> ref = pr.run(Matmul(MatmulKind::kNaive));
    for (const MatmulKind k : {MatmulKind::kTiled, MatmulKind::kBlocked}) {
      for (int t : {1, 2, 3}) {
        omp.set(t);
        ASSERT_EQ(OmpThreads::team_size(), t);
        EXPECT_TRUE(same_bits(pr.run(Matmul(k, t)), ref))
            << enum_name(k) << (acc ? " C+=" : " C=") << " at " << t << " threads";
      }
    }
  }
}

// Gemm::a_sums: the sums of op(A)'s rows (a weight gradient's bias gradient), one chain of
// plain adds per row in ascending p from the initial sum, for every variant at 1, 2 and 3 threads,
// and C as without them. The packed variants add while they pack op(A): shapes with edge row
// tiles, several column blocks (only the first one's units add), K blocks over more than one
// phase of the shared buffer (K = 4200: 17 blocks), a single row (the gemv path), N = 0 and K = 0.
template <typename T>
void expect_row_sums(const Problem<T, T>& pr) {
  SCOPED_TRACE(::testing::Message()
               << "M " << pr.M << " N " << pr.N << " K " << pr.K << " ta " << int(pr.ta));
  OmpThreads omp;
  TestData d(uint64_t(pr.M * 7 + pr.K));
  std::vector<T> sums0(size_t(pr.M));
  for (T& x : sums0) x = T(d.uniform(-1, 1));
  std::vector<T> expected = sums0;
  for (int i = 0; i < pr.M; ++i) {
    for (int p = 0; p < pr.K; ++p) expected[i] += pr.A(i, p);
  }
  for (MatmulKind k : kAllKinds) {
    for (int t : {1, 2, 3}) {
      omp.set(t);
      const Matmul mm(k, t);
      std::vector<T> c = pr.c0, sums = sums0;
      Gemm<T, T> g = pr.gemm(c);
      g.a_sums = sums.data();
      mm.run(g);
      EXPECT_TRUE(same_bits(sums, expected)) << enum_name(k) << " at " << t << " threads";
      EXPECT_TRUE(same_bits(c, pr.run(mm))) << enum_name(k) << " at " << t << " threads";
    }
  }
}

TEST(Matmul, RowSumsOfAAreOneChainPerRowOnEveryVariant) {
  const Trans y = Trans::kYes, n = Trans::kNo;
  expect_row_sums(Problem<float, float>(131, 1100, 300, y, n, true, false, 1, 3, 21));
  expect_row_sums(Problem<float, float>(13, 40, 4200, y, n, true, false, 1, 2, 22));
  expect_row_sums(Problem<float, float>(37, 70, 300, n, y, false, true, 0, 1, 23));
  expect_row_sums(Problem<float, float>(1, 70, 300, n, y, true, true, 1, 1, 24));
  expect_row_sums(Problem<float, float>(9, 0, 50, y, n, true, false, 0, 1, 25));
  expect_row_sums(Problem<float, float>(9, 30, 0, y, n, true, false, 0, 1, 26));
  expect_row_sums(Problem<double, double>(67, 600, 300, y, n, true, false, 1, 3, 27));
}

// K = 0: the empty sum. C becomes bias (or stays C + bias when accumulating).
TEST(Matmul, EmptySumIsTheEpilogueAlone) {
  for (MatmulKind k : kAllKinds) {
    for (bool acc : {false, true}) {
      const Problem<float, float> pr(5, 70, 0, Trans::kNo, Trans::kYes, acc, true, 1, 2, 3);
      const std::vector<float> c = pr.run(Matmul(k));
      for (int i = 0; i < pr.M; ++i) {
        for (int j = 0; j < pr.N; ++j) {
          const size_t at = pr.offset + i * pr.ldc + j;
          const float expected = (acc ? pr.c0[at] : 0.0f) + pr.bias[pr.offset + j];
          EXPECT_EQ(c[at], expected) << enum_name(k) << " (" << i << "," << j << ")";
        }
      }
    }
  }
}

TEST(Matmul, NamesRoundTrip) {
  for (MatmulKind k : kAllKinds) {
    MatmulKind back = MatmulKind::kNaive;
    EXPECT_TRUE(enum_from_name(enum_name(k), &back));
    EXPECT_EQ(back, k);
  }
  MatmulKind unchanged = MatmulKind::kTiled;
  EXPECT_FALSE(enum_from_name("blas", &unchanged));
  EXPECT_EQ(unchanged, MatmulKind::kTiled);
}

// ---------------------------------------------------------------------------------------------
// The linear layer: its three products are the core's with nn.Linear's layouts, and the bias
// gradient sums each column in ascending row order.

template <typename T>
std::vector<T> uniform(TestData& d, size_t n) {
  std::vector<T> v(n);
  for (T& x : v) x = T(d.uniform(-1, 1));
  return v;
}

// The textbook loops of ops/linear.h's formulas, in the core's order: one FMA chain per output
// in ascending order of the summed index (from 0, or from the value already there), bias added
// last; db by plain adds in ascending r.
struct LinearRef {
  int N, K, O;
  std::vector<float> x, w, b, dy, dx, dw, db;
  LinearRef(int n, int k, int o, uint64_t seed) : N(n), K(k), O(o) {
    TestData d(seed);
    x = uniform<float>(d, size_t(N) * K), w = uniform<float>(d, size_t(O) * K);
    b = uniform<float>(d, O), dy = uniform<float>(d, size_t(N) * O);
    dx = uniform<float>(d, size_t(N) * K), dw = uniform<float>(d, size_t(O) * K);
    db = uniform<float>(d, O);
  }
  std::vector<float> forward() const {
    std::vector<float> y(size_t(N) * O);
    for (int r = 0; r < N; ++r) {
      for (int o = 0; o < O; ++o) {
        float s = 0;
        for (int k = 0; k < K; ++k) s = std::fma(x[r * K + k], w[o * K + k], s);
        y[r * O + o] = s + b[o];
      }
    }
    return y;
  }
  void backward(std::vector<float>& dx_, std::vector<float>& dw_, std::vector<float>& db_) const {
    for (int r = 0; r < N; ++r) {
      for (int k = 0; k < K; ++k) {
        for (int o = 0; o < O; ++o)
          dx_[r * K + k] = std::fma(dy[r * O + o], w[o * K + k], dx_[r * K + k]);
      }
    }
    for (int o = 0; o < O; ++o) {
      for (int k = 0; k < K; ++k) {
        for (int r = 0; r < N; ++r)
          dw_[o * K + k] = std::fma(dy[r * O + o], x[r * K + k], dw_[o * K + k]);
      }
      for (int r = 0; r < N; ++r) db_[o] += dy[r * O + o];
    }
  }
};

TEST(Linear, ThreeProductsAndBiasGradientMatchTheTextbookLoops) {
  const int shapes[][3] = {{8, 64, 128}, {7, 65, 129}, {5, 33, 17}, {1, 3, 1}, {70, 300, 19}};
  for (const auto& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s[0] << " K " << s[1] << " O " << s[2]);
    const LinearRef ref(s[0], s[1], s[2], uint64_t(s[0] * 1000 + s[2]));
    std::vector<float> dx_ref = ref.dx, dw_ref = ref.dw, db_ref = ref.db;
    ref.backward(dx_ref, dw_ref, db_ref);
    for (MatmulKind k : kPackedKinds) {
      const Matmul mm(k);
      std::vector<float> y(size_t(ref.N) * ref.O), dx = ref.dx, dw = ref.dw, db = ref.db;
      linear_forward(mm, y.data(), ref.x.data(), ref.w.data(), ref.b.data(), ref.N, ref.K, ref.O);
      linear_backward(mm, dx.data(), dw.data(), db.data(), ref.dy.data(), ref.x.data(),
                      ref.w.data(), ref.N, ref.K, ref.O);
      EXPECT_TRUE(same_bits(y, ref.forward())) << enum_name(k);
      EXPECT_TRUE(same_bits(dx, dx_ref)) << enum_name(k);
      EXPECT_TRUE(same_bits(dw, dw_ref)) << enum_name(k);
      EXPECT_TRUE(same_bits(db, db_ref)) << enum_name(k);
      // Null dinp and db skip those outputs and leave dw as it was.
      std::vector<float> dw2 = ref.dw;
      linear_backward<float, float>(mm, nullptr, dw2.data(), nullptr, ref.dy.data(), ref.x.data(),
                                    ref.w.data(), ref.N, ref.K, ref.O);
      EXPECT_TRUE(same_bits(dw2, dw_ref)) << enum_name(k);
    }
  }
}

// The bias gradient against the exact column sums: N plain adds, so within γ(N)·Σ|dout|.
TEST(Linear, BiasGradientWithinRoundingOfExactSums) {
  TestData d(5);
  const int N = 2048, O = 131;  // O: whole vectors and a scalar tail
  const std::vector<float> dy = uniform<float>(d, size_t(N) * O), db0 = uniform<float>(d, O);
  std::vector<float> db = db0;
  bias_backward(db.data(), dy.data(), N, O);
  const double gamma = N * 0x1p-24 / (1 - N * 0x1p-24);
  for (int o = 0; o < O; ++o) {
    long double exact = db0[o], scale = std::fabs(db0[o]);
    for (int r = 0; r < N; ++r)
      exact += dy[size_t(r) * O + o], scale += std::fabs(dy[size_t(r) * O + o]);
    EXPECT_LE(std::fabs(db[o] - exact), gamma * double(scale)) << "o " << o;
  }
}

// ---------------------------------------------------------------------------------------------
// The linear layer as an op: named differentiable inputs, an output size, and forward/backward
// for float and double.

// The training path's variant (the Matmul tests above hold the others to it).
const Matmul& blocked() {
  static const Matmul mm(MatmulKind::kBlocked);
  return mm;
}

struct LinearOp {
  static constexpr int N = 10, K = 7, O = 9;
  bool with_bias;
  std::vector<std::string> names{"inp", "w", "b"};
  Tensors<double> inputs;
  explicit LinearOp(bool bias = true) : with_bias(bias) {
    Data d(15);
    inputs = {d.vec(size_t(N) * K, -1, 1), d.vec(size_t(O) * K, -1, 1), d.vec(O, -1, 1)};
    if (!with_bias) {
      inputs.pop_back();
      names.pop_back();
    }
  }
  size_t out_size() const { return size_t(N) * O; }
  template <typename T>
  std::vector<T> forward(const Tensors<T>& in) const {
    std::vector<T> out(out_size());
    linear_forward(blocked(), out.data(), in[0].data(), in[1].data(),
                   with_bias ? in[2].data() : nullptr, N, K, O);
    return out;
  }
  template <typename T>
  void backward(const Tensors<T>& in, const std::vector<T>& dout, Tensors<T>& grads) const {
    linear_backward(blocked(), grads[0].data(), grads[1].data(),
                    with_bias ? grads[2].data() : nullptr, dout.data(), in[0].data(), in[1].data(),
                    N, K, O);
  }
};

// ---------------------------------------------------------------------------------------------
// Finite differences, accumulation, float against double, the forward against its formula.

TEST(OpsFd, Linear) {
  check_fd(LinearOp(true));
}
TEST(OpsFd, LinearNullBias) {
  check_fd(LinearOp(false));
}

TEST(OpsAccumulate, Linear) {
  check_accumulates(LinearOp(true));
}
TEST(OpsAccumulate, LinearNullBias) {
  check_accumulates(LinearOp(false));
}

TEST(OpsFloat, Linear) {
  check_float_matches_double(LinearOp(true));
}

TEST(OpsForward, Linear) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "null bias");
    const LinearOp op(bias);
    constexpr int N = LinearOp::N, K = LinearOp::K, O = LinearOp::O;
    std::vector<long double> want;
    for (int r = 0; r < N; ++r) {
      for (int o = 0; o < O; ++o) {
        long double s = bias ? op.inputs[2][o] : 0.0L;
        for (int k = 0; k < K; ++k)
          s += (long double)op.inputs[0][r * K + k] * op.inputs[1][o * K + k];
        want.push_back(s);
      }
    }
    expect_matches_reference("out", op.forward(op.inputs), want);
  }
}

// ---------------------------------------------------------------------------------------------
// Linear's optional outputs: a null dinp or db leaves the other gradients bit-identical.

TEST(Linear, NullDinpAndNullDbLeaveOtherGradientsUnchanged) {
  const LinearOp op(true);
  constexpr int N = LinearOp::N, K = LinearOp::K, O = LinearOp::O;
  Data d(6);
  const std::vector<double> dout = d.vec(op.out_size(), -1, 1);
  const auto& in = op.inputs;
  std::vector<double> dinp(size_t(N) * K, 0), dw(size_t(O) * K, 0), db(O, 0);
  linear_backward(blocked(), dinp.data(), dw.data(), db.data(), dout.data(), in[0].data(),
                  in[1].data(), N, K, O);
  std::vector<double> dw2(dw.size(), 0), db2(O, 0);
  linear_backward<double, double>(blocked(), nullptr, dw2.data(), db2.data(), dout.data(),
                                  in[0].data(), in[1].data(), N, K, O);
  EXPECT_EQ(dw2, dw);
  EXPECT_EQ(db2, db);
  std::vector<double> dinp3(dinp.size(), 0), dw3(dw.size(), 0);
  linear_backward<double, double>(blocked(), dinp3.data(), dw3.data(), nullptr, dout.data(),
                                  in[0].data(), in[1].data(), N, K, O);
  EXPECT_EQ(dinp3, dinp);
  EXPECT_EQ(dw3, dw);
  EXPECT_GT(max_abs(db), 1e-2);  // not vacuous
}

}  // namespace
}  // namespace reftrain
