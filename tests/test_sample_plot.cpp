// Text generation (core/train/sample.h, `reftrain sample`) and loss plots (apps/plot.h, `reftrain
// plot`, `train --plot`). Sampling is checked token by token against the model's own logits
// (top-k membership, greedy argmax, the documented inverse-CDF draw) and end to end (same seed,
// same text; the sample that ends `train` is the one `sample` draws from its checkpoint). Plots
// are parsed by Python's XML parser (tests/tools/svg_series.py) and rendered by rsvg-convert.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/train/config.h"
#include "core/model/model.h"
#include "core/base/rng.h"
#include "core/train/sample.h"
#include "tests/cli_util.h"
#include "tests/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// --- sample_tokens against the model's logits --------------------------------------------------

class SampleTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = make_model(find_preset("tiny").model, ModelOptions{1, kWindow});
    model_->init_weights(11);
  }
  // The logits over V for the next token after `tokens` (the last kWindow of them).
  std::vector<float> next_logits(const std::vector<int32_t>& tokens) {
    const int T = std::min<int>(int(tokens.size()), kWindow);
    model_->forward(tokens.data() + tokens.size() - T, nullptr, 1, T);
    const int V = model_->config().vocab, Vp = model_->config().padded_vocab;
    const float* z = model_->logits() + size_t(T - 1) * Vp;
    return std::vector<float>(z, z + V);
  }
  static constexpr int kWindow = 32;
  std::unique_ptr<Model> model_;
  const std::vector<int32_t> prompt_ = {'T', 'h', 'e', ' '};
};

// Each of 48 tokens (past the window, so the context slides) is among the 3 largest logits of
// its prefix: fewer than 3 logits beat it (ties go to the lower id).
TEST_F(SampleTokens, TopKDrawsOnlyAmongTheKLargest) {
  const std::vector<int32_t> out = sample_tokens(*model_, kWindow, prompt_, {48, 1.0f, 3, 5});
  ASSERT_EQ(out.size(), 48u);
  std::vector<int32_t> tokens = prompt_;
  for (int32_t t : out) {
    const std::vector<float> z = next_logits(tokens);
    int above = 0;
    for (int j = 0; j < int(z.size()); ++j) above += z[j] > z[t] || (z[j] == z[t] && j < t);
    EXPECT_LT(above, 3) << "token " << t;
    tokens.push_back(t);
  }
}

// Temperature 0 is greedy: every token is its prefix's argmax, whatever the seed.
TEST_F(SampleTokens, TemperatureZeroIsArgmax) {
  const std::vector<int32_t> out = sample_tokens(*model_, kWindow, prompt_, {20, 0.0f, 0, 1});
  EXPECT_EQ(out, sample_tokens(*model_, kWindow, prompt_, {20, 0.0f, 0, 99}));
  std::vector<int32_t> tokens = prompt_;
  for (int32_t t : out) {
    const std::vector<float> z = next_logits(tokens);
    EXPECT_EQ(t, int32_t(std::max_element(z.begin(), z.end()) - z.begin()));
    tokens.push_back(t);
  }
}

// The first token for 64 seed values, against the rule docs/rng.md states: u = CounterRng(seed,
// kSample).uniform(0), the first token whose cumulative softmax (double) passes u·Σ.
TEST_F(SampleTokens, DrawFollowsTheDocumentedInverseCdf) {
  const std::vector<float> z = next_logits(prompt_);
  const double maxz = *std::max_element(z.begin(), z.end());
  double sum = 0.0;
  for (float x : z) sum += std::exp(double(x) - maxz);
  std::vector<int> seen(z.size(), 0);
  for (uint64_t seed = 0; seed < 64; ++seed) {
    const double u = CounterRng(seed, RngStream::kSample).uniform(0) * sum;
    double cdf = 0.0;
    int want = int(z.size()) - 1;
    for (int j = 0; j < int(z.size()); ++j) {
      cdf += std::exp(double(z[j]) - maxz);
      if (u < cdf) {
        want = j;
        break;
      }
    }
    const std::vector<int32_t> got = sample_tokens(*model_, kWindow, prompt_, {1, 1.0f, 0, seed});
    EXPECT_EQ(got[0], want) << "seed " << seed;
    seen[size_t(want)] = 1;
  }
  EXPECT_GT(std::count(seen.begin(), seen.end(), 1), 20);  // many different tokens: a real draw
}

