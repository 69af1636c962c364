// Text generation: tokens drawn one at a time from the model's next-token distribution. Used by
// `reftrain sample` (from a checkpoint) and at the end of `reftrain train` (Trainer::sample).
//
// Token i (0-based, counted over a session's turns) after the prompt: the logits z of the last
// position of the context (B = 1), over the V real vocabulary entries (not the padding),
// penalised for repetition (frequency penalty α ≥ 0, OpenAI's form):
//   z'_j = z_j − α·c_j,  c_j = how often j occurs among the context's last `window` tokens,
// and
//   temperature 0: the argmax of z' (the lowest id among equal maxima), no random draw;
//   otherwise:     p_j ∝ exp((z'_j − max z')/temperature), in double, over the top_k largest z'
//                  (ties broken by the lower id; top_k 0 = all V), then over the nucleus: the
//                  fewest of those, most likely first (ties: lower id), whose p sum to at least
//                  top_p·Σp (top_p 1 = all of them); the token is the first j in id order whose
//                  cumulative p passes u·Σp over the kept ones, u = CounterRng(seed, kSample)
//                  .uniform(i) (docs/rng.md). So the same seed gives the same text.
//
// The context, and how its logits are computed:
//   kv_cache (default): the prompt's last `window` tokens are prefilled in one forward
//     (Model::prefill), then each drawn token costs one position's forward against the cached
//     keys and values (Model::decode). When the cache holds `window` positions and a token must
//     be appended, the window slides once: the last ⌈window/2⌉ tokens (the new one included) are
//     prefilled again at positions 0.., and decoding goes on from there. So a context has between
//     ⌈window/2⌉ and `window` tokens once the window has been full, and the forward over
//     ⌈window/2⌉ tokens is paid once every ⌊window/2⌋ + 1 tokens, not once per token.
//   recompute (kv_cache = false, the reference): a forward over the last `window` tokens for
//     every token.
// As long as the prompt and the generated tokens fit in the window the two give the same
// logits, bit for bit, and so the same text (with the eigen matmul, whose one-row product sums
// in another order than its many-row one, only nearly); past it, recompute keeps a full window of
// context and kv_cache the slid one, so the texts part there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/model.h"

namespace reftrain {

struct SampleOptions {
  int tokens = 256;  // how many to generate
  // ≥ 0; 0 = greedy. 0.8 by default: at 1.0 the laptop run's samples were 77 % corpus words,
  // at 0.8 87 % (bench/RESULTS.md, issue 31); the same default as nanoGPT's sample.py.
  float temperature = 0.8f;
  int top_k = 0;  // 0 = every token of the vocabulary
  uint64_t seed = 0;
  bool kv_cache = true;            // false: the recompute path, a forward over the window per token
  float top_p = 1.0f;              // in (0, 1]; 1 = no nucleus cut
  float frequency_penalty = 0.0f;  // α ≥ 0
};

// A conversation with the model (`sample --interactive`): each turn appends a prompt to the
// context and generates after it. With the KV cache the context stays cached between turns: a
// prompt that fits in the window beside the cached positions costs one decode per token, and
// only a prompt that does not fit is prefilled again with the context's last `window` tokens.
// The first turn is exactly sample_tokens().
class SampleSession {
 public:
  // window ≤ model.seq() (the model's arena holds that many positions); `options` must outlive
  // the session.
  SampleSession(Model& model, int window, const SampleOptions& options);
  // Up to options.tokens tokens after the context + `prompt` (non-empty; ids in [0, V), an
  // input error otherwise); `on_token` sees each as soon as it is drawn and returns false to
  // end the turn there (a stop text). Returns the turn's tokens.
  std::vector<int32_t> turn(const std::vector<int32_t>& prompt,
                            const std::function<bool(int32_t)>& on_token = {});
  // Positions computed by prefills so far (decodes excluded): how much the cache saved.
  int64_t prefilled() const { return prefilled_; }

 private:
  const float* catch_up();  // the logits after the context, the cache brought up to date
  const float* prefill_last(int n);
  const float* decode(int32_t token);
  Model& model_;
  int window_;
  const SampleOptions& options_;
  std::vector<int32_t> tokens_;  // the context: every turn's prompt and tokens
  size_t pending_ = 0;           // the context's last tokens not yet in the cache
  int in_cache_ = 0;             // the context's tokens before those, in the cache
  uint64_t drawn_ = 0;           // tokens drawn by earlier turns (their RNG indices)
  int64_t prefilled_ = 0;
};

// Holds back streamed text that may begin a stop text, so that the stop text itself is never
// printed: feed() returns the bytes that are safe to print; once the stop text has appeared,
// stopped() is true and what came before it has been returned.
class StopText {
 public:
  explicit StopText(std::string stop) : stop_(std::move(stop)) {}
  std::string feed(const std::string& bytes);
  // The held-back bytes, when the text ended without the stop text.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::string stop_, held_;
  bool stopped_ = false;
};

// The generated tokens (the prompt excluded); `on_token` sees each as soon as it is drawn.
// window ≤ model.seq() (the model's arena holds that many positions).
// The prompt must be non-empty; an id outside [0, V) is an input error naming it and V. Logits that
// are not finite (broken weights) are an input error naming the token.
std::vector<int32_t> sample_tokens(Model& model, int window, const std::vector<int32_t>& prompt,
                                   const SampleOptions& options,
                                   const std::function<void(int32_t)>& on_token = {});

}  // namespace reftrain
