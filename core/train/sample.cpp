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

// kept[j] = 0 for the tokens outside the nucleus of probs (the kept ones' unnormalised p): the
// fewest kept tokens, most likely first (ties: lower id), whose p sum to ≥ top_p·Σp.
void nucleus_mask(const std::vector<double>& probs, double sum, float top_p,
                  std::vector<int>& order, std::vector<char>& kept) {
  if (top_p >= 1.0f) return;
  order.clear();
  for (size_t j = 0; j < kept.size(); ++j) {
    if (kept[j]) order.push_back(int(j));
  }
  std::sort(order.begin(), order.end(), [&probs](int a, int b) {
    return probs[size_t(a)] > probs[size_t(b)] || (probs[size_t(a)] == probs[size_t(b)] && a < b);
  });
  double cum = 0.0;
  size_t n = 0;
  while (n < order.size() && (n == 0 || cum < double(top_p) * sum))
    cum += probs[size_t(order[n++])];
  for (size_t i = n; i < order.size(); ++i) kept[size_t(order[i])] = 0;
}

// Inverse CDF over the kept tokens of softmax(z / temperature), cut to the nucleus, with the
// uniform u in [0, 1).
int draw(const float* z, int V, const SampleOptions& opt, std::vector<char>& kept, double u,
         std::vector<double>& probs, std::vector<int>& order) {
  double maxz = z[0], sum = 0.0;
  for (int j = 1; j < V; ++j) maxz = std::max<double>(maxz, z[j]);
  for (int j = 0; j < V; ++j) {
    probs[size_t(j)] = kept[size_t(j)] ? std::exp((z[j] - maxz) / opt.temperature) : 0.0;
    sum += probs[size_t(j)];
  }
  nucleus_mask(probs, sum, opt.top_p, order, kept);
  sum = 0.0;
  int last_kept = 0;
  for (int j = 0; j < V; ++j) {
    if (!kept[size_t(j)]) probs[size_t(j)] = 0.0;
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
  // `context`: the tokens so far, whose last `window` the frequency penalty counts.
  int32_t operator()(const float* z, uint64_t i, const std::vector<int32_t>& context, int window) {
    if (!std::all_of(z, z + V_, [](float x) { return std::isfinite(x); })) {
      throw input_error("the model's logits are not finite at generated token " +
                        std::to_string(i + 1) + "; its weights are broken (NaN, Inf or overflow)");
    }
    if (opt_.frequency_penalty != 0.0f) z = penalised(z, context, window);
    if (opt_.temperature == 0.0f) return argmax(z, V_);
    top_k_mask(z, V_, opt_.top_k, order_, kept_);
    return draw(z, V_, opt_, kept_, rng_.uniform(i), probs_, order_);
  }

 private:
  const float* penalised(const float* z, const std::vector<int32_t>& context, int window) {
    penalised_.assign(z, z + V_);
    const size_t from = context.size() - std::min(context.size(), size_t(window));
    for (size_t t = from; t < context.size(); ++t) {
      penalised_[size_t(context[t])] -= opt_.frequency_penalty;
    }
    return penalised_.data();
  }
  const SampleOptions& opt_;
  const CounterRng rng_;
  const int V_;
  std::vector<double> probs_;
  std::vector<float> penalised_;
  std::vector<int> order_;
  std::vector<char> kept_;
};

void check_prompt(const std::vector<int32_t>& prompt, int V) {
  if (prompt.empty()) throw std::invalid_argument("sample_tokens needs a prompt");
  // The embedding reads row id of its table: an id past V would read past it.
  for (const int32_t id : prompt) {
    if (id < 0 || id >= V) {
      throw input_error("prompt token id " + std::to_string(id) +
                        " is outside the model's vocabulary (V = " + std::to_string(V) +
                        ", ids 0.." + std::to_string(V - 1) + ")");
    }
  }
}

}  // namespace

