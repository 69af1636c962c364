// Evaluation of a model on a text (`reftrain eval`, `train --eval-data`): the cross-entropy of
// every token of the text but the first, given the tokens before it in its window, as loss per
// token, perplexity per token and bits per byte.
//
// The ids are cut into consecutive windows of T + 1 tokens that overlap by one (window w reads
// ids w·T .. w·T + T and predicts ids w·T + 1 .. w·T + T), B windows per forward; the last,
// shorter window has the ids left over. So every id after the first is predicted exactly once,
// from between 0 and T − 1 tokens of its own window (the start of a window sees little), and the
// numbers are the same for any thread count: each row's log-sum-exp is computed in double from
// the logits, in id order, and the rows are added in text order. The loss is plain
// cross-entropy (no z-loss term), so it is the same quantity for every family.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"

namespace reftrain {

struct EvalResult {
  uint64_t tokens = 0;  // ids predicted
  uint64_t bytes = 0;   // the text bytes those ids stand for
  double nats = 0;      // the sum of their cross-entropies
  double loss() const { return tokens ? nats / double(tokens) : 0.0; }  // nats per token
  double perplexity() const;                                            // exp(loss)
  double bits_per_byte() const;                                         // nats / ln 2 / bytes
};

// Evaluates `model` (built for at least B rows of T positions) on `ids` (at least 2, each <
// the model's vocabulary: an input error otherwise), the bytes counted under `tokenizer`.
// `progress(done, total)` sees the windows done after each forward.
EvalResult evaluate(Model& model, int B, int T, const std::vector<int32_t>& ids,
                    const Tokenizer& tokenizer,
                    const std::function<void(size_t, size_t)>& progress = {});

}  // namespace reftrain
