// Text generation: tokens drawn one at a time from the model's next-token distribution. Used by
// `reftrain sample` (from a checkpoint) and at the end of `reftrain train` (Trainer::sample).
//
// Token i (0-based) after the prompt: forward over the last `window` tokens (B = 1), take the
// last position's logits z over the V real vocabulary entries (not the padding) and
//   temperature 0: the argmax (the lowest id among equal maxima), no random draw;
//   otherwise:     p_j ∝ exp((z_j − max z)/temperature), in double, over the top_k largest z
//                  (ties broken by the lower id; top_k 0 = all V), and the token is the first j
//                  in id order whose cumulative p passes u·Σp, u = CounterRng(seed, kSample)
//                  .uniform(i) (docs/rng.md). So the same seed gives the same text.
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
};

// The generated tokens (the prompt excluded); `on_token` sees each as soon as it is drawn.
// The prompt must be non-empty; an id outside [0, V) is an input error naming it and V. Logits that
// are not finite (broken weights) are an input error naming the token.
std::vector<int32_t> sample_tokens(Model& model, int window, const std::vector<int32_t>& prompt,
                                   const SampleOptions& options,
                                   const std::function<void(int32_t)>& on_token = {});

}  // namespace reftrain