// --- reftrain sample -----------------------------------------------------------------------------

class SampleCommand : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const std::string text = dir_->file("text.txt");
    write_file(text, learnable_text());
    train_ = run_reftrain("train --preset tiny --steps 60 --data " + text + " --out " +
                          dir_->file("ckpt"));
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override { ASSERT_EQ(train_.exit_code, 0) << train_.output; }
  static std::string ckpt() { return dir_->file("ckpt"); }
  static TempDir* dir_;
  static CommandResult train_;
};
TempDir* SampleCommand::dir_ = nullptr;
CommandResult SampleCommand::train_;

TEST_F(SampleCommand, SameSeedSameText) {
  const std::string args = "sample --ckpt " + ckpt() + " --prompt 'the cat' --tokens 80 --seed ";
  const SplitResult a = run_split(args + "5"), b = run_split(args + "5"), c = run_split(args + "6");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(a.out.rfind("the cat", 0), 0u) << a.out;            // the prompt, then the text
  EXPECT_EQ(a.out.size(), std::string("the cat").size() + 81);  // 80 byte tokens and a newline
  EXPECT_EQ(a.err, "");
}

// `train` ends with 256 tokens after a newline from the final weights, drawn with the run's
// seed; `sample` from the final checkpoint with its defaults draws the same text.
TEST_F(SampleCommand, TrainEndsWithTheSampleOfItsCheckpoint) {
  const size_t at = train_.output.find("\nsample:\n");
  ASSERT_NE(at, std::string::npos) << train_.output;
  const std::string from_train = train_.output.substr(at + 9, 256);
  const SplitResult r = run_split("sample --ckpt " + ckpt());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n" + from_train + "\n");
}

TEST_F(SampleCommand, TopKOneIsGreedy) {
  const std::string args = "sample --ckpt " + ckpt() + " --prompt 'a dog' --tokens 40 ";
  const SplitResult greedy = run_split(args + "--temperature 0");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_EQ(run_split(args + "--top-k 1 --seed 3").out, greedy.out);
  EXPECT_EQ(run_split(args + "--top-k 1 --seed 4 --temperature 2").out, greedy.out);
  EXPECT_NE(run_split(args + "--seed 3").out, greedy.out);  // not vacuous
}

// Tokens are written as they are drawn: the first bytes arrive while the process is still
// generating (a 4 KiB stdio buffer would hold back the first 4096 one-byte tokens).
TEST_F(SampleCommand, StreamsTokensAsTheyAreDrawn) {
  const std::string out = dir_->file("stream.txt");
  Background b("sample --ckpt " + ckpt() + " --tokens 1000000 --threads 1", out,
               dir_->file("stream.err"));
  ASSERT_TRUE(wait_for([&] { return read_file(out).size() >= 20 || !b.running(); }, 300));
  EXPECT_TRUE(b.running()) << "exit " << b.wait() << ": " << read_file(dir_->file("stream.err"));
  EXPECT_LT(read_file(out).size(), 4096u);
}

TEST_F(SampleCommand, BadFlags) {
  expect_user_error("sample --ckpt " + ckpt() + " --temperature -1", 2, "--temperature");
  expect_user_error("sample --ckpt " + ckpt() + " --top-k -2", 2, "--top-k");
  expect_user_error("sample --ckpt " + ckpt() + " --prompt ''", 2, "--prompt needs some text");
  expect_user_error("sample --ckpt " + ckpt() + " --seed -1", 2, "--seed -1 is not an integer");
  expect_user_error("sample", 2, "--ckpt is required");
  expect_user_error("sample --ckpt " + dir_->file("none"), 1, "does not exist");
}