SampleSession::SampleSession(Model& model, int window, const SampleOptions& options)
    : model_(model), window_(window), options_(options) {
  if (!(options.temperature >= 0.0f)) throw std::invalid_argument("temperature must be >= 0");
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f)) {
    throw std::invalid_argument("top_p must be in (0, 1]");
  }
  if (!(options.frequency_penalty >= 0.0f)) {
    throw std::invalid_argument("frequency_penalty must be >= 0");
  }
  if (window < 1 || window > model.seq()) {
    throw std::invalid_argument("sample_tokens: window outside 1..model.seq()");
  }
}

const float* SampleSession::prefill_last(int n) {
  prefilled_ += n;
  pending_ = 0, in_cache_ = n;
  return model_.prefill(tokens_.data() + tokens_.size() - size_t(n), n);
}

// The pending tokens decoded one by one when they fit beside the cache (the cache holds exactly
// the context before them), else the context's last `window` tokens prefilled.
const float* SampleSession::catch_up() {
  // Another forward on the model (or none yet) leaves a cache that is not the context's.
  const bool ours = in_cache_ > 0 && model_.cached() == in_cache_;
  if (!ours || size_t(in_cache_) + pending_ > size_t(window_)) {
    return prefill_last(int(std::min<size_t>(tokens_.size(), size_t(window_))));
  }
  const float* z = nullptr;
  for (size_t i = tokens_.size() - pending_; i < tokens_.size(); ++i) z = decode(tokens_[i]);
  pending_ = 0;
  return z;
}

const float* SampleSession::decode(int32_t token) {
  ++in_cache_;
  return model_.decode(token);
}

std::vector<int32_t> SampleSession::turn(const std::vector<int32_t>& prompt,
                                         const std::function<bool(int32_t)>& on_token) {
  check_prompt(prompt, model_.config().vocab);
  tokens_.insert(tokens_.end(), prompt.begin(), prompt.end());
  pending_ += prompt.size();
  Drawer next(options_, model_.config().vocab);
  const int Vp = model_.config().padded_vocab;
  const size_t first = tokens_.size();
  const float* z = nullptr;
  for (int i = 0; i < options_.tokens; ++i) {
    if (!options_.kv_cache) {  // the reference: a forward over the last `window` tokens
      const int T = std::min<int>(int(tokens_.size()), window_);
      model_.forward(tokens_.data() + tokens_.size() - size_t(T), nullptr, 1, T);
      z = model_.logits() + size_t(T - 1) * Vp;
      pending_ = 0;
    } else if (i == 0) {
      z = catch_up();
    } else if (model_.cached() < window_) {
      z = decode(tokens_.back()), pending_ = 0;
    } else {  // a full window slides to its last ⌈window/2⌉ tokens
      z = prefill_last(window_ - window_ / 2);
    }
    tokens_.push_back(next(z, drawn_ + uint64_t(i), tokens_, window_));
    pending_ = 1;  // drawn, not yet in the cache
    if (on_token && !on_token(tokens_.back())) break;
  }
  drawn_ += tokens_.size() - first;
  return std::vector<int32_t>(tokens_.begin() + std::ptrdiff_t(first), tokens_.end());
}

std::vector<int32_t> sample_tokens(Model& model, int window, const std::vector<int32_t>& prompt,
                                   const SampleOptions& opt,
                                   const std::function<void(int32_t)>& on_token) {
  SampleSession session(model, window, opt);
  return session.turn(prompt, [&on_token](int32_t id) {
    if (on_token) on_token(id);
    return true;
  });
}

std::string StopText::feed(const std::string& bytes) {
  if (stopped_) return "";
  held_ += bytes;
  const size_t at = held_.find(stop_);
  if (at != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, at);
    held_.clear();
    return out;
  }
  // Hold back the longest end of the text that begins the stop text.
  size_t keep = std::min(held_.size(), stop_.size() - 1);
  while (keep > 0 && held_.compare(held_.size() - keep, keep, stop_, 0, keep) != 0) --keep;
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopText::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace reftrain
