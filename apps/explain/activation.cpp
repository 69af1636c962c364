// explain: the FFN activations gelu and swiglu (docs/kernels/06_swiglu.md) and the whole FFN
// block's backward (docs/kernels/09_backward_ffn.md).
#include "ops/activation.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/explain/explain.h"
#include "ops/linear.h"

namespace reftrain::explain {

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535587989211986876;
constexpr double kCubic = 0.044715;
constexpr double kStep = 1e-6;  // finite-difference step

// σ(g) as the op computes it: only e^-|g| is ever taken.
double sigmoid(double g) {
  const double e = std::exp(-std::abs(g));
  return g >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// Five values of x in [-3, 3).
void run_gelu(Printer& out, uint64_t seed) {
  const size_t n = 5;
  Inputs in(seed);
  const Vec x = in.uniform(n, -3, 3);
  out.title("gelu: out = 0.5 x (1 + tanh zeta),  zeta = sqrt(2/pi)(x + 0.044715 x^3)");
  out.section("inputs (n=5)");
  out.vec("x", x);

  out.section("forward, step by step");
  Vec x3(n), inner(n), u(n), th(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x3[i] = x[i] * x[i] * x[i];
    inner[i] = x[i] + kCubic * x3[i];
    u[i] = kSqrt2OverPi * inner[i];
    th[i] = std::tanh(u[i]);
    y[i] = 0.5 * x[i] * (1.0 + th[i]);
  }
  out.vec("x^3", x3);
  out.vec("x + 0.044715 x^3", inner);
  out.vec("zeta", u);
  out.vec("tanh zeta", th);
  out.vec("out = 0.5 x (1 + tanh zeta)", y);
  Vec y_op(n);
  gelu_forward(y_op.data(), x.data(), n);
  out.vec("out (gelu_forward)", y_op);

  out.section("backward: gelu'(x) = A1 + A2, dx = gelu'(x) * dout");
  const Vec dout = in.uniform(n, -1, 1);
  out.vec("dout (upstream)", dout);
  Vec a(n), sech2(n), dudx(n), b(n), grad(n), dx(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0.5 * (1.0 + th[i]);
    sech2[i] = 1.0 - th[i] * th[i];
    dudx[i] = kSqrt2OverPi * (1.0 + 3.0 * kCubic * x[i] * x[i]);
    b[i] = 0.5 * x[i] * sech2[i] * dudx[i];
    grad[i] = a[i] + b[i];
    dx[i] = grad[i] * dout[i];
  }
  out.vec("A1 = 0.5 (1 + tanh zeta)", a);
  out.vec("1 - tanh^2 zeta", sech2);
  out.vec("dzeta/dx", dudx);
  out.vec("A2 = 0.5 x (1-tanh^2 zeta) dzeta/dx", b);
  out.vec("gelu'(x) = A1 + A2", grad);
  out.vec("dx = gelu'(x) dout", dx);
  Vec dx_op(n, 0.0);
  gelu_backward(dx_op.data(), x.data(), dout.data(), n);
  out.vec("dx (gelu_backward)", dx_op);

  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const Vec& xv) {
    Vec yv(n);
    gelu_forward(yv.data(), xv.data(), n);
    return dot(dout, yv);
  };
  for (size_t i = 0; i < n; ++i) {
    Vec xp = x, xm = x;
    xp[i] += kStep, xm[i] -= kStep;
    out.fd("dx[" + std::to_string(i) + "]", dx_op[i], (loss(xp) - loss(xm)) / (2 * kStep));
  }
}

// Five values of x in [-3, 3), as gelu's, so the two forms can be read side by side.
void run_gelu_erf(Printer& out, uint64_t seed) {
  const size_t n = 5;
  Inputs in(seed);
  const Vec x = in.uniform(n, -3, 3);
  out.title("gelu_erf: out = 0.5 x (1 + erf(x / sqrt 2))  (Hugging Face's \"gelu\")");
  out.section("inputs (n=5)");
  out.vec("x", x);

  out.section("forward, step by step");
  Vec e(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    e[i] = std::erf(x[i] / std::sqrt(2.0));
    y[i] = 0.5 * x[i] * (1.0 + e[i]);
  }
  out.vec("erf(x / sqrt 2)", e);
  out.vec("out = 0.5 x (1 + erf)", y);
  Vec y_op(n);
  gelu_erf_forward(y_op.data(), x.data(), n);
  out.vec("out (gelu_erf_forward)", y_op);

  out.section("backward: gelu_erf'(x) = A1 + A2, dx = gelu_erf'(x) * dout");
  const Vec dout = in.uniform(n, -1, 1);
  out.vec("dout (upstream)", dout);
  Vec a(n), b(n), grad(n), dx(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0.5 * (1.0 + e[i]);                                           // the normal CDF
    b[i] = x[i] * std::exp(-0.5 * x[i] * x[i]) / std::sqrt(2.0 * M_PI);  // x times its density
    grad[i] = a[i] + b[i];
    dx[i] = grad[i] * dout[i];
  }
  out.vec("A1 = 0.5 (1 + erf)", a);
  out.vec("A2 = x exp(-x^2/2) / sqrt(2 pi)", b);
  out.vec("gelu_erf'(x) = A1 + A2", grad);
  out.vec("dx = gelu_erf'(x) dout", dx);
  Vec dx_op(n, 0.0);
  gelu_erf_backward(dx_op.data(), x.data(), dout.data(), n);
  out.vec("dx (gelu_erf_backward)", dx_op);

  out.section("against the tanh form: out - gelu(x)");
  Vec tanh_form(n);
  gelu_forward(tanh_form.data(), x.data(), n);
  char gap[96];
  std::snprintf(gap, sizeof gap,
                "the largest |out - gelu(x)| here: %.1e (the two forms agree to ~1e-3)",
                max_abs_diff(y_op, tanh_form));
  out.line(gap);

  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const Vec& xv) {
    Vec yv(n);
    gelu_erf_forward(yv.data(), xv.data(), n);
    return dot(dout, yv);
  };
  for (size_t i = 0; i < n; ++i) {
    Vec xp = x, xm = x;
    xp[i] += kStep, xm[i] -= kStep;
    out.fd("dx[" + std::to_string(i) + "]", dx_op[i], (loss(xp) - loss(xm)) / (2 * kStep));
  }
}

