#include "core/train/sample.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/base/error.h"
#include "core/base/rng.h"

namespace reftrain {

namespace {

// kept[j] = 1 for the k largest of z[0..V) (ties: lower id first), all when k is 0 or ≥ V.
void top_k_mask(const float* z, int V, int k, std::vector<int>& order, std::vector<char>& kept) {
  kept.assign(size_t(V), 1);
  if (k <= 0 || k >= V) return;
  order.resize(size_t(V));
  for (int j = 0; j < V; ++j) order[size_t(j)] = j;
  const auto before = [z](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
  const int last = order[size_t(k - 1)];
  for (int j = 0; j < V; ++j) kept[size_t(j)] = j == last || before(j, last);
}

int argmax(const float* z, int V) {
  int best = 0;
  for (int j = 1; j < V; ++j) best = z[j] > z[best] ? j : best;
  return best;
}

// Inverse CDF over the kept tokens of softmax(z / temperature), with the uniform u in [0, 1).
int draw(const float* z, int V, float temperature, const std::vector<char>& kept, double u,
         std::vector<double>& probs) {
  double maxz = z[0], sum = 0.0;
  for (int j = 1; j < V; ++j) maxz = std::max<double>(maxz, z[j]);
  int last_kept = 0;
  for (int j = 0; j < V; ++j) {
    probs[size_t(j)] = kept[size_t(j)] ? std::exp((z[j] - maxz) / temperature) : 0.0;
    sum += probs[size_t(j)];
    if (kept[size_t(j)]) last_kept = j;
  }
  const double target = u * sum;
  double cdf = 0.0;
  for (int j = 0; j < V; ++j) {
    cdf += probs[size_t(j)];
    if (target < cdf) return j;
  }
  return last_kept;  // u·Σp rounded up to Σp
}

// Draws token i from the logits z (over V) as sample.h states; throws on non-finite logits.
class Drawer {
 public:
  Drawer(const SampleOptions& opt, int V)
      : opt_(opt), rng_(opt.seed, RngStream::kSample), V_(V), probs_(size_t(V)) {}
  int32_t operator()(const float* z, int i) {
    if (!std::all_of(z, z + V_, [](float x) { return std::isfinite(x); })) {
      throw input_error("the model's logits are not finite at generated token " +
                        std::to_string(i + 1) + "; its weights are broken (NaN, Inf or overflow)");
    }
    if (opt_.temperature == 0.0f) return argmax(z, V_);
    top_k_mask(z, V_, opt_.top_k, order_, kept_);
    return draw(z, V_, opt_.temperature, kept_, rng_.uniform(uint64_t(i)), probs_);
  }

 private:
  const SampleOptions& opt_;
  const CounterRng rng_;
  const int V_;
  std::vector<double> probs_;
  std::vector<int> order_;
  std::vector<char> kept_;
};

// A forward over the last `window` tokens for every token: the reference.
void sample_recompute(Model& model, int window, std::vector<int32_t>& tokens, int count,
                      Drawer& next, const std::function<void(int32_t)>& on_token) {
  const int Vp = model.config().padded_vocab;
  for (int i = 0; i < count; ++i) {
    const int T = std::min<int>(int(tokens.size()), window);
    model.forward(tokens.data() + tokens.size() - size_t(T), nullptr, 1, T);
    tokens.push_back(next(model.logits() + size_t(T - 1) * Vp, i));
    if (on_token) on_token(tokens.back());
  }
}

// Prefill, then one decode per token; a full window slides to its last ⌈window/2⌉ tokens.
void sample_cached(Model& model, int window, std::vector<int32_t>& tokens, int count, Drawer& next,
                   const std::function<void(int32_t)>& on_token) {
  const auto prefill_last = [&](int n) {
    return model.prefill(tokens.data() + tokens.size() - size_t(n), n);
  };
  const float* z = prefill_last(std::min<int>(int(tokens.size()), window));
  for (int i = 0; i < count; ++i) {
    tokens.push_back(next(z, i));
    if (on_token) on_token(tokens.back());
    if (i + 1 == count) break;  // no logits needed after the last token
    z = model.cached() < window ? model.decode(tokens.back()) : prefill_last(window - window / 2);
  }
}

}  // namespace

std::vector<int32_t> sample_tokens(Model& model, int window, const std::vector<int32_t>& prompt,
                                   const SampleOptions& opt,
                                   const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("sample_tokens needs a prompt");
  if (!(opt.temperature >= 0.0f)) throw std::invalid_argument("temperature must be >= 0");
  if (window < 1 || window > model.seq()) {
    throw std::invalid_argument("sample_tokens: window outside 1..model.seq()");
  }
  const int V = model.config().vocab;
  // The embedding reads row id of its table: an id past V would read past it.
  for (const int32_t id : prompt) {
    if (id < 0 || id >= V) {
      throw input_error("prompt token id " + std::to_string(id) +
                        " is outside the model's vocabulary (V = " + std::to_string(V) +
                        ", ids 0.." + std::to_string(V - 1) + ")");
    }
  }
  std::vector<int32_t> tokens = prompt;
  Drawer next(opt, V);
  if (opt.kv_cache) {
    sample_cached(model, window, tokens, opt.tokens, next, on_token);
  } else {
    sample_recompute(model, window, tokens, opt.tokens, next, on_token);
  }
  return std::vector<int32_t>(tokens.begin() + std::ptrdiff_t(prompt.size()), tokens.end());
}

}  // namespace reftrain
