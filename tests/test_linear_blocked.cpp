// The register-blocked linear kernels against the textbook triple loops, bit for bit: the blocking
// may change which thread computes an output and when, never the arithmetic. Shapes cover full
// tiles and every kind of edge (rows and columns not multiples of the tile).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ops/linear.h"
#include "test_util.h"

namespace reftrain {
namespace {

template <typename T>
std::vector<T> random_vec(testing::TestData& d, size_t n) {
  std::vector<T> v(n);
  for (T& x : v) x = T(d.uniform(-1, 1));
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T>
void check_shape(int N, int K, int O) {
  SCOPED_TRACE(::testing::Message() << "N " << N << " K " << K << " O " << O);
  testing::TestData d(uint64_t(N) * 1000003 + uint64_t(K) * 1009 + uint64_t(O));
  const std::vector<T> x = random_vec<T>(d, size_t(N) * K), w = random_vec<T>(d, size_t(O) * K);
  const std::vector<T> b = random_vec<T>(d, size_t(O)), dy = random_vec<T>(d, size_t(N) * O);
  const std::vector<T> dx0 = random_vec<T>(d, size_t(N) * K), dw0 = random_vec<T>(d, size_t(O) * K);
  const std::vector<T> db0 = random_vec<T>(d, size_t(O));

  // Textbook loops: each output's sum over its index in ascending order, from the bias (forward)
  // or from the value already accumulated (backward).
  std::vector<T> y_ref(size_t(N) * O), dx_ref = dx0, dw_ref = dw0, db_ref = db0;
  for (int r = 0; r < N; ++r) {
    for (int o = 0; o < O; ++o) {
      T s = b[o];
      for (int k = 0; k < K; ++k) s += x[size_t(r) * K + k] * w[size_t(o) * K + k];
      y_ref[size_t(r) * O + o] = s;
    }
    for (int k = 0; k < K; ++k) {
      T s = dx_ref[size_t(r) * K + k];
      for (int o = 0; o < O; ++o) s += dy[size_t(r) * O + o] * w[size_t(o) * K + k];
      dx_ref[size_t(r) * K + k] = s;
    }
  }
  for (int o = 0; o < O; ++o) {
    for (int k = 0; k < K; ++k) {
      T s = dw_ref[size_t(o) * K + k];
      for (int r = 0; r < N; ++r) s += dy[size_t(r) * O + o] * x[size_t(r) * K + k];
      dw_ref[size_t(o) * K + k] = s;
    }
    for (int r = 0; r < N; ++r) db_ref[o] += dy[size_t(r) * O + o];
  }

  std::vector<T> y(size_t(N) * O), w_t(size_t(K) * O), dx = dx0, dw = dw0, db = db0;
  linear_forward(y.data(), x.data(), w.data(), b.data(), w_t.data(), N, K, O);
  linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, K, O);
  EXPECT_TRUE(same_bits(y, y_ref));
  EXPECT_TRUE(same_bits(dx, dx_ref));
  EXPECT_TRUE(same_bits(dw, dw_ref));
  EXPECT_TRUE(same_bits(db, db_ref));
}

TEST(LinearBlocked, BitIdenticalToTextbookLoops) {
  // 64 and 128 are whole AVX-512 tiles of float (4 x 16 lanes); the others leave edges in rows,
  // columns or both; 1 and 3 are smaller than any tile.
  const int shapes[][3] = {{8, 64, 128}, {12, 128, 64}, {7, 65, 129}, {5, 33, 17},
                           {1, 3, 1},    {9, 200, 70},  {64, 1, 64},  {3, 64, 3}};
  for (const auto& s : shapes) {
    check_shape<float>(s[0], s[1], s[2]);
    check_shape<double>(s[0], s[1], s[2]);
  }
}

}  // namespace
}  // namespace reftrain
