// Sampling a user expects (issue 31): top-p, the frequency penalty, stop texts, a session that
// keeps its KV cache between turns, and `sample`'s flags for them with their one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/train/config.h"
#include "core/train/sample.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

class SamplingOptions : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = make_model(find_preset("tiny").model, ModelOptions{1, kWindow});
    model_->init_weights(11);
  }
  std::vector<int32_t> sample(const SampleOptions& o, const std::vector<int32_t>& prompt) {
    return sample_tokens(*model_, kWindow, prompt, o);
  }
  static constexpr int kWindow = 32;
  std::unique_ptr<Model> model_;
  const std::vector<int32_t> prompt_ = {'T', 'h', 'e', ' '};
};

// A nucleus of (almost) no probability holds the likeliest token alone: greedy decoding.
TEST_F(SamplingOptions, TinyTopPIsGreedyAndTopPOneChangesNothing) {
  SampleOptions greedy{40, 0.0f, 0, 1}, nucleus{40, 1.0f, 0, 1}, full{40, 1.0f, 0, 1};
  nucleus.top_p = 1e-6f;
  EXPECT_EQ(sample(nucleus, prompt_), sample(greedy, prompt_));
  SampleOptions one = full;
  one.top_p = 1.0f;
  EXPECT_EQ(sample(one, prompt_), sample(full, prompt_));
  SampleOptions half = full;
  half.top_p = 0.5f;
  EXPECT_NE(sample(half, prompt_), sample(full, prompt_));  // the cut changes the draws
}

// z'_j = z_j − α·c_j: a large α makes greedy decoding avoid every token of its window.
TEST_F(SamplingOptions, FrequencyPenaltyAvoidsRepeats) {
  SampleOptions o{20, 0.0f, 0, 1};
  o.frequency_penalty = 1e4f;
  const std::vector<int32_t> out = sample(o, prompt_);
  std::vector<int32_t> all = prompt_;
  all.insert(all.end(), out.begin(), out.end());
  std::map<int32_t, int> count;
  for (int32_t t : all) ++count[t];
  for (const auto& [t, n] : count) EXPECT_EQ(n, 1) << "token " << t << " repeats";
  // Without the penalty the greedy text of this model repeats itself.
  o.frequency_penalty = 0.0f;
  const std::vector<int32_t> plain = sample(o, prompt_);
  std::map<int32_t, int> plain_count;
  for (int32_t t : plain) ++plain_count[t];
  EXPECT_LT(plain_count.size(), plain.size());
}

// A second turn decodes its prompt against the cache (no prefill) and continues exactly as a
// single sample of the whole conversation would (greedy, so the draws' indices do not matter).
TEST_F(SamplingOptions, SessionKeepsTheCacheBetweenTurns) {
  const SampleOptions o{6, 0.0f, 0, 1};
  SampleSession session(*model_, kWindow, o);
  const std::vector<int32_t> first = session.turn(prompt_);
  const int64_t prefilled = session.prefilled();
  EXPECT_EQ(prefilled, int64_t(prompt_.size()));
  const std::vector<int32_t> next = {'c', 'a', 't'};
  const std::vector<int32_t> second = session.turn(next);
  EXPECT_EQ(session.prefilled(), prefilled);  // decodes only
  std::vector<int32_t> whole = prompt_;
  whole.insert(whole.end(), first.begin(), first.end());
  whole.insert(whole.end(), next.begin(), next.end());
  EXPECT_EQ(second, sample(o, whole));
  // A turn that does not fit beside the cache prefills the context's last window.
  const std::vector<int32_t> long_prompt(30, 'x');
  session.turn(long_prompt);
  EXPECT_GE(session.prefilled(), prefilled + kWindow);
}

TEST_F(SamplingOptions, OnTokenEndsATurn) {
  const SampleOptions o{50, 1.0f, 0, 3};
  SampleSession session(*model_, kWindow, o);
  int seen = 0;
  const std::vector<int32_t> out = session.turn(prompt_, [&seen](int32_t) { return ++seen < 4; });
  EXPECT_EQ(out.size(), 4u);
}

TEST(StopText, HoldsBackWhatMayBeginTheStopText) {
  StopText s("END");
  EXPECT_EQ(s.feed("abc E"), "abc ");  // "E" may begin END
  EXPECT_EQ(s.feed("x"), "Ex");
  EXPECT_EQ(s.feed("EN"), "");
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.feed("D and more"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.feed("later"), "");
  StopText t("\n\n");
  EXPECT_EQ(t.feed("one\n"), "one");
  EXPECT_EQ(t.flush(), "\n");  // the text ended without the stop text
}

// The sample command's flags, on a tiny run of bytes.
class SampleFlags : public LearnableTextTest {
 protected:
  void SetUp() override {
    LearnableTextTest::SetUp();
    const CommandResult r = run_reftrain("train --preset tiny --steps 30 --threads 1 --data " +
                                         text_ + " --out " + dir_.file("run"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ckpt_ = dir_.file("run");
  }
  std::string ckpt_;
};

TEST_F(SampleFlags, StopEndsTheSampleBeforeTheStopText) {
  const SplitResult full =
      run_split("sample --ckpt " + ckpt_ + " --prompt the --tokens 200 --seed 2");
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const size_t dot = full.out.find('.', 3);
  ASSERT_NE(dot, std::string::npos) << full.out;
  const SplitResult stopped =
      run_split("sample --ckpt " + ckpt_ + " --prompt the --tokens 200 --seed 2 --stop .");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(stopped.out, full.out.substr(0, dot) + "\n");
}

TEST_F(SampleFlags, InteractiveStreamsOneTurnPerLine) {
  // stderr (the tokens/s line) is dropped inside the group, so the output is stdout alone.
  const CommandResult r = run_command("{ printf 'the cat\\na dog\\n' | " +
                                      std::string(REFTRAIN_BIN) + " sample --ckpt " + ckpt_ +
                                      " --interactive --tokens 10 --stop '\n' 2>/dev/null; }");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> lines = split_lines(r.output);
  ASSERT_EQ(lines.size(), 2u) << "[" << r.output << "]";
  EXPECT_EQ(lines[0].rfind("the cat", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("a dog", 0), 0u) << lines[1];
}

TEST_F(SampleFlags, BadInputIsAOneLineError) {
  expect_user_error("sample --ckpt " + ckpt_ + " --top-p 0", 2, "--top-p");
  expect_user_error("sample --ckpt " + ckpt_ + " --top-p 1.5", 2, "outside (0, 1]");
  expect_user_error("sample --ckpt " + ckpt_ + " --frequency-penalty -1", 2, "--frequency-penalty");
  expect_user_error("sample --ckpt " + ckpt_ + " --stop " + std::string(40, 'x'), 2,
                    "longer than the model's window of 32");
  expect_user_error("sample --ckpt " + ckpt_ + " --stop ''", 2, "--stop needs some text");
  write_file(dir_.file("empty.txt"), "");
  expect_user_error("sample --ckpt " + ckpt_ + " --prompt-file " + dir_.file("empty.txt"), 1,
                    "is empty");
  expect_user_error("sample --ckpt " + ckpt_ + " --interactive < /dev/null", 1, "read no prompt");
  expect_user_error("sample --ckpt " + ckpt_ + " --interactive --prompt x", 2,
                    "--interactive reads its prompts from stdin");
}

}  // namespace
}  // namespace reftrain::testing
