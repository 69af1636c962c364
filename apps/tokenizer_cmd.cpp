// `reftrain tokenizer`: train a byte-level BPE tokenizer (core/tokenizer/bpe_train.h), and encode
// text to token ids or decode ids to text with one (core/tokenizer/tokenizer.h).
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "core/base/error.h"
#include "core/formats/atomic_file.h"
#include "core/formats/input_file.h"
#include "core/tokenizer/bpe_train.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/data.h"

namespace reftrain {

namespace {

struct TokenizerArgs {
  std::string data, out, tokenizer, input;
  int vocab_size = 4096;
  int threads = 0;
  CLI::App *train = nullptr, *encode = nullptr, *decode = nullptr;
};

// The text of the fortunes corpus exactly as `reftrain train` reads it (load_fortunes).
std::string fortunes_text() {
  const Dataset d = load_fortunes();
  std::string text;
  text.reserve(d.train.size() + d.val.size());
  for (const uint16_t t : d.train) text += char(t);
  for (const uint16_t t : d.val) text += char(t);
  return text;
}

// FILE's bytes, or standard input's when FILE is empty or "-"; `what` names FILE in messages.
std::string read_input(const std::string& path, const std::string& what) {
  if (!path.empty() && path != "-") return InputFile(path, what).read_all();
  std::string text;
  std::vector<char> buf(1 << 16);
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), stdin)) > 0;)
    text.append(buf.data(), n);
  if (std::ferror(stdin)) throw input_error("standard input cannot be read");
  return text;
}

int run_train(const TokenizerArgs& a) {
  if (a.out.empty()) throw usage_error("--out needs a file name");
  refuse_clobbering({{"--out", a.out}}, {{"--data", a.data}});
  check_writable("--out", a.out);
  const std::string text = a.data.empty() ? fortunes_text() : read_input(a.data, "data file");
  if (text.empty()) {
    throw input_error((a.data == "-" ? "standard input" : "data file " + a.data) +
                      " is empty: there is nothing to train on");
  }
  const auto start = std::chrono::steady_clock::now();
  BpeTrainStats stats;
  const Tokenizer t = train_bpe(text, a.vocab_size, "", &stats);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_text_file(a.out, to_tokenizer_json(t));
  std::fprintf(stderr,
               "wrote %s: vocab %d (%lld merges%s), %.2f s, %.3f bytes/token on %lld bytes of "
               "training data (%lld chunks, %lld distinct), %d thread%s\n",
               a.out.c_str(), t.vocab_size(), static_cast<long long>(stats.merges),
               stats.ran_out ? "; the data has no more pairs" : "", seconds,
               double(stats.bytes) / double(std::max<int64_t>(stats.tokens, 1)),
               static_cast<long long>(stats.bytes), static_cast<long long>(stats.chunks),
               static_cast<long long>(stats.unique_chunks), omp_get_max_threads(),
               omp_get_max_threads() == 1 ? "" : "s");
  return 0;
}

int run_encode(const TokenizerArgs& a) {
  const Tokenizer t = load_tokenizer(a.tokenizer);
  const std::vector<int32_t> ids = t.encode(read_input(a.input, "input file"));
  std::string out;
  out.reserve(ids.size() * 6 + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ' ';
    out += std::to_string(ids[i]);
  }
  write_stdout(out + "\n");
  return 0;
}

// Whitespace-separated decimal ids; anything else is an input error naming the item.
std::vector<int32_t> parse_ids(const std::string& text, const std::string& name) {
  std::vector<int32_t> ids;
  auto space = [](char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  };
  for (size_t i = 0; i < text.size();) {
    if (space(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && !space(text[j])) ++j;
    const std::string item = text.substr(i, j - i);
    const bool digits = item.find_first_not_of("0123456789") == std::string::npos;
    const std::string where =
        name + ": item " + std::to_string(ids.size() + 1) + " " + printable(item);
    if (!digits) throw input_error(where + " is not a token id (decimal digits)");
    // Digits, but too many for any id: say that, not that they are no digits.
    if (item.size() > 10 || std::stoll(item) > INT32_MAX) {
      throw input_error(where +
                        " is larger than any token id; ids are below the tokenizer's "
                        "vocabulary size");
    }
    ids.push_back(int32_t(std::stoll(item)));
    i = j;
  }
  return ids;
}

int run_decode(const TokenizerArgs& a) {
  const Tokenizer t = load_tokenizer(a.tokenizer);
  const std::string name = a.input.empty() || a.input == "-" ? "standard input" : a.input;
  write_stdout(t.decode(parse_ids(read_input(a.input, "ids file"), name)));
  return 0;
}

}  // namespace

CommandRunner add_tokenizer_command(CLI::App& app) {
  auto a = std::make_shared<TokenizerArgs>();
  app.require_subcommand(1);
  a->train = app.add_subcommand("train", "train a byte-level BPE tokenizer on a text");
  a->train->add_option(
      "--data", a->data,
      "text file to train on, - for standard input (default: the fortunes corpus)");
  a->train->add_option("--vocab-size", a->vocab_size, "tokens, <|endoftext|> included")
      ->capture_default_str()
      ->transform(decimal_int(kMinTrainVocab, kMaxTrainVocab));
  a->train->add_option("--out", a->out, "the tokenizer.json to write")->required();
  a->train->add_option("--threads", a->threads, "OpenMP threads (default: all cores)")
      ->transform(decimal_int(1, 4096));
  a->encode = app.add_subcommand("encode", "print the token ids of a text, space-separated");
  a->decode = app.add_subcommand("decode", "write the text of whitespace-separated token ids");
  for (CLI::App* sub : {a->encode, a->decode}) {
    sub->add_option("--tokenizer", a->tokenizer,
                    "bytes, gpt2, a tokenizer.json, or a directory of GPT-2-style files")
        ->required();
    sub->add_option("file", a->input, "input file (default: standard input)");
  }
  return [a] {
    if (a->threads > 0) omp_set_num_threads(a->threads);
    if (a->train->parsed()) return run_train(*a);
    if (a->encode->parsed()) return run_encode(*a);
    return run_decode(*a);
  };
}

}  // namespace reftrain
