// explain: the linear layer, forward (docs/kernels/03_linear.md) and backward
// (docs/kernels/11_linear_backward.md).
#include "ops/linear.h"

#include <cstdint>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

// N=2 rows, K=3 input features, O=2 output features: small enough to redo by hand.
constexpr int N = 2, K = 3, O = 2;

// "  name = a*b + c*d + ... = result" with the result in the Printer's 4-decimal format.
void sum_line(Printer& out, const std::string& name, const std::string& terms, double result) {
  out.line("  " + name + " = " + terms + " = " + num(result, "%.4f"));
}

struct LinearProblem {
  std::vector<double> inp, w, b, dout;
};

LinearProblem make_linear_problem(uint64_t seed) {
  Inputs in(seed);
  LinearProblem p;
  p.inp = in.uniform(size_t(N) * K, -1, 1);
  p.w = in.uniform(size_t(O) * K, -1, 1);
  p.b = in.uniform(O, -1, 1);
  p.dout = in.uniform(size_t(N) * O, -1, 1);
  return p;
}

void print_inputs(Printer& out, const LinearProblem& p) {
  out.section("inputs");
  out.mat("inp [N,K]", p.inp, N, K);
  out.mat("w [O,K] (nn.Linear layout: row o holds output o's weights)", p.w, O, K);
  out.vec("b [O]", p.b);
}

std::vector<double> forward(const std::vector<double>& inp, const std::vector<double>& w,
                            const std::vector<double>& b) {
  std::vector<double> y(size_t(N) * O);
  linear_forward(teaching_matmul(), y.data(), inp.data(), w.data(), b.data(), N, K, O);
  return y;
}

// L = sum(dout * out): its gradient with respect to out is exactly dout.
double loss(const LinearProblem& p, const std::vector<double>& inp, const std::vector<double>& w,
            const std::vector<double>& b) {
  const std::vector<double> y = forward(inp, w, b);
  double l = 0.0;
  for (size_t i = 0; i < y.size(); ++i) l += p.dout[i] * y[i];
  return l;
}

void fd_check(Printer& out, const LinearProblem& p, const std::vector<double>& dinp,
              const std::vector<double>& dw, const std::vector<double>& db) {
  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  const double h = 1e-6;
  auto nudge = [&](std::vector<double> v, size_t i, double d) {
    v[i] += d;
    return v;
  };
  const size_t xi = size_t(1) * K + 2, wi = size_t(0) * K + 1, bi = 1;
  out.fd(
      "dinp[1][2]", dinp[xi],
      (loss(p, nudge(p.inp, xi, h), p.w, p.b) - loss(p, nudge(p.inp, xi, -h), p.w, p.b)) / (2 * h));
  out.fd(
      "dw[0][1]", dw[wi],
      (loss(p, p.inp, nudge(p.w, wi, h), p.b) - loss(p, p.inp, nudge(p.w, wi, -h), p.b)) / (2 * h));
  out.fd(
      "db[1]", db[bi],
      (loss(p, p.inp, p.w, nudge(p.b, bi, h)) - loss(p, p.inp, p.w, nudge(p.b, bi, -h))) / (2 * h));
}

void run_linear(Printer& out, uint64_t seed) {
  const LinearProblem p = make_linear_problem(seed);
  out.title("linear: out = inp * w^T + b   (N=2, K=3, O=2)");
  print_inputs(out, p);

  out.section("forward: each output is a dot product of a row of inp and a row of w");
  for (int r = 0; r < N; ++r) {
    for (int o = 0; o < O; ++o) {
      double s = p.b[o];
      std::string terms = in2(p.b[o]);
      for (int k = 0; k < K; ++k) {
        s += p.inp[size_t(r) * K + k] * p.w[size_t(o) * K + k];
        terms += " + " + in2(p.inp[size_t(r) * K + k]) + "*" + in2(p.w[size_t(o) * K + k]);
      }
      sum_line(out, at("out", r, o), terms, s);
    }
  }
  const std::vector<double> y = forward(p.inp, p.w, p.b);
  out.mat("out [N,O] (linear_forward)", y, N, O);

  out.section("backward (docs/kernels/11_linear_backward.md derives it)");
  out.mat("dout [N,O] (upstream gradient)", p.dout, N, O);
  std::vector<double> dinp(size_t(N) * K, 0.0), dw(size_t(O) * K, 0.0), db(O, 0.0);
  linear_backward(teaching_matmul(), dinp.data(), dw.data(), db.data(), p.dout.data(), p.inp.data(),
                  p.w.data(), N, K, O);
  out.mat("dinp = dout * w [N,K]", dinp, N, K);
  out.mat("dw = dout^T * inp [O,K]", dw, O, K);
  out.vec("db = column sums of dout [O]", db);

  fd_check(out, p, dinp, dw, db);
}

