// explain bpe: byte-level BPE training on an 11-byte text (docs/kernels/13_tokenizer.md), merge
// by merge, with train_bpe itself (core/tokenizer/bpe_train.h): each merge's pair and new id,
// and the text's tokens after it. Seed 1 is the page's text; other seeds draw 11 letters from
// "abcd", so a student can redo the counting on text of their own.
#include <cstdint>
#include <string>
#include <vector>

#include "apps/explain/explain.h"
#include "core/tokenizer/bpe_train.h"

namespace reftrain::explain {

namespace {

// The training text of `seed`.
std::string bpe_text(uint64_t seed) {
  if (seed == 1) return "aaabdaaabac";
  Inputs in(seed);
  std::string text;
  for (int t : in.tokens(11, 4)) text += char('a' + t);
  return text;
}

// "aa ab d" for the tokens of `text` under `tok`.
std::string shown(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + tok.token_bytes(id);
  return s;
}

void run_bpe(Printer& out, uint64_t seed) {
  const std::string text = bpe_text(seed);
  out.title("bpe: byte-level BPE training, merge by merge (train_bpe)");
  out.line("(text '" + text + "': one chunk, all letters. Each merge joins the most");
  out.line(" frequent adjacent pair; a tie goes to the smaller (bytes(left), bytes(right)).)");
  out.section("merges (ids 256 on; a vocabulary of 257 + k holds k merges)");
  out.line("  bytes:    " +
           shown(train_bpe(text, kMinTrainVocab, "explain"),
                 train_bpe(text, kMinTrainVocab, "explain").encode(text)) +
           "   (" + std::to_string(text.size()) + " tokens)");
  for (int k = 1; k <= 3; ++k) {
    const Tokenizer tok = train_bpe(text, kMinTrainVocab + k, "explain");
    if (int(tok.merges().size()) < k) {
      out.line("  no pair left: training stops");
      break;
    }
    const std::vector<int32_t> ids = tok.encode(text);
    out.line("  merge " + std::to_string(k) + ":  '" + tok.token_bytes(255 + k) + "' = id " +
             std::to_string(255 + k) + ";  " + shown(tok, ids) + "   (" +
             std::to_string(ids.size()) + " tokens)");
  }
}

}  // namespace

std::string bpe_exercise_text(uint64_t seed) {
  return bpe_text(seed);
}

void add_tokenizer(std::vector<Explainer>& v) {
  v.push_back({"bpe", "byte-level BPE training, merge by merge (no GPU twin)",
               "docs/kernels/13_tokenizer.md", run_bpe});
}

}  // namespace reftrain::explain
