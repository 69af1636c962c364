// Command-line helpers shared by the subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/eval.h"
#include "core/train/run_config.h"

namespace reftrain {

// A --seed value: decimal digits only, 0 .. 2^64-1 (CLI11 would wrap "-1" or 2^64 into a valid
// uint64 silently); a usage error otherwise.
uint64_t parse_seed(const std::string& text);

// The one parser of every numeric option (CLI11 alone reads "010" as octal 8, "0x10" as 16,
// and lets "nan" or an underflowing "1e-50" through). Integers: an optional '-' and decimal
// digits only (leading zeros stay decimal), inside [lo, hi]. Floats: decimal text (no hex, no
// nan/inf) whose value is finite in the target type, and nonzero when the text is (so
// `--clip 1e-50` is refused, not turned into 0 = off). Errors name the flag and the rule.
int64_t parse_int(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);
double parse_real(const std::string& flag, const std::string& text, bool single_precision);
// A seed option binds its text and calls parse_seed when the command runs.
// The same rules as CLI11 transforms on an option bound to its variable: each rewrites the
// text to the canonical decimal CLI11 then converts, so help and defaults stay CLI11's.
CLI::Validator decimal_int(int64_t lo, int64_t hi);
CLI::Validator decimal_real(bool single_precision, double lo = -HUGE_VAL);
// One of `names`, exactly; the message quotes the value and lists the names (CLI11's IsMember
// echoed the value bare).
CLI::Validator one_of(const std::vector<std::string>& names);

// A training value the user may give: the option of one row of train_fields(), flag and help
// from the row. Numbers land in `numbers` (CLI11 checks their type), names and the seed in
// `text` (the names checked against the enum's table).
struct FieldOption {
  const TrainField* field = nullptr;
  CLI::Option* option = nullptr;
  std::string text;
  bool given() const { return option->count() > 0; }
};
// `out` must stay where it is while `app` parses (the option writes into out.text).
void add_field_option(CLI::App& app, const TrainField& field, TrainConfig& numbers,
                      FieldOption& out);
// Sets the field in `t` from what the user gave (nothing when it was not given).
void apply_field_option(const FieldOption& o, const TrainConfig& numbers, TrainConfig& t);

// A file a command reads or writes, with the flag that named it (for messages).
struct NamedPath {
  std::string flag, path;
};

// A usage error when an output is the same file as an input or as another output (compared by
// device and inode, so a link or another spelling of the path is caught): writing it would
// destroy what the command reads, before anyone noticed. Empty paths are skipped.
void refuse_clobbering(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// Standard output could not take a write (a reader that went away, a full disk): the command
// stops there instead of computing output nobody receives (SIGPIPE is ignored, so only the
// failed write tells).
struct StdoutError : UserError {
  StdoutError() : UserError("standard output cannot be written", kExitInputError) {}
};
// Writes `bytes` to standard output and flushes it; StdoutError when either fails.
void write_stdout(const std::string& bytes);

// Prints each sampled token as soon as it is drawn, flushed: its bytes under `tokenizer`, or
// without one (llm.c ids of unknown meaning) the id as " ID". Used by `sample` (`strict`: a
// failed write throws StdoutError) and by the sample that ends `train` (not strict: a closed
// stdout must not fail a run whose checkpoints are written).
std::function<void(int32_t)> token_printer(std::shared_ptr<const Tokenizer> tokenizer, bool strict);
// The prompt that starts a sample when none is given: <|endoftext|> when the tokenizer has it
// (or, without a tokenizer, the last id of the model's vocab, GPT-2's <|endoftext|>), else a
// newline.
int32_t default_prompt(const Tokenizer* tokenizer, int model_vocab);

// The ids of a text file to evaluate on (--eval-data, `eval --data`), under `tokenizer`: an
// input error naming `flag` when the file is missing, unreadable or empty.
std::vector<int32_t> eval_ids(const std::string& flag, const std::string& path,
                              const Tokenizer& tokenizer);
// evaluate() with a progress line on stderr ("eval: window k/N", rewritten on a terminal).
EvalResult evaluate_with_progress(Model& model, int B, int T, const std::vector<int32_t>& ids,
                                  const Tokenizer& tokenizer);
// "loss L nats/token | perplexity P | B bits/byte (N tokens, M bytes)".
std::string eval_summary(const EvalResult& e);

}  // namespace reftrain
