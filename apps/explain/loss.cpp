// explain: cross-entropy with z-loss, fused with its gradient dlogits (docs/kernels/07_loss.md).
#include "ops/loss.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

// N=2 rows, V=4 real columns plus one padding column (Vp=5), z = 0.1.
void run_crossentropy(Printer& out, uint64_t seed) {
  const int N = 2, V = 4, Vp = 5;
  const double z = 0.1, dloss = 1.0 / N;
  Inputs in(seed);
  const Vec logits = in.uniform(size_t(N) * Vp, -2, 2);
  const std::vector<int> tgt = in.tokens(N, V);
  out.title("crossentropy: loss = lse - x[target] + z lse^2   (N=2, V=4, Vp=5)");
  out.section("inputs (z = 0.1, column 4 is vocabulary padding)");
  out.mat("logits x", logits, N, Vp);
  out.line("  targets = [" + std::to_string(tgt[0]) + ", " + std::to_string(tgt[1]) + "]");

  out.section("forward, one row at a time (columns 0..3 only)");
  Vec lse(N), p(size_t(N) * Vp, 0.0);
  double mean = 0.0;
  for (int i = 0; i < N; ++i) {
    const double* x = logits.data() + size_t(i) * Vp;
    out.line("  row " + std::to_string(i) + ", target " + std::to_string(tgt[i]) + ":");
    double m = x[0];
    for (int j = 1; j < V; ++j) m = x[j] > m ? x[j] : m;
    Vec shifted(V), e(V);
    double sum = 0.0;
    for (int j = 0; j < V; ++j) {
      shifted[j] = x[j] - m;
      e[j] = std::exp(shifted[j]);
      sum += e[j];
    }
    lse[i] = m + std::log(sum);
    out.scalar("mx = max x", m);
    out.vec("x - m", shifted);
    out.vec("exp(x - mx)", e);
    out.scalar("l = sum exp(x - mx)", sum);
    out.scalar("lse = mx + log l", lse[i]);
    const double ce = lse[i] - x[tgt[i]];
    const double zl = z * lse[i] * lse[i];
    out.scalar("ce = lse - x[target]", ce);
    out.scalar("z lse^2", zl);
    out.scalar("loss = ce + z lse^2", ce + zl);
    mean += (ce + zl) / N;
    Vec pi(V);
    for (int j = 0; j < V; ++j) pi[j] = p[size_t(i) * Vp + j] = std::exp(x[j] - lse[i]);
    out.vec("p = exp(x - lse)", pi);
  }
  Vec losses(N), dlogits(size_t(N) * Vp, -1.0);
  std::vector<int32_t> tgt32(tgt.begin(), tgt.end());
  crossentropy_forward_backward<double>(losses.data(), dlogits.data(), logits.data(), tgt32.data(),
                                        N, V, Vp, dloss, z);
  out.vec("losses (crossentropy_forward_backward)", losses);
  out.scalar("mean loss", mean);

  out.section("backward: dx = (p - onehot)/N + 2 z lse p/N;  padding column 0");
  Vec onehot(size_t(N) * Vp, 0.0), ce_part(size_t(N) * Vp, 0.0), z_part(size_t(N) * Vp, 0.0),
      dx(size_t(N) * Vp, 0.0);
  for (int i = 0; i < N; ++i) {
    onehot[size_t(i) * Vp + tgt[i]] = 1.0;
    for (int j = 0; j < V; ++j) {
      const size_t k = size_t(i) * Vp + j;
      ce_part[k] = (p[k] - onehot[k]) * dloss;
      z_part[k] = 2.0 * z * lse[i] * p[k] * dloss;
      dx[k] = ce_part[k] + z_part[k];
    }
  }
  out.mat("p", p, N, Vp);
  out.mat("onehot", onehot, N, Vp);
  out.mat("(p - onehot)/N", ce_part, N, Vp);
  out.mat("2 z lse p/N", z_part, N, Vp);
  out.mat("dlogits = sum of the two", dx, N, Vp);
  out.mat("dlogits (crossentropy_forward_backward)", dlogits, N, Vp);

  out.section("finite-difference check of L = mean loss, step 1e-6");
  auto loss = [&](const Vec& x) {
    Vec l(N);
    crossentropy_forward_backward<double>(l.data(), nullptr, x.data(), tgt32.data(), N, V, Vp,
                                          dloss, z);
    return (l[0] + l[1]) / N;
  };
  const double h = 1e-6;
  auto check = [&](int i, int j) {
    const size_t k = size_t(i) * Vp + j;
    Vec xp = logits, xm = logits;
    xp[k] += h, xm[k] -= h;
    out.fd("dx[" + std::to_string(i) + "][" + std::to_string(j) + "]", dlogits[k],
           (loss(xp) - loss(xm)) / (2 * h));
  };
  check(0, tgt[0]);
  check(0, (tgt[0] + 1) % V);
  check(1, tgt[1]);
  check(1, (tgt[1] + 2) % V);
  check(1, 4);
}

}  // namespace

void add_loss(std::vector<Explainer>& v) {
  v.push_back({"crossentropy", "cross-entropy + z-loss, fused with dlogits",
               "docs/kernels/07_loss.md", run_crossentropy});
}

}  // namespace reftrain::explain
