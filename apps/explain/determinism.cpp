// explain: float addition is not associative, so a sum's bits depend on its order; reftrain
// fixes every order (docs/training.md, "Determinism"). No kernel runs: the sums are written out.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

constexpr int kCount = 8;

std::string show(const std::string& what, float sum) {
  uint32_t bits;
  std::memcpy(&bits, &sum, sizeof bits);
  char buf[96];
  std::snprintf(buf, sizeof buf, "  %-34s = %12.2f   bits 0x%08x", what.c_str(), double(sum),
                unsigned(bits));
  return buf;
}

// x[begin..end) added left to right in float.
float sum_range(const std::vector<float>& x, int begin, int end) {
  float s = 0.0f;
  for (int i = begin; i < end; ++i) s += x[size_t(i)];
  return s;
}

// The fixed split: chunks of two, their sums added in chunk order. `threads` only decides who
// computes which chunk, so it cannot change a bit.
float fixed_chunks(const std::vector<float>& x, int threads) {
  constexpr int kChunks = kCount / 2;
  float partial[kChunks];
  for (int t = 0; t < threads; ++t) {
    for (int c = t; c < kChunks; c += threads) partial[c] = sum_range(x, 2 * c, 2 * c + 2);
  }
  float s = 0.0f;
  for (float p : partial) s += p;
  return s;
}

void run_determinism(Printer& out, uint64_t seed) {
  Inputs in(seed);
  const Vec small = in.uniform(kCount - 1, 0.5, 0.99);
  std::vector<float> x = {16777216.0f};  // 2^24: float's spacing there is 2
  for (double v : small) x.push_back(float(v));
  out.title("determinism: float addition is not associative");
  out.line("(2^24 = 16777216, then seven numbers in [0.5, 0.99) from the seed, in float)");
  out.section("inputs");
  out.vec("x", Vec(x.begin(), x.end()));
  out.line("  float keeps 24 significant bits: between 2^24 and 2^25 the floats are 2");
  out.line("  apart, so 2^24 + x rounds back to 2^24 for any x below 1.");
  double exact = 0.0;
  for (float v : x) exact += double(v);

  out.section("the same eight numbers, three orders");
  out.line(show("left to right (one thread)", sum_range(x, 0, kCount)));
  out.line(show("two halves, then added (2 threads)", sum_range(x, 0, 4) + sum_range(x, 4, 8)));
  out.line(show("the small ones first, 2^24 last", sum_range(x, 1, kCount) + x[0]));
  char buf[64];
  std::snprintf(buf, sizeof buf, "  exact (in double)                  = %12.2f", exact);
  out.line(buf);
  out.line("  a reduction that gives each thread one share of the numbers changes its");
  out.line("  order, so its bits, with the thread count.");

  out.section("reftrain's rule: a fixed split, whatever the thread count");
  out.line("  four chunks of two, each summed left to right, the chunk sums in order:");
  for (int threads : {1, 2, 4}) {
    out.line(show(std::to_string(threads) + " thread" + (threads > 1 ? "s" : ""),
                  fixed_chunks(x, threads)));
  }
  out.line("  the threads only share out the chunks: the same bits every time");
  out.line("  (reduce_norm_sq_fast: 64 fixed chunks; page 12).");
}

}  // namespace

void add_determinism(std::vector<Explainer>& v) {
  v.push_back({"determinism", "one sum in three orders: three answers (no kernel)",
               "docs/training.md", run_determinism});
}

}  // namespace reftrain::explain
