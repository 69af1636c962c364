// explain: rotary position embedding, rotate-half convention (docs/kernels/04_rope.md).
#include "ops/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

std::string pair(double a, double b) {
  return "(" + num(a, "%8.4f") + "," + num(b, "%8.4f") + ")";
}

// One head of hs=4 channels at T=3 positions, theta 10000.
void run_rope(Printer& out, uint64_t seed) {
  const int B = 1, T = 3, NH = 1, hs = 4, half = hs / 2;
  const double theta = 10000.0;
  Inputs in(seed);
  const Vec x = in.uniform(size_t(T) * hs, -1, 1);
  out.title("rope: rotate pairs (i, i+hs/2) by a = t * f_i   (T=3, hs=4)");
  out.section("inputs (one head, rows are positions t = 0, 1, 2)");
  out.mat("x", x, T, hs);

  out.section("angles (theta = 10000)");
  Vec f(half), a(size_t(T) * half), cs(size_t(T) * half), sn(size_t(T) * half);
  for (int i = 0; i < half; ++i) f[i] = std::pow(theta, -2.0 * i / hs);
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      const size_t k = size_t(t) * half + i;
      a[k] = t * f[i];
      cs[k] = std::cos(a[k]);
      sn[k] = std::sin(a[k]);
    }
  }
  out.vec("f_i = theta^(-2i/hs)", f);
  out.mat("a = t * f_i", a, T, half);
  out.mat("cos a", cs, T, half);
  out.mat("sin a", sn, T, half);

  out.section("forward: rotate each pair (x[i], x[i+2]) by a");
  out.line("  out[i] = x[i]*cos a - x[i+2]*sin a;  out[i+2] = x[i+2]*cos a + x[i]*sin a");
  Vec my_out(size_t(T) * hs);
  for (int t = 0; t < T; ++t) {
    out.line("  t=" + std::to_string(t) + ":");
    for (int i = 0; i < half; ++i) {
      const size_t k = size_t(t) * hs + i, ka = size_t(t) * half + i;
      const double x1 = x[k], x2 = x[k + half];
      my_out[k] = x1 * cs[ka] - x2 * sn[ka];
      my_out[k + half] = x2 * cs[ka] + x1 * sn[ka];
      out.line("    pair (" + std::to_string(i) + "," + std::to_string(i + half) +
               "): " + pair(x1, x2) + " -> " + pair(my_out[k], my_out[k + half]) + "  length" +
               num(std::hypot(x1, x2), "%8.4f"));
    }
  }
  Vec k_out(size_t(T) * hs);
  rope_forward(k_out.data(), x.data(), B, T, NH, hs, theta);
  out.mat("out", k_out, T, hs);
  out.agrees("rope_forward", my_out, k_out);

  out.section("backward: rotate each pair of dout by -a");
  out.line("  dx[i] = dout[i]*cos a + dout[i+2]*sin a");
  out.line("  dx[i+2] = dout[i+2]*cos a - dout[i]*sin a");
  const Vec dout = in.uniform(size_t(T) * hs, -1, 1);
  out.mat("dout (upstream gradient)", dout, T, hs);
  Vec my_dx(size_t(T) * hs);
  for (int t = 0; t < T; ++t) {
    out.line("  t=" + std::to_string(t) + ":");
    for (int i = 0; i < half; ++i) {
      const size_t k = size_t(t) * hs + i, ka = size_t(t) * half + i;
      const double g1 = dout[k], g2 = dout[k + half];
      my_dx[k] = g1 * cs[ka] + g2 * sn[ka];
      my_dx[k + half] = g2 * cs[ka] - g1 * sn[ka];
      out.line("    pair (" + std::to_string(i) + "," + std::to_string(i + half) +
               "): " + pair(g1, g2) + " -> " + pair(my_dx[k], my_dx[k + half]));
    }
  }
  Vec k_dx(size_t(T) * hs, 0.0);
  rope_backward(k_dx.data(), dout.data(), B, T, NH, hs, theta);
  out.mat("dx", k_dx, T, hs);
  out.agrees("rope_backward", my_dx, k_dx);

  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const Vec& xx) {
    Vec o(size_t(T) * hs);
    rope_forward(o.data(), xx.data(), B, T, NH, hs, theta);
    double l = 0.0;
    for (size_t i = 0; i < o.size(); ++i) l += dout[i] * o[i];
    return l;
  };
  const double h = 1e-6;
  for (const auto& [t, c] : {std::pair{1, 0}, std::pair{2, 2}, std::pair{2, 3}}) {
    const size_t k = size_t(t) * hs + c;
    Vec xp = x, xm = x;
    xp[k] += h, xm[k] -= h;
    out.fd("dx[" + std::to_string(t) + "][" + std::to_string(c) + "]", k_dx[k],
           (loss(xp) - loss(xm)) / (2 * h));
  }
}

}  // namespace

void add_rope(std::vector<Explainer>& v) {
  v.push_back({"rope", "rotary position embedding, rotate-half (llama)", "docs/kernels/04_rope.md",
               run_rope});
}

}  // namespace reftrain::explain
