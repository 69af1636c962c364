// explain: LayerNorm and RMSNorm (docs/kernels/02_norm.md).
#include "ops/norm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

constexpr int kN = 2, kC = 4;

double mean(const Vec& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s / double(v.size());
}

Vec times(const Vec& a, const Vec& b) {
  Vec r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] * b[i];
  return r;
}

// One line saying whether the step-by-step values equal the kernel's (both in double).
void agree(Printer& out, const std::string& kernel, const std::vector<const Vec*>& mine,
           const std::vector<const Vec*>& theirs) {
  Vec all_mine, all_theirs;
  for (size_t k = 0; k < mine.size(); ++k) {
    all_mine.insert(all_mine.end(), mine[k]->begin(), mine[k]->end());
    all_theirs.insert(all_theirs.end(), theirs[k]->begin(), theirs[k]->end());
  }
  out.agrees(kernel, all_mine, all_theirs);
}

// Central difference of f at p[k], step h.
template <typename F>
double central(F f, Vec p, size_t k, double h) {
  const double x0 = p[k];
  p[k] = x0 + h;
  const double lp = f(p);
  p[k] = x0 - h;
  const double lm = f(p);
  return (lp - lm) / (2 * h);
}

// N=2 rows of C=4 channels.
void run_layernorm(Printer& out, uint64_t seed) {
  const int N = kN, C = kC;
  Inputs in(seed);
  const Vec x = in.uniform(size_t(N) * C, -2, 2);
  const Vec w = in.uniform(C, 0.5, 1.5);
  const Vec b = in.uniform(C, -0.5, 0.5);
  out.title("layernorm: out = (x - mean) * rstd * w + b   (N=2 rows, C=4)");
  out.section("inputs");
  out.mat("x", x, N, C);
  out.vec("w", w);
  out.vec("b", b);

  out.section("forward, one row at a time (eps = 1e-5)");
  Vec my_mean(N), my_rstd(N), my_n(size_t(N) * C), my_out(size_t(N) * C);
  for (int i = 0; i < N; ++i) {
    const Vec xi = matrix_row(x, i, C);
    const double m = mean(xi);
    Vec d(C);
    for (int c = 0; c < C; ++c) d[c] = xi[c] - m;
    const double var = mean(times(d, d));
    const double rstd = 1.0 / std::sqrt(var + kLayerNormEps);
    Vec n(C), o(C);
    for (int c = 0; c < C; ++c) {
      n[c] = d[c] * rstd;
      o[c] = n[c] * w[c] + b[c];
    }
    my_mean[i] = m;
    my_rstd[i] = rstd;
    std::copy(n.begin(), n.end(), my_n.begin() + i * C);
    std::copy(o.begin(), o.end(), my_out.begin() + i * C);
    out.line("  row " + std::to_string(i) + ":");
    out.scalar("mean", m, "sum(x) / C");
    out.scalar("variance", var, "sum((x - mean)^2) / C");
    out.scalar("rstd", rstd, "1 / sqrt(variance + eps)");
    out.vec("n", n);
    out.vec("out", o);
  }
  Vec k_out(size_t(N) * C), k_mean(N), k_rstd(N);
  layernorm_forward(k_out.data(), k_mean.data(), k_rstd.data(), x.data(), w.data(), b.data(), N, C);
  agree(out, "layernorm_forward", {&my_out, &my_mean, &my_rstd}, {&k_out, &k_mean, &k_rstd});
  out.line("  it keeps mean and rstd per row for the backward");

  out.section("backward, one row at a time");
  const Vec dout = in.uniform(size_t(N) * C, -1, 1);
  out.mat("dout (upstream gradient)", dout, N, C);
  Vec my_dx(size_t(N) * C), my_dw(C, 0.0), my_db(C, 0.0);
  for (int i = 0; i < N; ++i) {
    const Vec g = matrix_row(dout, i, C), n = matrix_row(my_n, i, C);
    const Vec dn = times(g, w);
    const double dn_mean = mean(dn);
    const double dn_n_mean = mean(times(dn, n));
    Vec dx(C);
    for (int c = 0; c < C; ++c) {
      dx[c] = my_rstd[i] * (dn[c] - dn_mean - n[c] * dn_n_mean);
      my_dw[c] += g[c] * n[c];
      my_db[c] += g[c];
    }
    std::copy(dx.begin(), dx.end(), my_dx.begin() + i * C);
    out.line("  row " + std::to_string(i) + ":");
    out.vec("dn = dout*w", dn);
    out.scalar("mean(dn)", dn_mean);
    out.scalar("mean(dn*n)", dn_n_mean);
    out.line("  dx = rstd * (dn - mean(dn) - n * mean(dn*n))");
    out.vec("dx", dx);
  }
  out.line("  summed over the rows:");
  out.vec("dw = sum(dout*n)", my_dw);
  out.vec("db = sum(dout)  ", my_db);
  Vec k_dx(size_t(N) * C, 0.0), k_dw(C, 0.0), k_db(C, 0.0);
  layernorm_backward(k_dx.data(), k_dw.data(), k_db.data(), dout.data(), x.data(), w.data(),
                     k_mean.data(), k_rstd.data(), N, C);
  agree(out, "layernorm_backward", {&my_dx, &my_dw, &my_db}, {&k_dx, &k_dw, &k_db});

  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const Vec& xx, const Vec& ww, const Vec& bb) {
    Vec o(size_t(N) * C), m(N), r(N);
    layernorm_forward(o.data(), m.data(), r.data(), xx.data(), ww.data(), bb.data(), N, C);
    return dot(dout, o);
  };
  const double h = 1e-6;
  out.fd("dx[0][1]", k_dx[1], central([&](const Vec& p) { return loss(p, w, b); }, x, 1, h));
  out.fd("dx[1][3]", k_dx[C + 3],
         central([&](const Vec& p) { return loss(p, w, b); }, x, C + 3, h));
  out.fd("dw[2]", k_dw[2], central([&](const Vec& p) { return loss(x, p, b); }, w, 2, h));
  out.fd("db[0]", k_db[0], central([&](const Vec& p) { return loss(x, w, p); }, b, 0, h));
}

