// bf16-pure's AdamW step (adamw_update_bf16_sr, reference and fast) against an oracle that shares
// no code with it (tests/torch/sr_oracle.py): the step in numpy float32, the noise hash and the
// stochastic rounding in Python integers from their documented formulas, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <random>
#include <string>
#include <vector>

#include "ops/bf16.h"
#include "optim/adamw.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {

using testing::write_raw;

TEST(AdamWStochasticOracle, MatchesAnIndependentImplementation) {
  ASSERT_STRNE(REFTRAIN_TORCH_PYTHON, "") << "configure with REFTRAIN_TORCH_TESTS=ON";
  testing::TempDir dir;
  const size_t n = 20011, first = 4294960000u;  // first + i passes 2^32: the index wraps
  const int t = 7;
  const uint32_t seed = 0xC0FFEEu;
  const GradStats stats{3.1f, 0.7f};
  const AdamWHyper hp{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> w(n), g(n), m(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = bf16_to_f32(f32_to_bf16(0.05f * nd(rng)));
    g[i] = std::ldexp(nd(rng), -int(rng() % 20));
    m[i] = 1e-3f * nd(rng);
    v[i] = 1e-5f * std::fabs(nd(rng));
  }
  g[5] = NAN, g[6] = INFINITY;
  write_raw(dir.file("w.f32"), w), write_raw(dir.file("g.f32"), g);
  write_raw(dir.file("m.f32"), m), write_raw(dir.file("v.f32"), v);
  std::vector<float> wr = w, gr = g, mr = m, vr = v, wf = w, gf = g, mf = m, vf = v;
  std::vector<bf16> br(n), bf(n);
  adamw_update_bf16_sr(wr.data(), gr.data(), mr.data(), vr.data(), br.data(), n, stats, hp, t, seed,
                       first);
  adamw_update_bf16_sr_fast(wf.data(), gf.data(), mf.data(), vf.data(), bf.data(), n, stats, hp, t,
                            seed, first);
  ASSERT_EQ(std::memcmp(wr.data(), wf.data(), n * sizeof(float)), 0);
  ASSERT_EQ(std::memcmp(br.data(), bf.data(), n * sizeof(bf16)), 0);
  write_raw(dir.file("w_out.f32"), wr), write_raw(dir.file("m_out.f32"), mr);
  write_raw(dir.file("v_out.f32"), vr), write_raw(dir.file("wb16_out.u16"), br);
  std::ofstream(dir.file("meta.json"))
      << std::setprecision(9) << "{\"n\": " << n << ", \"t\": " << t << ", \"seed\": " << seed
      << ", \"first\": " << first << ", \"lr\": " << hp.lr << ", \"beta1\": " << hp.beta1
      << ", \"beta2\": " << hp.beta2 << ", \"eps\": " << hp.eps << ", \"wd\": " << hp.wd
      << ", \"clip\": " << stats.clip << "}";
  const testing::CommandResult r =
      testing::run_command(testing::python_script("sr_oracle.py") + " " + dir.file(""));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace reftrain
