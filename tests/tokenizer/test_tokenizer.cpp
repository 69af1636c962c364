// The tokenizer against independent oracles: GPT-2's encoding equals gpt-3-encoder's (OpenAI's
// encoder ported to JavaScript) and js-tiktoken's gpt2 encoding token for token; the Hugging
// Face file names and tokenizer.json give the same tokenizer; any bytes round-trip; the bytes
// tokenizer is encode_bytes; the pre-tokenizer's documented splits.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/pretokenize.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/data.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"
#include "tests/tokenizer/corpus.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// GPT-2's files must be where install-deps.sh puts them; a failure otherwise, saying so.
const Tokenizer& gpt2() {
  static const Tokenizer t = [] {
    try {
      return load_tokenizer("gpt2");
    } catch (const UserError& e) {
      ADD_FAILURE() << e.what();
      return Tokenizer();
    }
  }();
  return t;
}

// Token-for-token equality of reftrain's encoding with an oracle's; counts what was compared.
void expect_same_ids(const Tokenizer& t, const std::vector<std::string>& texts,
                     const nlohmann::json& ids, const std::string& oracle, size_t& tokens) {
  ASSERT_TRUE(ids.is_array()) << oracle;
  ASSERT_EQ(ids.size(), texts.size()) << oracle;
  int mismatches = 0;
  for (size_t i = 0; i < texts.size() && mismatches < 5; ++i) {
    const std::vector<int32_t> ours = t.encode(texts[i]);
    const std::vector<int32_t> theirs = ids[i].get<std::vector<int32_t>>();
    if (ours != theirs) {
      ++mismatches;
      ADD_FAILURE() << oracle << " differs on text " << i << " " << printable(texts[i], 200);
    }
    tokens += theirs.size();
  }
}

TEST(TokenizerGpt2, EncodesAsBothJavaScriptEncoders) {
  const std::vector<std::string> texts = oracle_texts();
  TempDir dir;
  write_texts(dir.file(""), texts);
  const nlohmann::json out = run_oracle("gpt2 " + dir.file(""));
  ASSERT_FALSE(out.is_null());
  ASSERT_EQ(gpt2().vocab_size(), 50257);
  size_t bytes = 0, gpt3_tokens = 0, tiktoken_tokens = 0;
  for (const std::string& t : texts) bytes += t.size();
  expect_same_ids(gpt2(), texts, out["gpt3"], "gpt-3-encoder", gpt3_tokens);
  expect_same_ids(gpt2(), texts, out["tiktoken"], "js-tiktoken gpt2", tiktoken_tokens);
  EXPECT_GT(bytes, 300000u);
  std::printf(
      "compared %zu texts (%zu bytes): %zu tokens with gpt-3-encoder, %zu with js-tiktoken\n",
      texts.size(), bytes, gpt3_tokens, tiktoken_tokens);
}

