// BPE training: a worked example by hand, the incremental trainer against a naive one that
// recounts every pair before each merge, chunk counting independent of the pieces, the same
// file on one and two threads, Hugging Face's JavaScript tokenizer reading the file; and the
// `reftrain tokenizer` command: encode, decode, train, and its one-line errors.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/tokenizer/bpe_train.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/tokenizer.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"
#include "tests/tokenizer/corpus.h"

namespace reftrain::testing {
namespace {

std::string fortunes_sample(size_t bytes) {
  std::string text;
  for (const std::string& t : fortune_texts()) text += t;
  return text.substr(0, bytes);
}

int32_t byte_id(char c) {
  for (int i = 0; i < 256; ++i) {
    if (gpt2_byte_order()[size_t(i)] == static_cast<unsigned char>(c)) return i;
  }
  return -1;
}

// "aaabdaaabac" is one chunk. Pairs: aa 4, ab 2, the rest 1: merge a+a. Then aa+a and a+b tie
// at 2; ("a", "b") < ("aa", "a") as byte strings: merge a+b. Then aa+ab (2): "aaab".
TEST(TokenizerTrain, WorkedExample) {
  BpeTrainStats stats;
  const Tokenizer t = train_bpe("aaabdaaabac", 260, "example", &stats);
  ASSERT_EQ(t.merges().size(), 3u);
  auto merge_text = [&](size_t k) {
    return t.token_bytes(t.merges()[k].left) + "+" + t.token_bytes(t.merges()[k].right);
  };
  EXPECT_EQ(merge_text(0), "a+a");
  EXPECT_EQ(merge_text(1), "a+b");
  EXPECT_EQ(merge_text(2), "aa+ab");
  EXPECT_EQ(t.vocab_size(), 260);
  EXPECT_EQ(t.eot_id(), 259);
  EXPECT_EQ(t.token_bytes(258), "aaab");
  EXPECT_EQ(t.encode("aaabdaaabac"),
            (std::vector<int32_t>{258, byte_id('d'), 258, byte_id('a'), byte_id('c')}));
  EXPECT_EQ(stats.tokens, 5);
  // Encoding replays the ranks: a b a a a b -> a b aa a b -> ab aa ab -> ab aaab.
  EXPECT_EQ(t.encode("abaaab"), (std::vector<int32_t>{257, 258}));
  EXPECT_FALSE(stats.ran_out);
}

// The definition, run literally: count every adjacent pair of every chunk (times the chunk's
// count), merge the best everywhere, repeat.
std::vector<std::pair<std::string, std::string>> naive_merges(const std::string& text, int n) {
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (const auto& [chunk, count] : count_chunks(text)) {
    std::vector<std::string> symbols;
    for (const char c : chunk) symbols.push_back(std::string(1, c));
    words.push_back({symbols, count});
  }
  std::vector<std::pair<std::string, std::string>> merges;
  for (int k = 0; k < n; ++k) {
    std::map<std::pair<std::string, std::string>, int64_t> counts;
    for (const auto& [s, count] : words) {
      for (size_t i = 0; i + 1 < s.size(); ++i) counts[{s[i], s[i + 1]}] += count;
    }
    if (counts.empty()) break;
    auto best = counts.begin();  // the map is in (left, right) order: ties go to the first
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    const auto [a, b] = best->first;
    merges.push_back({a, b});
    for (auto& [s, count] : words) {
      std::vector<std::string> joined;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          joined.push_back(a + b), ++i;
        } else {
          joined.push_back(s[i]);
        }
      }
      s = joined;
    }
  }
  return merges;
}

TEST(TokenizerTrain, IncrementalCountsEqualRecountingEverything) {
  std::string text = fortunes_sample(40000);
  for (const std::string& t : handmade_texts()) text += t;
  const Tokenizer t = train_bpe(text, 600, "sample");
  const auto expected = naive_merges(text, int(t.merges().size()));
  ASSERT_EQ(t.merges().size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    ASSERT_EQ(t.token_bytes(t.merges()[k].left), expected[k].first) << "merge " << k + 1;
    ASSERT_EQ(t.token_bytes(t.merges()[k].right), expected[k].second) << "merge " << k + 1;
  }
}

TEST(TokenizerTrain, ChunkCountsDoNotDependOnThePieces) {
  const std::string text = fortunes_sample(300000);
  const auto whole = count_chunks(text, text.size());
  EXPECT_EQ(count_chunks(text, 1000), whole);
  EXPECT_EQ(count_chunks(text, 1), whole);
  int64_t bytes = 0;
  for (const auto& [chunk, count] : whole) bytes += int64_t(chunk.size()) * count;
  EXPECT_EQ(bytes, int64_t(text.size()));
}

TEST(TokenizerTrain, ReportedTokensAreTheEncodingAndTheFileIsTheTokenizer) {
  const std::string text = fortunes_sample(200000);
  BpeTrainStats stats;
  const Tokenizer t = train_bpe(text, 1024, "sample", &stats);
  EXPECT_EQ(t.vocab_size(), 1024);
  EXPECT_EQ(t.eot_id(), 1023);
  EXPECT_EQ(stats.tokens, int64_t(t.encode(text).size()));
  EXPECT_EQ(stats.bytes, int64_t(text.size()));
  EXPECT_GT(stats.merges, 700);
  TempDir dir;
  write_file(dir.file("tok.json"), to_tokenizer_json(t));
  const Tokenizer back = load_tokenizer(dir.file("tok.json"));
  EXPECT_EQ(back.hash(), t.hash());
  EXPECT_EQ(back.kind(), "bpe");
  EXPECT_EQ(back.encode(text), t.encode(text));
}

TEST(TokenizerTrain, StopsWhenTheTextRunsOutOfPairs) {
  BpeTrainStats stats;
  const Tokenizer t = train_bpe("ab ab", 1000, "tiny", &stats);
  EXPECT_TRUE(stats.ran_out);
  EXPECT_EQ(t.vocab_size(), 256 + 2 + 1);  // "ab" (2 pairs), then " ab"; then none is left
}

// Hugging Face's own JavaScript implementation reads reftrain's tokenizer.json and encodes the
// corpus identically (it splits the literal "<|endoftext|>" out as the special token, which
// reftrain leaves as text, so those texts are left out).
TEST(TokenizerTrain, HuggingFaceTokenizersJsReadsTheFile) {
  TempDir dir;
  const std::string file = dir.file("tok.json");
  write_file(file, to_tokenizer_json(train_bpe(fortunes_sample(300000), 2048, "sample")));
  const Tokenizer t = load_tokenizer(file);
  std::vector<std::string> texts;
  for (const std::string& text : oracle_texts()) {
    if (text.find("<|endoftext|>") == std::string::npos) texts.push_back(text);
  }
  write_texts(dir.file(""), texts);
  const nlohmann::json out = run_oracle("hf " + file + " " + dir.file(""));
  ASSERT_TRUE(out.contains("hf"));
  ASSERT_EQ(out["hf"].size(), texts.size());
  size_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> theirs = out["hf"][i].get<std::vector<int32_t>>();
    ASSERT_EQ(t.encode(texts[i]), theirs) << "text " << i << " " << printable(texts[i], 200);
    tokens += theirs.size();
  }
  std::printf("@huggingface/tokenizers: %zu texts, %zu tokens equal\n", texts.size(), tokens);
}

}  // namespace
}  // namespace reftrain::testing
