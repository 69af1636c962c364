// The AdamW steps of bf16-only weights, bf16-pure's (adamw_update_bf16_sr) and bf16-kahan's
// (adamw_update_bf16_kahan), reference and fast, against an oracle that shares no code with them
// (tests/torch/bf16_update_oracle.py): the step in numpy float32, the noise hash and the roundings
// to bf16 in Python integers from their documented formulas, bit for bit.
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

// The state before the step: bf16 weights, gradients over 20 binades (two of them not finite),
// a carried Adam state; and the step's hyperparameters.
struct OracleCase {
  size_t n = 20011;
  int t = 7;
  GradStats stats{3.1f, 0.7f};
  AdamWHyper hp{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  std::vector<float> w, g, m, v;
  OracleCase() : w(n), g(n), m(n), v(n) {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    for (size_t i = 0; i < n; ++i) {
      w[i] = bf16_to_f32(f32_to_bf16(0.05f * nd(rng)));
      g[i] = std::ldexp(nd(rng), -int(rng() % 20));
      m[i] = 1e-3f * nd(rng);
      v[i] = 1e-5f * std::fabs(nd(rng));
    }
    g[5] = NAN, g[6] = INFINITY;
  }
  // Writes the state before and reftrain's after (w, m, v: the reference's, which the caller
  // held equal to the fast kernel's) into dir with meta.json, then runs the oracle.
  void check(testing::TempDir& dir, const std::string& extra_meta, const std::vector<float>& w_out,
             const std::vector<float>& m_out, const std::vector<float>& v_out,
             const std::vector<bf16>& wb16_out) const {
    write_raw(dir.file("w.f32"), w), write_raw(dir.file("g.f32"), g);
    write_raw(dir.file("m.f32"), m), write_raw(dir.file("v.f32"), v);
    write_raw(dir.file("w_out.f32"), w_out), write_raw(dir.file("m_out.f32"), m_out);
    write_raw(dir.file("v_out.f32"), v_out), write_raw(dir.file("wb16_out.u16"), wb16_out);
    std::ofstream(dir.file("meta.json"))
        << std::setprecision(9) << "{" << extra_meta << ", \"n\": " << n << ", \"t\": " << t
        << ", \"lr\": " << hp.lr << ", \"beta1\": " << hp.beta1 << ", \"beta2\": " << hp.beta2
        << ", \"eps\": " << hp.eps << ", \"wd\": " << hp.wd << ", \"clip\": " << stats.clip << "}";
    const testing::CommandResult r =
        testing::run_command(testing::python_script("bf16_update_oracle.py") + " " + dir.file(""));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("ok"), std::string::npos) << r.output;
  }
};

TEST(AdamWStochasticOracle, MatchesAnIndependentImplementation) {
  ASSERT_STRNE(REFTRAIN_TORCH_PYTHON, "") << "configure with REFTRAIN_TORCH_TESTS=ON";
  testing::TempDir dir;
  const OracleCase c;
  const size_t n = c.n, first = 4294960000u;  // first + i passes 2^32: the index wraps
  const uint32_t seed = 0xC0FFEEu;
  std::vector<float> wr = c.w, gr = c.g, mr = c.m, vr = c.v, wf = c.w, gf = c.g, mf = c.m, vf = c.v;
  std::vector<bf16> br(n), bf(n);
  adamw_update_bf16_sr(wr.data(), gr.data(), mr.data(), vr.data(), br.data(), n, c.stats, c.hp, c.t,
                       seed, first);
  adamw_update_bf16_sr_fast(wf.data(), gf.data(), mf.data(), vf.data(), bf.data(), n, c.stats, c.hp,
                            c.t, seed, first);
  ASSERT_EQ(std::memcmp(wr.data(), wf.data(), n * sizeof(float)), 0);
  ASSERT_EQ(std::memcmp(br.data(), bf.data(), n * sizeof(bf16)), 0);
  c.check(dir,
          "\"mode\": \"stochastic\", \"seed\": " + std::to_string(seed) +
              ", \"first\": " + std::to_string(first),
          wr, mr, vr, br);
}

TEST(AdamWKahanOracle, MatchesAnIndependentImplementation) {
  ASSERT_STRNE(REFTRAIN_TORCH_PYTHON, "") << "configure with REFTRAIN_TORCH_TESTS=ON";
  testing::TempDir dir;
  const OracleCase c;
  const size_t n = c.n;
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  std::vector<bf16> comp(n);
  for (bf16& x : comp) x = f32_to_bf16(std::ldexp(nd(rng), -12));  // ~ half a weight ulp
  write_raw(dir.file("comp.u16"), comp);
  std::vector<float> wr = c.w, gr = c.g, mr = c.m, vr = c.v, wf = c.w, gf = c.g, mf = c.m, vf = c.v;
  std::vector<bf16> br(n), bf(n), cr = comp, cf = comp;
  adamw_update_bf16_kahan(wr.data(), gr.data(), mr.data(), vr.data(), br.data(), cr.data(), n,
                          c.stats, c.hp, c.t);
  adamw_update_bf16_kahan_fast(wf.data(), gf.data(), mf.data(), vf.data(), bf.data(), cf.data(), n,
                               c.stats, c.hp, c.t);
  ASSERT_EQ(std::memcmp(wr.data(), wf.data(), n * sizeof(float)), 0);
  ASSERT_EQ(std::memcmp(br.data(), bf.data(), n * sizeof(bf16)), 0);
  ASSERT_EQ(std::memcmp(cr.data(), cf.data(), n * sizeof(bf16)), 0);
  write_raw(dir.file("comp_out.u16"), cr);
  c.check(dir, "\"mode\": \"kahan\"", wr, mr, vr, br);
}

}  // namespace
}  // namespace reftrain