TEST(TokenizerGpt2, KnownIdsAndTheEndOfTextToken) {
  const Tokenizer& t = gpt2();
  EXPECT_EQ(t.kind(), "gpt2");
  EXPECT_TRUE(fs::path(t.source()).is_absolute()) << t.source();
  EXPECT_EQ(t.eot_id(), 50256);
  EXPECT_EQ(t.decode({50256}), "<|endoftext|>");
  // "Hello world" is 15496 995 in every GPT-2 implementation; the literal end-of-text text is
  // text: "<", "|", "endoftext", "|", ">".
  EXPECT_EQ(t.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(t.encode("<|endoftext|>"), (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(t.merges().size(), 50000u);
  EXPECT_EQ(t.hash_text().size(), 24u);
  EXPECT_EQ(t.hash_text().substr(0, 8), "fnv1a64:");
}

// vocab.json + merges.txt (Hugging Face's names for the same two files, written here from
// OpenAI's: the vocab re-serialised in another key order, the merges without the #version
// line and with CRLF endings) and tokenizer.json give the same tokenizer: same hash, same ids.
TEST(TokenizerGpt2, HuggingFaceFilesGiveTheSameTokenizer) {
  const Tokenizer& openai = gpt2();
  ASSERT_EQ(openai.vocab_size(), 50257);
  TempDir dir;
  const fs::path src = gpt2_files_dir();
  const nlohmann::json vocab = nlohmann::json::parse(read_file((src / "encoder.json").string()));
  write_file(dir.file("vocab.json"), vocab.dump(1));  // std::map order, not the file's
  std::string merges;
  for (const std::string& line : split_lines(read_file((src / "vocab.bpe").string()))) {
    if (line.rfind("#version", 0) != 0 && !line.empty()) merges += line + "\r\n";
  }
  write_file(dir.file("merges.txt"), merges);
  const Tokenizer hf = load_tokenizer(dir.file(""));
  EXPECT_EQ(hf.kind(), "gpt2");
  EXPECT_EQ(hf.hash(), openai.hash());
  write_file(dir.file("gpt2.json"), to_tokenizer_json(openai));
  const Tokenizer json = load_tokenizer(dir.file("gpt2.json"));
  EXPECT_EQ(json.kind(), "bpe");
  EXPECT_EQ(json.source(), fs::canonical(dir.file("gpt2.json")).string());
  EXPECT_EQ(json.hash(), openai.hash());
  EXPECT_EQ(json.eot_id(), 50256);
  for (const std::string& text : oracle_texts()) {
    const std::vector<int32_t> ids = openai.encode(text);
    ASSERT_EQ(hf.encode(text), ids) << printable(text);
    ASSERT_EQ(json.encode(text), ids) << printable(text);
  }
}

// Random bytes: uniform, then mostly-valid UTF-8 with invalid sequences spliced in (stray
// continuation bytes, truncated sequences, overlong forms, surrogates, F5..FF).
std::vector<std::string> random_byte_texts() {
  TestData rng(7);
  std::vector<std::string> out;
  for (int i = 0; i < 200; ++i) {
    std::string s(size_t(rng.below(300)), '\0');
    for (char& c : s) c = char(rng.below(256));
    out.push_back(s);
  }
  const std::vector<std::string> bad = {
      "\x80",         "\xbf\xbf",     "\xc0\xaf",         "\xc1\xbf",
      "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80",
      "\xf5",         "\xff\xfe",     "\xe6\x97",         "\xf0\x9f\x98",
      "\xc3"};
  const std::vector<std::string> good = random_class_texts(400, 8);
  for (int i = 0; i < 400; ++i) {
    out.push_back(good[size_t(i)] + bad[rng.below(bad.size())] + good[rng.below(good.size())] +
                  bad[rng.below(bad.size())]);
  }
  return out;
}

TEST(TokenizerGpt2, AnyBytesRoundTrip) {
  const Tokenizer& t = gpt2();
  ASSERT_EQ(t.vocab_size(), 50257);
  for (const std::string& bytes : random_byte_texts()) {
    const std::vector<int32_t> ids = t.encode(bytes);
    for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 50256) << printable(bytes);
    ASSERT_EQ(t.decode(ids), bytes) << printable(bytes);
  }
  EXPECT_EQ(t.decode(t.encode("")), "");
}

// An invalid byte is one character of class "other", as node's U+FFFD would be: the chunks of
// "a \xff\xfe b" are those of "a \uFFFD b" (its bytes aside).
TEST(TokenizerPretokenize, SplitsAsGpt2sPattern) {
  auto chunks = [](const std::string& text) {
    std::vector<std::string> out;
    for_each_pretoken(text, [&](std::string_view c) { out.emplace_back(c); });
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(chunks("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(chunks("it's we'll I'M"), (V{"it", "'s", " we", "'ll", " I", "'", "M"}));
  EXPECT_EQ(chunks("a   b"), (V{"a", "  ", " b"}));        // \s+(?!\S) leaves the last space
  EXPECT_EQ(chunks("a\n\nb"), (V{"a", "\n", "\n", "b"}));  // ... which \s+ then takes alone
  EXPECT_EQ(chunks("x  "), (V{"x", "  "}));                // at the end the lookahead holds
  EXPECT_EQ(chunks("abc123 456!!  ?"), (V{"abc", "123", " 456", "!!", " ", " ?"}));
  EXPECT_EQ(chunks("a \xff\xfe b"), (V{"a", " \xff\xfe", " b"}));
  EXPECT_EQ(chunks("\xe6\x97\xa5\xe6\x97"), (V{"\xe6\x97\xa5", "\xe6\x97"}));
  EXPECT_EQ(chunks("\xc2\x85!x"), (V{"\xc2\x85!", "x"}));  // U+0085 is no \s in JavaScript
  EXPECT_EQ(unicode::kUnicodeVersion, std::string("17.0"));
}

TEST(TokenizerBytes, IsTheByteTokenizer) {
  const Tokenizer t = load_tokenizer("bytes");
  EXPECT_EQ(t.kind(), "bytes");
  EXPECT_EQ(t.source(), "bytes");
  EXPECT_EQ(t.vocab_size(), 256);
  EXPECT_EQ(t.eot_id(), -1);
  for (const std::string& text : random_byte_texts()) {
    const std::vector<uint16_t> expected = encode_bytes(text);
    const std::vector<int32_t> ids = t.encode(text);
    ASSERT_EQ(ids, std::vector<int32_t>(expected.begin(), expected.end()));
    ASSERT_EQ(t.decode(ids), decode_bytes(ids));
  }
  EXPECT_NE(t.hash(), gpt2().hash());
  EXPECT_EQ(t.hash_text(), data_hash_text(t.hash()));
  EXPECT_NE(user_error_of([&] { t.decode({256}); }).find("token id 256 at position 1"),
            std::string::npos);
}

TEST(TokenizerByteLevel, Gpt2sAlphabet) {
  EXPECT_EQ(byte_to_unicode()[' '], char32_t(0x120));
  EXPECT_EQ(byte_to_unicode()['\n'], char32_t(0x10A));
  EXPECT_EQ(byte_to_unicode()['A'], char32_t('A'));
  EXPECT_EQ(gpt2_byte_order()[0], '!');
  EXPECT_EQ(gpt2_byte_order()[188], 0);
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  EXPECT_EQ(from_byte_level(to_byte_level(all)), all);
  EXPECT_FALSE(from_byte_level(" ").has_value());  // a space is written as 'Ġ'
}

}  // namespace
}  // namespace reftrain::testing
