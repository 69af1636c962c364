#include "core/train/eval.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/error.h"

namespace reftrain {

double EvalResult::perplexity() const {
  return std::exp(loss());
}

double EvalResult::bits_per_byte() const {
  return bytes ? nats / std::log(2.0) / double(bytes) : 0.0;
}

namespace {

// The cross-entropy of `target` under one position's logits z[0..V), in double.
double cross_entropy(const float* z, int V, int32_t target) {
  double maxz = z[0];
  for (int j = 1; j < V; ++j) maxz = std::max<double>(maxz, z[j]);
  double sum = 0.0;
  for (int j = 0; j < V; ++j) sum += std::exp(double(z[j]) - maxz);
  return maxz + std::log(sum) - double(z[target]);
}

void check_ids(const std::vector<int32_t>& ids, int V) {
  if (ids.size() < 2) {
    throw input_error("the text is " + std::to_string(ids.size()) +
                      " token long; evaluation needs at least 2 (one to predict from, one to "
                      "predict): use a longer text");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= V) {
      throw input_error("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                        " is outside the model's vocabulary of " + std::to_string(V) +
                        "; evaluate with the model's own tokenizer");
    }
  }
}

}  // namespace

EvalResult evaluate(Model& model, int B, int T, const std::vector<int32_t>& ids,
                    const Tokenizer& tokenizer,
                    const std::function<void(size_t, size_t)>& progress) {
  const int V = model.config().vocab, Vp = model.config().padded_vocab;
  check_ids(ids, V);
  const size_t full = (ids.size() - 1) / size_t(T), tail = (ids.size() - 1) % size_t(T);
  const size_t windows = full + (tail > 0);
  EvalResult r;
  std::vector<int32_t> inputs;
  for (size_t w = 0; w < windows;) {
    // Full windows go B at a time; the shorter last one alone (the rows of a forward share T).
    const int len = w < full ? T : int(tail);
    const int rows = w < full ? int(std::min<size_t>(size_t(B), full - w)) : 1;
    const size_t first = w * size_t(T);
    inputs.assign(ids.begin() + std::ptrdiff_t(first),
                  ids.begin() + std::ptrdiff_t(first + size_t(rows) * size_t(len)));
    model.forward(inputs.data(), nullptr, rows, len);
    for (size_t i = 0; i < size_t(rows) * size_t(len); ++i) {
      const int32_t target = ids[first + i + 1];
      r.nats += cross_entropy(model.logits() + i * size_t(Vp), V, target);
      r.bytes += tokenizer.token_bytes(target).size();
      ++r.tokens;
    }
    w += size_t(rows);
    if (progress) progress(w, windows);
  }
  return r;
}

}  // namespace reftrain
