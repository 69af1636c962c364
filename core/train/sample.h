// Text generation: tokens drawn one at a time from the model's next-token distribution. Used by
// `reftrain sample` (from a checkpoint) and at the end of `reftrain train` (Trainer::sample).
//
// Token i (0-based) after the prompt: the logits z of the last position of the context (B = 1),
// over the V real vocabulary entries (not the padding), and
//   temperature 0: the argmax (the lowest id among equal maxima), no random draw;
//   otherwise:     p_j ∝ exp((z_j − max z)/temperature), in double, over the top_k largest z
//                  (ties broken by the lower id; top_k 0 = all V), and the token is the first j
//                  in id order whose cumulative p passes u·Σp, u = CounterRng(seed, kSample)
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
#include <vector>

#include "core/model/model.h"

namespace reftrain {

struct SampleOptions {
  int tokens = 256;          // how many to generate
  float temperature = 1.0f;  // ≥ 0; 0 = greedy
  int top_k = 0;             // 0 = every token of the vocabulary
  uint64_t seed = 0;
  bool kv_cache = true;  // false: the recompute path, a forward over the window per token
};

// The generated tokens (the prompt excluded); `on_token` sees each as soon as it is drawn.
// window ≤ model.seq() (the model's arena holds that many positions).
// The prompt must be non-empty; an id outside [0, V) is an input error naming it and V. Logits that
// are not finite (broken weights) are an input error naming the token.
std::vector<int32_t> sample_tokens(Model& model, int window, const std::vector<int32_t>& prompt,
                                   const SampleOptions& options,
                                   const std::function<void(int32_t)>& on_token = {});

}  // namespace reftrain
