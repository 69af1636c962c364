// `reftrain explain KERNEL`: runs one kernel on a handful of numbers and prints, step by step,
// its inputs, every intermediate under the name its study page (docs/kernels/) uses, the output,
// the backward's intermediates, and a finite-difference check of the gradient. The pages embed
// this output verbatim (tests/cli/test_explain.cpp regenerates it), so page and program agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/bf16.h"
#include "ops/matmul.h"

namespace reftrain::explain {

// Text laid out for an 80-column terminal. Numbers are printed with a fixed number of decimals
// so the output is the same on every run and machine.
class Printer {
 public:
  void title(const std::string& text);    // a kernel's heading
  void section(const std::string& text);  // "forward", "backward", ...
  void line(const std::string& text);     // free text (wrapped by the caller)
  void scalar(const std::string& name, double v, const std::string& note = "");
  void vec(const std::string& name, const std::vector<double>& v);
  // A rows×cols matrix, row-major.
  void mat(const std::string& name, const std::vector<double>& m, int rows, int cols);
  // "KERNEL<double> gives the same numbers" when the hand computation `mine` matches the real
  // kernel's `theirs` to 1e-12, else the difference.
  void agrees(const std::string& kernel, const std::vector<double>& mine,
              const std::vector<double>& theirs);
  // A gradient element against its central difference; returns the absolute error.
  double fd(const std::string& name, double analytic, double numeric);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// Deterministic small inputs: a Philox stream (core/base/rng.h), rounded to 2 decimals so a reader
// can redo the arithmetic by hand.
class Inputs {
 public:
  explicit Inputs(uint64_t seed) : seed_(seed) {}
  std::vector<double> uniform(size_t n, double lo, double hi);  // values in [lo, hi)
  std::vector<int> tokens(size_t n, int vocab);

 private:
  uint64_t seed_;
  uint64_t next_ = 0;
};

struct Explainer {
  std::string name;     // what `reftrain explain NAME` takes
  std::string summary;  // one line for --list
  std::string page;     // docs/kernels/NN_*.md (docs/training.md for determinism)
  void (*run)(Printer& out, uint64_t seed);
  // The "break it" variants (`reftrain explain NAME --break BUG`): the example run with a
  // classic bug put in, so that its own check (a finite difference, a compare with the kernel)
  // is seen to catch it. Empty when the explainer has none.
  std::vector<std::string> breaks = {};
  void (*run_broken)(Printer& out, uint64_t seed, const std::string& bug) = nullptr;
};

// An exercise the program checks: `reftrain explain NAME --exercise N` prints `text` (the task
// and its data, from the seed), `--check N ANSWER` compares ANSWER with `answer`, which the
// program computed with the same kernel the page is about.
struct Exercise {
  std::string text;
  double answer;
  double tolerance;  // absolute: the answer's rounding, as the text asks for it
};

// The exercises of explainer `name` for `seed`, numbered from 1; empty when it has none.
std::vector<Exercise> exercises(const std::string& name, uint64_t seed);

// A figure of the study pages, generated so that it cannot drift from the program: `reftrain
// explain --figures DIR` writes every one as DIR/NAME.svg, and tests/cli/test_figures.cpp holds
// the committed docs/img/NAME.svg equal to it.
struct Figure {
  std::string name;  // the file is NAME.svg
  std::string page;  // the page that shows it, relative to the repository
  std::string (*svg)();
};
const std::vector<Figure>& figures();

// Helpers the explainers share.
using Vec = std::vector<double>;

// One double through printf `format`, except that a value that would print as -0.0000 at four
// decimals prints as 0: the output reads the same whatever the sign of a rounding residue.
std::string num(double v, const char* format = "%9.4f");
// printf into a string (one line of a walk-through; at most 159 characters).
std::string fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
// "0.12" or "(-0.12)": a 2-decimal input as it appears inside a written-out sum.
std::string in2(double v);
// "name[i][j]".
std::string at(const std::string& name, int i, int j);
// Row r of a row-major matrix with `cols` columns.
Vec matrix_row(const Vec& m, int r, int cols);
double dot(const Vec& a, const Vec& b);
double max_abs_diff(const Vec& a, const Vec& b);

// The matmul variant the examples run: naive, the textbook loop (one thread).
const Matmul& teaching_matmul();

// The primer, then every kernel, in pipeline order.
const std::vector<Explainer>& explainers();

// One function per kernel family, each in its own file under apps/explain/; add_backprop is the
// primer before them (no kernel: the chain rule on a two-op graph).
void add_backprop(std::vector<Explainer>& v);
// add_determinism: one sum in several orders, for docs/training.md (no kernel either).
void add_determinism(std::vector<Explainer>& v);
void add_embed(std::vector<Explainer>& v);
void add_norm(std::vector<Explainer>& v);
void add_linear(std::vector<Explainer>& v);
void add_rope(std::vector<Explainer>& v);
void add_attention(std::vector<Explainer>& v);
void add_activation(std::vector<Explainer>& v);
void add_loss(std::vector<Explainer>& v);
void add_cast(std::vector<Explainer>& v);
// add_bf16: the format, and one dot product in the canonical bf16 order and in the sequential
// one, for docs/kernels/14_bf16.md.
void add_bf16(std::vector<Explainer>& v);
void add_optimizer(std::vector<Explainer>& v);
// add_tokenizer: BPE training merge by merge, for docs/kernels/13_tokenizer.md.
void add_tokenizer(std::vector<Explainer>& v);
// The training text `explain bpe --seed S` and its exercise use.
std::string bpe_exercise_text(uint64_t seed);
// bf16_dot's worked example, which its figure draws too: K pairs from the seed rounded to bf16,
// drawn again (at most 16 draws) until the canonical and the sequential order give different
// bits, and both orders step by step. The canonical one is checked against dot_bf16_canonical.
struct Bf16Dot {
  static constexpr int kK = 40;  // one full block of 32 and one padded
  std::vector<bf16> x, w;
  int draws = 1;
  std::vector<float> chain;           // after the fma at k, every k of the padded blocks
  std::vector<float> even, odd, acc;  // per block: the chains at its end, and acc after it
  std::vector<float> seq;             // the sequential chain after the fma at k, k < kK
  float canonical() const { return acc.back(); }
  float sequential() const { return seq.back(); }
};
Bf16Dot bf16_dot_example(uint64_t seed);
// How many floats apart a and b are (ulps).
int64_t ulps_between(float a, float b);
// add_model: the init std and layout counts of every preset, for docs/training.md.
void add_model(std::vector<Explainer>& v);

}  // namespace reftrain::explain