// Four elements: gate in [-3, 3), up in [-2, 2).
void run_swiglu(Printer& out, uint64_t seed) {
  const size_t n = 4;
  Inputs in(seed);
  const Vec gate = in.uniform(n, -3, 3);
  const Vec up = in.uniform(n, -2, 2);
  out.title("swiglu: out = silu(gate) * up,  silu(g) = g sigma(g)");
  out.section("inputs (n=4)");
  out.vec("gate", gate);
  out.vec("up", up);

  out.section("forward, step by step");
  Vec e(n), sg(n), silu(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    e[i] = std::exp(-std::abs(gate[i]));
    sg[i] = sigmoid(gate[i]);
    silu[i] = gate[i] * sg[i];
    y[i] = silu[i] * up[i];
  }
  out.vec("e = exp(-|gate|)", e);
  out.vec("sigma(gate)", sg);
  out.line("    (gate >= 0: 1/(1 + e);  gate < 0: e/(1 + e))");
  out.vec("silu = gate sigma(gate)", silu);
  out.vec("out = silu * up", y);
  Vec y_op(n);
  swiglu_forward(y_op.data(), gate.data(), up.data(), n);
  out.vec("out (swiglu_forward)", y_op);

  out.section("backward: dgate = dout up silu'(gate),  dup = dout silu");
  const Vec dout = in.uniform(n, -1, 1);
  out.vec("dout (upstream)", dout);
  Vec one_minus(n), dsilu(n), dgate(n), dup(n);
  for (size_t i = 0; i < n; ++i) {
    one_minus[i] = 1.0 - sg[i];
    dsilu[i] = sg[i] * (1.0 + gate[i] * one_minus[i]);
    dgate[i] = dout[i] * up[i] * dsilu[i];
    dup[i] = dout[i] * silu[i];
  }
  out.vec("1 - sigma", one_minus);
  out.vec("silu' = sigma (1 + g (1 - sigma))", dsilu);
  out.vec("dgate = dout up silu'", dgate);
  out.vec("dup = dout silu", dup);
  Vec dgate_op(n, 0.0), dup_op(n, 0.0);
  swiglu_backward(dgate_op.data(), dup_op.data(), dout.data(), gate.data(), up.data(), n);
  out.vec("dgate (swiglu_backward)", dgate_op);
  out.vec("dup (swiglu_backward)", dup_op);

  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const Vec& g, const Vec& u) {
    Vec yv(n);
    swiglu_forward(yv.data(), g.data(), u.data(), n);
    return dot(dout, yv);
  };
  for (size_t i = 0; i < n; ++i) {
    Vec gp = gate, gm = gate;
    gp[i] += kStep, gm[i] -= kStep;
    out.fd("dgate[" + std::to_string(i) + "]", dgate_op[i],
           (loss(gp, up) - loss(gm, up)) / (2 * kStep));
  }
  for (size_t i = 0; i < n; ++i) {
    Vec upp = up, upm = up;
    upp[i] += kStep, upm[i] -= kStep;
    out.fd("dup[" + std::to_string(i) + "]", dup_op[i],
           (loss(gate, upp) - loss(gate, upm)) / (2 * kStep));
  }
}

