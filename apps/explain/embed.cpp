// explain: the token + position embedding (docs/kernels/01_embed.md).
#include "ops/embed.h"

#include <cstdint>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

// B=1, T=3 tokens from a vocabulary of V=5, C=4 channels.
void run_embed(Printer& out, uint64_t seed) {
  const int B = 1, T = 3, C = 4, V = 5;
  Inputs in(seed);
  const std::vector<int> tok = in.tokens(T, V);
  const std::vector<double> wte = in.uniform(size_t(V) * C, -1, 1);
  const std::vector<double> wpe = in.uniform(size_t(T) * C, -1, 1);
  out.title("embed: x[t] = wte[tok[t]] + wpe[t]   (B=1, T=3, V=5, C=4)");
  out.section("inputs");
  out.line("  tok = [" + std::to_string(tok[0]) + ", " + std::to_string(tok[1]) + ", " +
           std::to_string(tok[2]) + "]");
  out.mat("wte", wte, V, C);
  out.mat("wpe", wpe, T, C);

  out.section("forward, one position at a time");
  std::vector<int32_t> tok32(tok.begin(), tok.end());
  std::vector<double> x(size_t(T) * C);
  embed_forward(x.data(), tok32.data(), wte.data(), wpe.data(), B, T, C);
  for (int t = 0; t < T; ++t) {
    out.line("  t=" + std::to_string(t) + ": row " + std::to_string(tok[t]) + " of wte + row " +
             std::to_string(t) + " of wpe");
    out.vec("x[" + std::to_string(t) + "]",
            std::vector<double>(x.begin() + t * C, x.begin() + (t + 1) * C));
  }

  out.section("backward: each row of dx flows back unchanged to the rows it came from");
  const std::vector<double> dx = in.uniform(size_t(T) * C, -1, 1);
  out.mat("dx (upstream gradient)", dx, T, C);
  std::vector<double> dwte(size_t(V) * C, 0.0), dwpe(size_t(T) * C, 0.0);
  embed_backward(dwte.data(), dwpe.data(), dx.data(), tok32.data(), B, T, C);
  out.mat("dwte (a token seen twice collects both rows)", dwte, V, C);
  out.mat("dwpe", dwpe, T, C);

  out.section("finite-difference check of L = sum(dx * x), step 1e-6");
  auto loss = [&](const std::vector<double>& e, const std::vector<double>& p) {
    std::vector<double> y(size_t(T) * C);
    embed_forward(y.data(), tok32.data(), e.data(), p.data(), B, T, C);
    double l = 0.0;
    for (size_t i = 0; i < y.size(); ++i) l += dx[i] * y[i];
    return l;
  };
  const double h = 1e-6;
  const size_t e = size_t(tok[0]) * C + 1;  // an element of the first token's row
  std::vector<double> wp = wte, wm = wte;
  wp[e] += h, wm[e] -= h;
  out.fd("dwte[tok0][1]", dwte[e], (loss(wp, wpe) - loss(wm, wpe)) / (2 * h));
  std::vector<double> pp = wpe, pm = wpe;
  pp[C + 2] += h, pm[C + 2] -= h;
  out.fd("dwpe[1][2]", dwpe[C + 2], (loss(wte, pp) - loss(wte, pm)) / (2 * h));
}

}  // namespace

void add_embed(std::vector<Explainer>& v) {
  v.push_back(
      {"embed", "token + position embedding (gpt2)", "docs/kernels/01_embed.md", run_embed});
}

}  // namespace reftrain::explain
