// explain: backpropagation on a two-op graph, the primer before the kernel pages
// (docs/kernels/00_backprop.md). No kernel of ops/ runs here: the graph is small enough to write
// out, and every later page repeats these same steps on tensors.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

struct Graph {
  double x, w;
  double q, y;  // forward values
  void forward() {
    q = w * x;
    y = std::tanh(q) + x;
  }
};

// L = dout·y for inputs (x, w): the test loss whose gradient with respect to y is dout.
double loss(double x, double w, double dout) {
  Graph g{x, w, 0.0, 0.0};
  g.forward();
  return dout * g.y;
}

std::string eq(const std::string& lhs, double v, const std::string& note = "") {
  char buf[96];
  std::snprintf(buf, sizeof buf, "  %-32s = %9.6f", lhs.c_str(), v);
  return buf + (note.empty() ? "" : "   " + note);
}

// The central difference's error for dx against h: truncation (h²) for large h.
void error_against_h(Printer& out, const Graph& g, double dout, double dx) {
  out.section("the central difference's error for dx, against the step h");
  for (double h : {1e-1, 1e-2, 1e-3}) {
    const double fd = (loss(g.x + h, g.w, dout) - loss(g.x - h, g.w, dout)) / (2 * h);
    char buf[96];
    std::snprintf(buf, sizeof buf, "  h = %.0e   |err| = %.1e", h, std::abs(fd - dx));
    out.line(buf);
  }
  out.line("  the error falls 100x for every 10x smaller h: it is the h^2 truncation");
  out.line("  term. At h = 1e-6 it is below 1e-9 (above); much smaller h makes it grow");
  out.line("  again, as rounding (about 1e-16 * |L| / h) takes over.");
}

void run_backprop(Printer& out, uint64_t seed) {
  Inputs in(seed);
  const std::vector<double> v = in.uniform(3, -1, 1);
  Graph g{v[0], v[1], 0.0, 0.0};
  const double dout = v[2];
  out.title("backprop: a two-op graph, forward in order, backward in reverse");
  out.line("(op 1: q = w*x;  op 2: out = tanh(q) + x.  x feeds both ops)");

  out.section("inputs");
  out.line(eq("x", g.x));
  out.line(eq("w", g.w));
  out.line(eq("dout (arrives at out)", dout));

  out.section("forward, in graph order");
  g.forward();
  out.line(eq("q = w * x", g.q));
  out.line(eq("out = tanh(q) + x", g.y));
  out.line(eq("L = dout * out", dout * g.y, "(test loss: dL/dout = dout)"));

  out.section("backward, in reverse: gradient = local derivative * upstream");
  const double dy = dout;
  out.line("  op 2, out = tanh(q) + x (dx, dw start at 0):");
  const double dq = (1.0 - std::tanh(g.q) * std::tanh(g.q)) * dy;
  double dx = 0.0, dw = 0.0;
  out.line(eq("  dq = (1 - tanh(q)^2) * dout", dq));
  dx += 1.0 * dy;
  out.line(eq("  dx += 1 * dout", dx, "(the skip path)"));
  out.line("  op 1, q = w * x:");
  dw += g.x * dq;
  out.line(eq("  dw += x * dq", dw));
  dx += g.w * dq;
  out.line(eq("  dx += w * dq", dx, "(adds x's second use)"));
  out.line(eq("with dx = w * dq (no +=), dx", g.w * dq, "(the skip path lost)"));

  out.section("finite-difference check: (L(z+h) - L(z-h)) / 2h, h = 1e-6, in double");
  const double h = 1e-6;
  out.fd("dx", dx, (loss(g.x + h, g.w, dout) - loss(g.x - h, g.w, dout)) / (2 * h));
  out.fd("dw", dw, (loss(g.x, g.w + h, dout) - loss(g.x, g.w - h, dout)) / (2 * h));
  error_against_h(out, g, dout, dx);
}

// `--break assign`: op 1's backward writes dx = w*dq instead of adding it, so the skip path's
// 1*dout is lost; the finite-difference check, which knows nothing of the code, disagrees.
void run_backprop_broken(Printer& out, uint64_t seed, const std::string& /*bug: assign*/) {
  Inputs in(seed);
  const std::vector<double> v = in.uniform(3, -1, 1);
  Graph g{v[0], v[1], 0.0, 0.0};
  const double dout = v[2];
  g.forward();
  out.title("backprop --break assign: dx = w * dq where dx += w * dq belongs");
  out.line("(the graph and inputs of `explain backprop`; only op 1's backward changes)");
  out.section("backward, with the bug");
  const double dq = (1.0 - std::tanh(g.q) * std::tanh(g.q)) * dout;
  double dx = 0.0;
  dx += 1.0 * dout;
  out.line(eq("  dx += 1 * dout", dx, "(the skip path)"));
  const double dw = g.x * dq;
  out.line(eq("  dw += x * dq", dw));
  dx = g.w * dq;
  out.line(eq("  dx = w * dq", dx, "(the bug: skip path lost)"));
  out.section("finite-difference check: (L(z+h) - L(z-h)) / 2h, h = 1e-6, in double");
  const double h = 1e-6;
  const double err =
      out.fd("dx", dx, (loss(g.x + h, g.w, dout) - loss(g.x - h, g.w, dout)) / (2 * h));
  out.fd("dw", dw, (loss(g.x, g.w + h, dout) - loss(g.x, g.w - h, dout)) / (2 * h));
  out.line(err > 1e-6 ? "  dx fails the check (its error is the lost 1*dout); dw, untouched, passes"
                      : "  dx passes: this seed's dout is 0, so the lost path carried nothing");
}

}  // namespace

void add_backprop(std::vector<Explainer>& v) {
  v.push_back({"backprop",
               "the chain rule on a two-op graph, checked (a primer)",
               "docs/kernels/00_backprop.md",
               run_backprop,
               {"assign"},
               run_backprop_broken});
}

}  // namespace reftrain::explain