// The llama FFN block: gate = x Wgateᵀ, up = x Wupᵀ, swi = swiglu(gate, up), y = swi Wdownᵀ.
// N=2 rows, C=2 channels, F=3 hidden units, no biases.
struct Ffn {
  int N, C, F;
  Vec wgate, wup, wdown;
  // The forward, keeping what the backward reads: x, gate, up and swi.
  void forward(Vec& gate, Vec& up, Vec& swi, Vec& y, const Vec& x) const {
    gate.assign(size_t(N) * F, 0.0), up.assign(size_t(N) * F, 0.0);
    swi.assign(size_t(N) * F, 0.0), y.assign(size_t(N) * C, 0.0);
    const Matmul& mm = teaching_matmul();
    linear_forward<double, double>(mm, gate.data(), x.data(), wgate.data(), nullptr, N, C, F);
    linear_forward<double, double>(mm, up.data(), x.data(), wup.data(), nullptr, N, C, F);
    swiglu_forward(swi.data(), gate.data(), up.data(), swi.size());
    linear_forward<double, double>(mm, y.data(), swi.data(), wdown.data(), nullptr, N, F, C);
  }
};

void run_ffn_backward(Printer& out, uint64_t seed) {
  const int N = 2, C = 2, F = 3;
  Inputs in(seed);
  const Vec x = in.uniform(size_t(N) * C, -1, 1);
  Ffn ffn{N,
          C,
          F,
          in.uniform(size_t(F) * C, -1, 1),
          in.uniform(size_t(F) * C, -1, 1),
          in.uniform(size_t(C) * F, -1, 1)};
  out.title("ffn_backward: out = Wdown (silu(Wgate x) * Wup x)   (N=2, C=2, F=3)");
  out.section("inputs");
  out.mat("x", x, N, C);
  out.mat("Wgate", ffn.wgate, F, C);
  out.mat("Wup", ffn.wup, F, C);
  out.mat("Wdown", ffn.wdown, C, F);

  out.section("forward (saved: x, gate, up, swi)");
  Vec gate, up, swi, y;
  ffn.forward(gate, up, swi, y, x);
  out.mat("gate = x Wgate^T", gate, N, F);
  out.mat("up = x Wup^T", up, N, F);
  out.mat("swi = silu(gate) * up", swi, N, F);
  out.mat("out = swi Wdown^T", y, N, C);

  out.section("backward, stage by stage, from dout");
  const Vec dy = in.uniform(size_t(N) * C, -1, 1);
  out.mat("dout (upstream)", dy, N, C);
  out.line("  stage 3, out = swi Wdown^T:  dswi = dout Wdown,  dWdown = dout^T swi");
  Vec dswi(size_t(N) * F, 0.0), dwdown(size_t(C) * F, 0.0);
  linear_backward<double, double>(teaching_matmul(), dswi.data(), dwdown.data(), nullptr, dy.data(),
                                  swi.data(), ffn.wdown.data(), N, F, C);
  out.mat("dswi", dswi, N, F);
  out.mat("dWdown", dwdown, C, F);
  out.line("  stage 2, swi = silu(gate) * up:");
  out.line("    dgate = dswi up silu'(gate),  dup = dswi silu(gate)");
  Vec dgate(size_t(N) * F, 0.0), dup(size_t(N) * F, 0.0);
  swiglu_backward(dgate.data(), dup.data(), dswi.data(), gate.data(), up.data(), dswi.size());
  out.mat("dgate", dgate, N, F);
  out.mat("dup", dup, N, F);
  out.line("  stage 1, gate = x Wgate^T and up = x Wup^T both read x:");
  out.line("    dx = dgate Wgate + dup Wup,  dWgate = dgate^T x,  dWup = dup^T x");
  Vec dx(size_t(N) * C, 0.0), dwgate(size_t(F) * C, 0.0), dwup(size_t(F) * C, 0.0);
  linear_backward<double, double>(teaching_matmul(), dx.data(), dwgate.data(), nullptr,
                                  dgate.data(), x.data(), ffn.wgate.data(), N, C, F);
  Vec dx_gate = dx;
  linear_backward<double, double>(teaching_matmul(), dx.data(), dwup.data(), nullptr, dup.data(),
                                  x.data(), ffn.wup.data(), N, C, F);
  out.mat("dx, gate's part", dx_gate, N, C);
  out.mat("dx = gate's part + up's part", dx, N, C);
  out.mat("dWgate", dwgate, F, C);
  out.mat("dWup", dwup, F, C);

  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const Ffn& f, const Vec& xv) {
    Vec g, u, hv, yv;
    f.forward(g, u, hv, yv, xv);
    return dot(dy, yv);
  };
  Vec xp = x, xm = x;
  xp[1] += kStep, xm[1] -= kStep;
  out.fd("dx[0][1]", dx[1], (loss(ffn, xp) - loss(ffn, xm)) / (2 * kStep));
  xp = x, xm = x;
  xp[2] += kStep, xm[2] -= kStep;
  out.fd("dx[1][0]", dx[2], (loss(ffn, xp) - loss(ffn, xm)) / (2 * kStep));
  auto check = [&](const std::string& name, Vec Ffn::*w, const Vec& grad, size_t i) {
    Ffn p = ffn, m = ffn;
    (p.*w)[i] += kStep, (m.*w)[i] -= kStep;
    out.fd(name, grad[i], (loss(p, x) - loss(m, x)) / (2 * kStep));
  };
  check("dWgate[1][0]", &Ffn::wgate, dwgate, 2);
  check("dWup[2][1]", &Ffn::wup, dwup, 5);
  check("dWdown[0][2]", &Ffn::wdown, dwdown, 2);
}

}  // namespace

void add_activation(std::vector<Explainer>& v) {
  v.push_back({"gelu", "GELU, tanh form (gpt2 FFN)", "docs/kernels/06_swiglu.md", run_gelu});
  v.push_back({"gelu_erf", "GELU, exact erf form (Hugging Face's \"gelu\")",
               "docs/kernels/06_swiglu.md", run_gelu_erf});
  v.push_back(
      {"swiglu", "SwiGLU: silu(gate) * up (llama FFN)", "docs/kernels/06_swiglu.md", run_swiglu});
  v.push_back({"ffn_backward", "the FFN block's backward: linear, swiglu, linear",
               "docs/kernels/09_backward_ffn.md", run_ffn_backward});
}

}  // namespace reftrain::explain