// The same sizes; no mean, no bias.
void run_rmsnorm(Printer& out, uint64_t seed) {
  const int N = kN, C = kC;
  Inputs in(seed);
  const Vec x = in.uniform(size_t(N) * C, -2, 2);
  const Vec w = in.uniform(C, 0.5, 1.5);
  out.title("rmsnorm: out = x * rstd * w   (N=2 rows, C=4)");
  out.section("inputs");
  out.mat("x", x, N, C);
  out.vec("w", w);

  out.section("forward, one row at a time (eps = 1e-5)");
  Vec my_rstd(N), my_n(size_t(N) * C), my_out(size_t(N) * C);
  for (int i = 0; i < N; ++i) {
    const Vec xi = matrix_row(x, i, C);
    const double ms = mean(times(xi, xi));
    const double rstd = 1.0 / std::sqrt(ms + kRmsNormEps);
    Vec n(C), o(C);
    for (int c = 0; c < C; ++c) {
      n[c] = xi[c] * rstd;
      o[c] = n[c] * w[c];
    }
    my_rstd[i] = rstd;
    std::copy(n.begin(), n.end(), my_n.begin() + i * C);
    std::copy(o.begin(), o.end(), my_out.begin() + i * C);
    out.line("  row " + std::to_string(i) + ":");
    out.scalar("mean of squares", ms, "sum(x^2) / C");
    out.scalar("rstd", rstd, "1 / sqrt(mean of squares + eps)");
    out.vec("n", n);
    out.vec("out", o);
  }
  Vec k_out(size_t(N) * C), k_rstd(N);
  rmsnorm_forward(k_out.data(), k_rstd.data(), x.data(), w.data(), N, C);
  agree(out, "rmsnorm_forward", {&my_out, &my_rstd}, {&k_out, &k_rstd});
  out.line("  it keeps rstd per row for the backward");

  out.section("backward, one row at a time");
  const Vec dout = in.uniform(size_t(N) * C, -1, 1);
  out.mat("dout (upstream gradient)", dout, N, C);
  Vec my_dx(size_t(N) * C), my_dw(C, 0.0);
  for (int i = 0; i < N; ++i) {
    const Vec g = matrix_row(dout, i, C), n = matrix_row(my_n, i, C);
    const Vec dn = times(g, w);
    const double dn_n_mean = mean(times(dn, n));
    Vec dx(C);
    for (int c = 0; c < C; ++c) {
      dx[c] = my_rstd[i] * (dn[c] - n[c] * dn_n_mean);
      my_dw[c] += g[c] * n[c];
    }
    std::copy(dx.begin(), dx.end(), my_dx.begin() + i * C);
    out.line("  row " + std::to_string(i) + ":");
    out.vec("dn = dout*w", dn);
    out.scalar("mean(dn*n)", dn_n_mean);
    out.line("  dx = rstd * (dn - n * mean(dn*n))");
    out.vec("dx", dx);
  }
  out.line("  summed over the rows:");
  out.vec("dw = sum(dout*n)", my_dw);
  Vec k_dx(size_t(N) * C, 0.0), k_dw(C, 0.0);
  rmsnorm_backward(k_dx.data(), k_dw.data(), dout.data(), x.data(), w.data(), k_rstd.data(), N, C);
  agree(out, "rmsnorm_backward", {&my_dx, &my_dw}, {&k_dx, &k_dw});

  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const Vec& xx, const Vec& ww) {
    Vec o(size_t(N) * C), r(N);
    rmsnorm_forward(o.data(), r.data(), xx.data(), ww.data(), N, C);
    return dot(dout, o);
  };
  const double h = 1e-6;
  out.fd("dx[0][1]", k_dx[1], central([&](const Vec& p) { return loss(p, w); }, x, 1, h));
  out.fd("dx[1][3]", k_dx[C + 3], central([&](const Vec& p) { return loss(p, w); }, x, C + 3, h));
  out.fd("dw[2]", k_dw[2], central([&](const Vec& p) { return loss(x, p); }, w, 2, h));
}

}  // namespace

void add_norm(std::vector<Explainer>& v) {
  v.push_back({"layernorm", "LayerNorm over channels, eps 1e-5 (gpt2)", "docs/kernels/02_norm.md",
               run_layernorm});
  v.push_back({"rmsnorm", "RMSNorm over channels, eps 1e-5 (llama)", "docs/kernels/02_norm.md",
               run_rmsnorm});
}

}  // namespace reftrain::explain