void run_linear_backward(Printer& out, uint64_t seed) {
  const LinearProblem p = make_linear_problem(seed);
  out.title("linear backward: dinp += dout*w, dw += dout^T*inp, db += sum_r dout");
  print_inputs(out, p);
  const std::vector<double> y = forward(p.inp, p.w, p.b);
  out.mat("out [N,O] (forward, for reference)", y, N, O);
  out.mat("dout [N,O] (upstream gradient dL/dout)", p.dout, N, O);

  out.section("backward-data: dinp[r][k] = sum_o dout[r][o] * w[o][k]");
  for (int r = 0; r < N; ++r) {
    for (int k = 0; k < K; ++k) {
      double s = 0.0;
      std::string terms;
      for (int o = 0; o < O; ++o) {
        s += p.dout[size_t(r) * O + o] * p.w[size_t(o) * K + k];
        terms +=
            (o ? " + " : "") + in2(p.dout[size_t(r) * O + o]) + "*" + in2(p.w[size_t(o) * K + k]);
      }
      sum_line(out, at("dinp", r, k), terms, s);
    }
  }

  out.section("backward-weight: dw[o][k] = sum_r dout[r][o] * inp[r][k]");
  for (int o = 0; o < O; ++o) {
    for (int k = 0; k < K; ++k) {
      double s = 0.0;
      std::string terms;
      for (int r = 0; r < N; ++r) {
        s += p.dout[size_t(r) * O + o] * p.inp[size_t(r) * K + k];
        terms +=
            (r ? " + " : "") + in2(p.dout[size_t(r) * O + o]) + "*" + in2(p.inp[size_t(r) * K + k]);
      }
      sum_line(out, at("dw", o, k), terms, s);
    }
  }
  out.line("  db[o] = sum_r dout[r][o]");
  for (int o = 0; o < O; ++o) {
    double s = 0.0;
    std::string terms;
    for (int r = 0; r < N; ++r) {
      s += p.dout[size_t(r) * O + o];
      terms += (r ? " + " : "") + in2(p.dout[size_t(r) * O + o]);
    }
    sum_line(out, "db[" + std::to_string(o) + "]", terms, s);
  }

  out.section("the kernel accumulates (+=): dw already holds another contribution");
  out.line("  (a tied lm_head: dwte receives this product and the embedding's");
  out.line("  scatter-add, both with +=; here the other part is simply 1.0 everywhere)");
  std::vector<double> dinp(size_t(N) * K, 0.0), dw(size_t(O) * K, 1.0), db(O, 0.0);
  out.mat("dw before", dw, O, K);
  linear_backward(teaching_matmul(), dinp.data(), dw.data(), db.data(), p.dout.data(), p.inp.data(),
                  p.w.data(), N, K, O);
  out.mat("dinp (linear_backward)", dinp, N, K);
  out.mat("dw after = 1.0 + dout^T * inp (linear_backward)", dw, O, K);
  out.vec("db (linear_backward)", db);

  for (double& g : dw) g -= 1.0;  // the check compares this call's part only
  fd_check(out, p, dinp, dw, db);
}

}  // namespace

void add_linear(std::vector<Explainer>& v) {
  v.push_back(
      {"linear", "out = inp * w^T + b, nn.Linear layout", "docs/kernels/03_linear.md", run_linear});
  v.push_back({"linear_backward", "dinp = dout * w, dw += dout^T * inp, db",
               "docs/kernels/11_linear_backward.md", run_linear_backward});
}

}  // namespace reftrain::explain