// A model trained on llm.c token ids has no text tokenizer: ids out, and no --prompt.
TEST(SampleTokenModel, PrintsTokenIds) {
  TempDir dir;
  std::vector<uint16_t> tokens(4000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint16_t((i * 37) % 256);
  write_file(dir.file("t.bin"),
             llmc_header({20240520, 1, int32_t(tokens.size())}, uint16_le(tokens)));
  ASSERT_EQ(run_reftrain("train --preset tiny --steps 2 --data-tokens " + dir.file("t.bin") +
                         " --out " + dir.file("ckpt"))
                .exit_code,
            0);
  const SplitResult r = run_split("sample --ckpt " + dir.file("ckpt") + " --tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::vector<int> ids;
  for (int id; in >> id;) ids.push_back(id);
  ASSERT_EQ(ids.size(), 6u) << r.out;
  EXPECT_EQ(ids[0], 255);  // the prompt: the last id of the vocabulary
  for (int id : ids) EXPECT_TRUE(id >= 0 && id < 256) << id;
  expect_user_error("sample --ckpt " + dir.file("ckpt") + " --prompt hi", 2,
                    "--prompt needs a text model");
}

// --- plots -------------------------------------------------------------------------------------

json svg_series(const std::string& svg) {
  const CommandResult r = run_command(std::string(REFTRAIN_TORCH_PYTHON) +
                                      " " REFTRAIN_SOURCE_DIR "/tests/tools/svg_series.py " + svg);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json();
}

const json* find_series(const json& plot, const std::string& run, const std::string& kind) {
  for (const json& s : plot["series"]) {
    if (s["run"] == run && s["kind"] == kind) return &s;
  }
  return nullptr;
}

bool has_text(const json& plot, const std::string& text) {
  for (const json& t : plot["texts"]) {
    if (t == text) return true;
  }
  return false;
}

// rsvg-convert (Debian librsvg2-bin, scripts/install-deps.sh) renders the SVG to a PNG.
void expect_renders(const std::string& svg, const std::string& png) {
  if (run_command("command -v rsvg-convert").exit_code != 0) {
    std::printf("rsvg-convert not installed: rendering not checked\n");
    return;
  }
  const CommandResult r = run_command("rsvg-convert " + svg + " -o " + png);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(png).substr(0, 4), "\x89PNG");
}

class PlotTest : public LearnableTextTest {
 protected:
  std::string trace(const std::string& name, const std::string& args) {
    const std::string path = dir_.file(name + ".jsonl");
    const CommandResult r = run_reftrain("train --preset tiny --steps 12 --val-every 4 --data " +
                                         text_ + " --trace " + path + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return path;
  }
};

TEST_F(PlotTest, OverlaysRunsWithLegendAxesAndTitle) {
  const std::string a = trace("fp32", ""), b = trace("mixed", "--precision mixed");
  const std::string svg = dir_.file("loss.svg");
  const CommandResult r =
      run_reftrain("plot " + a + " " + b + " --out " + svg + " --title 'two runs'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json plot = svg_series(svg);
  for (const char* run : {"fp32", "mixed"}) {
    SCOPED_TRACE(run);
    const json* train = find_series(plot, run, "train");
    const json* val = find_series(plot, run, "val");
    ASSERT_TRUE(train && val) << plot.dump();
    EXPECT_EQ((*train)["points"], 12);  // steps 1..12, one line
    EXPECT_EQ((*train)["drawn"], 12);
    EXPECT_EQ((*train)["polylines"], 1);
    EXPECT_EQ((*val)["points"], 4);  // validation at steps 0, 4, 8, 12
    EXPECT_EQ((*val)["circles"], 4);
    EXPECT_TRUE(has_text(plot, std::string(run) + " train"));  // the legend
    EXPECT_TRUE(has_text(plot, std::string(run) + " val"));
  }
  for (const char* text : {"two runs", "step", "loss", "0", "12"}) {
    EXPECT_TRUE(has_text(plot, text)) << text << " missing from " << plot["texts"].dump();
  }
  expect_renders(svg, dir_.file("loss.png"));
}

// A loss that is null (NaN or Inf in the run) breaks the line; the points around it are drawn.
TEST_F(PlotTest, NullLossesBreakTheLine) {
  const std::string path = dir_.file("gaps.jsonl"), svg = dir_.file("gaps.svg");
  std::string lines = "{\"type\":\"run\"}\n{\"type\":\"val\",\"step\":0,\"val_loss\":5.5}\n";
  const char* losses[] = {"5.5", "5", "null", "4", "3.5", "null", "null", "3"};
  for (int k = 0; k < 8; ++k) {
    lines +=
        "{\"type\":\"step\",\"step\":" + std::to_string(k + 1) + ",\"loss\":" + losses[k] + "}\n";
  }
  write_file(path, lines);
  ASSERT_EQ(run_reftrain("plot " + path + " --out " + svg).exit_code, 0);
  const json plot = svg_series(svg);
  const json* train = find_series(plot, "gaps", "train");
  ASSERT_TRUE(train) << plot.dump();
  EXPECT_EQ((*train)["points"], 8);
  EXPECT_EQ((*train)["drawn"], 5);
  EXPECT_EQ((*train)["polylines"], 3);
  expect_renders(svg, dir_.file("gaps.png"));
}

// A trace without validation lines (a GPU replay's) gets no "val" legend entry; the other
// run's entries follow its "train" entry without a gap.
TEST_F(PlotTest, LegendListsOnlySeriesWithPoints) {
  const std::string replay = dir_.file("replay.jsonl"), svg = dir_.file("replay.svg");
  write_file(replay,
             "{\"type\":\"run\"}\n{\"type\":\"step\",\"step\":1,\"loss\":5.5}\n"
             "{\"type\":\"step\",\"step\":2,\"loss\":5.25}\n");
  const std::string ours = trace("ours", "");
  ASSERT_EQ(run_reftrain("plot " + replay + " " + ours + " --out " + svg).exit_code, 0);
  const json plot = svg_series(svg);
  EXPECT_TRUE(has_text(plot, "replay train"));
  EXPECT_FALSE(has_text(plot, "replay val")) << plot["texts"].dump();
  EXPECT_TRUE(has_text(plot, "ours train"));
  EXPECT_TRUE(has_text(plot, "ours val"));
  // Legend rows are 22 px apart, the first one's text at y 74: "ours train" is the second row.
  const std::string text = read_file(svg);
  const size_t at = text.find(">ours train<");
  ASSERT_NE(at, std::string::npos);
  const size_t begin = text.rfind("<text", at);
  EXPECT_NE(text.substr(begin, at - begin).find("y=\"96\""), std::string::npos)
      << text.substr(begin, 80);
  expect_renders(svg, dir_.file("replay.png"));
}

TEST_F(PlotTest, TrainWritesItsPlotAtTheEnd) {
  const std::string svg = dir_.file("run.svg");
  trace("run", "--plot " + svg);
  const json plot = svg_series(svg);
  const json* train = find_series(plot, "run", "train");
  ASSERT_TRUE(train) << plot.dump();
  EXPECT_EQ((*train)["points"], 12);
  EXPECT_TRUE(has_text(plot, "loss of tiny (fp32, adamw)"));
}

TEST_F(PlotTest, BadInput) {
  expect_user_error("plot " + dir_.file("none.jsonl") + " --out " + dir_.file("x.svg"), 1,
                    "trace " + dir_.file("none.jsonl") + " does not exist");
  const std::string a = trace("a", "");
  expect_user_error("plot " + a, 2, "--out is required");
  expect_user_error("plot --out " + dir_.file("x.svg"), 2, "traces is required");
  const std::string empty = dir_.file("empty.jsonl");
  write_file(empty, "{\"type\":\"run\"}\n{\"type\":\"step\",\"step\":1,\"loss\":null}\n");
  expect_user_error("plot " + empty + " --out " + dir_.file("x.svg"), 1, "nothing to plot");
  expect_user_error("plot " + a + " --out " + dir_.file("no-dir/x.svg"), 1, "no-dir");
}

}  // namespace
}  // namespace reftrain::testing
