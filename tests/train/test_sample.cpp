// Text generation (core/train/sample.h, `reftrain sample`). Sampling is checked token by token
// against the model's own logits over the documented context (top-k membership, greedy argmax,
// the documented inverse-CDF draw), for both paths (KV cache with its sliding window, and
// recompute), and end to end (same seed, same text; the sample that ends `train` is the one
// `sample` draws from its checkpoint). The KV cache: its logits are the bits of the full
// forward's last row, and its text the recompute path's, for both families, fp32 and mixed,
// fast and reference kernels, 1-3 threads. The loss plots are tests/cli/test_plot.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/base/rng.h"
#include "core/model/model.h"
#include "core/train/config.h"
#include "core/train/sample.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// --- sample_tokens against the model's logits --------------------------------------------------

// The start of the context whose last logits give the token at index n of `tokens` (the prompt
// has p tokens), as sample.h documents: recompute, the last `window` tokens; kv cache, the
// prompt's last `window`, then a context that grows until it would pass `window` tokens and
// then restarts from the last ⌈window/2⌉.
size_t context_start(size_t p, size_t n, int window, bool kv_cache) {
  const size_t W = size_t(window);
  if (!kv_cache) return n > W ? n - W : 0;
  size_t s = p > W ? p - W : 0;
  for (size_t m = p + 1; m <= n; ++m) {
    if (m - s > W) s = m - (W - W / 2);
  }
  return s;
}

class SampleTokens : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    model_ = make_model(find_preset("tiny").model, ModelOptions{1, kWindow});
    model_->init_weights(11);
  }
  SampleOptions options(int tokens, float temperature, int top_k, uint64_t seed) const {
    SampleOptions o{tokens, temperature, top_k, seed};
    o.kv_cache = GetParam();
    return o;
  }
  // The logits over V for the token after `tokens` (whose first prompt_.size() are the prompt),
  // from a forward over its documented context.
  std::vector<float> next_logits(const std::vector<int32_t>& tokens) {
    const size_t s = context_start(prompt_.size(), tokens.size(), kWindow, GetParam());
    const int T = int(tokens.size() - s);
    model_->forward(tokens.data() + s, nullptr, 1, T);
    const int V = model_->config().vocab, Vp = model_->config().padded_vocab;
    const float* z = model_->logits() + size_t(T - 1) * Vp;
    return std::vector<float>(z, z + V);
  }
  static constexpr int kWindow = 32;
  std::unique_ptr<Model> model_;
  const std::vector<int32_t> prompt_ = {'T', 'h', 'e', ' '};
};

INSTANTIATE_TEST_SUITE_P(Paths, SampleTokens, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "KvCache" : "Recompute");
                         });

// Each of 70 tokens (past the window, so the context slides, twice for the KV cache) is among
// the 3 largest logits of its context: fewer than 3 logits beat it (ties go to the lower id).
TEST_P(SampleTokens, TopKDrawsOnlyAmongTheKLargest) {
  const std::vector<int32_t> out =
      sample_tokens(*model_, kWindow, prompt_, options(70, 1.0f, 3, 5));
  ASSERT_EQ(out.size(), 70u);
  std::vector<int32_t> tokens = prompt_;
  for (int32_t t : out) {
    const std::vector<float> z = next_logits(tokens);
    int above = 0;
    for (int j = 0; j < int(z.size()); ++j) above += z[j] > z[t] || (z[j] == z[t] && j < t);
    EXPECT_LT(above, 3) << "token " << t;
    tokens.push_back(t);
  }
}

// Temperature 0 is greedy: every token is its context's argmax, whatever the seed.
TEST_P(SampleTokens, TemperatureZeroIsArgmax) {
  const std::vector<int32_t> out =
      sample_tokens(*model_, kWindow, prompt_, options(70, 0.0f, 0, 1));
  EXPECT_EQ(out, sample_tokens(*model_, kWindow, prompt_, options(70, 0.0f, 0, 99)));
  std::vector<int32_t> tokens = prompt_;
  for (int32_t t : out) {
    const std::vector<float> z = next_logits(tokens);
    EXPECT_EQ(t, int32_t(std::max_element(z.begin(), z.end()) - z.begin()));
    tokens.push_back(t);
  }
}

// A prompt longer than the window: the context starts from its last `window` tokens.
TEST_P(SampleTokens, LongPromptKeepsItsLastWindow) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back(int32_t('a' + i % 26));
  const std::vector<int32_t> out = sample_tokens(*model_, kWindow, prompt, options(20, 0.0f, 0, 1));
  std::vector<int32_t> tokens = prompt;
  for (int32_t t : out) {
    const size_t s = context_start(prompt.size(), tokens.size(), kWindow, GetParam());
    const int T = int(tokens.size() - s);
    model_->forward(tokens.data() + s, nullptr, 1, T);
    const float* z = model_->logits() + size_t(T - 1) * model_->config().padded_vocab;
    EXPECT_EQ(t, int32_t(std::max_element(z, z + model_->config().vocab) - z));
    tokens.push_back(t);
  }
}

// The first token for 64 seed values, against the rule docs/rng.md states: u = CounterRng(seed,
// kSample).uniform(0), the first token whose cumulative softmax (double) passes u·Σ.
TEST_P(SampleTokens, DrawFollowsTheDocumentedInverseCdf) {
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
    const std::vector<int32_t> got =
        sample_tokens(*model_, kWindow, prompt_, options(1, 1.0f, 0, seed));
    EXPECT_EQ(got[0], want) << "seed " << seed;
    seen[size_t(want)] = 1;
  }
  EXPECT_GT(std::count(seen.begin(), seen.end(), 1), 20);  // many different tokens: a real draw
}

// --- the KV cache against the full forward --------------------------------------------------

// A small model of each family whose shapes reach every edge of the kernels: hs = 12 (padded
// to 16 lanes), K = 36 and N = 108, 144, 100 (tails of the one-row product's 8×8 tiles and
// 32-output blocks), V = 97 of Vp = 128, and a window of 70 (three key tiles of 32).
ModelConfig kv_config(Arch arch) {
  ModelConfig m;
  m.arch = arch, m.layers = 2, m.heads = 3, m.channels = 36, m.max_seq = 80;
  m.vocab = 97, m.padded_vocab = 128, m.ffn = 100;
  return m;
}
constexpr int kKvWindow = 70;

struct KvCase {
  Arch arch;
  Precision precision;
  Kernels kernels;
  int threads;
};

std::string kv_case_name(const KvCase& c) {
  return std::string(c.arch == Arch::kLlama ? "llama" : "gpt2") + "_" + enum_name(c.precision) +
         (c.kernels == Kernels::kFast ? "_fast" : "_reference") + "_threads" +
         std::to_string(c.threads);
}

// A model of the case's family, precision and kernels, weights from seed 7 (the same for every
// instance).
std::unique_ptr<Model> kv_model(const KvCase& c) {
  ModelOptions o{1, kKvWindow, c.precision};
  if (c.kernels == Kernels::kReference) {
    o.kernels = Kernels::kReference, o.matmul = MatmulKind::kNaive;
  }
  if (c.kernels == Kernels::kReference || c.precision == Precision::kBf16) {
    o.attention = AttentionKind::kMaterialised;  // the only one of the reference and of bf16
  }
  std::unique_ptr<Model> m = make_model(kv_config(c.arch), o);
  m->init_weights(7);
  return m;
}

// Sets the case's thread count for its lifetime (before the models: their matmul reads it).
class KvCacheTest : public ::testing::TestWithParam<KvCase> {
 protected:
  void SetUp() override {
    threads_before_ = omp_get_max_threads();
    omp_set_num_threads(GetParam().threads);
  }
  void TearDown() override { omp_set_num_threads(threads_before_); }
  int threads_before_ = 1;
};
class KvCacheLogits : public KvCacheTest {};
class KvCacheText : public KvCacheTest {};

// Prefill 3 tokens, then decode up to the full window: after every token the decode's logits
// (all Vp of them) are the bits of the last row of a forward over all the tokens so far.
TEST_P(KvCacheLogits, AreTheBitsOfTheFullForwardsLastRow) {
  std::unique_ptr<Model> cached = kv_model(GetParam()), full = kv_model(GetParam());
  const int Vp = cached->config().padded_vocab;
  std::vector<int32_t> tokens = {5, 60, 12};
  const float* z = cached->prefill(tokens.data(), int(tokens.size()));
  while (true) {
    const int n = int(tokens.size());
    full->forward(tokens.data(), nullptr, 1, n);
    ASSERT_EQ(0, std::memcmp(z, full->logits() + size_t(n - 1) * Vp, sizeof(float) * Vp))
        << "position " << n - 1;
    if (n == kKvWindow) break;
    tokens.push_back(int32_t((n * 37 + 11) % 97));
    z = cached->decode(tokens.back());
    ASSERT_EQ(cached->cached(), n + 1);
  }
  EXPECT_THROW(cached->decode(1), std::logic_error);  // the cache is full
  // what the memory estimate counts for decoding's kept weights is what it keeps
  const KvCase& c = GetParam();
  EXPECT_EQ(cached->decode_weight_bytes(),
            bf16_decode_weight_bytes(cached->config(), c.precision, c.kernels, kKvWindow));
}

// What the memory estimate counts for the bf16 engines' workspaces is what a training step over
// the whole window and decoding the whole window leave them holding. On more than one thread it
// is an upper bound: a thread that the attention's dynamic schedule hands no head leaves its
// single-thread engine empty.
class KvCacheBf16Memory : public KvCacheTest {};
TEST_P(KvCacheBf16Memory, EngineWorkspacesAreTheEstimate) {
  const KvCase& c = GetParam();
  std::unique_ptr<Model> m = kv_model(c);
  std::vector<int32_t> tokens(kKvWindow), targets(kKvWindow);
  for (int i = 0; i < kKvWindow; ++i) tokens[size_t(i)] = int32_t((i * 37 + 11) % 97);
  for (int i = 0; i < kKvWindow; ++i) targets[size_t(i)] = tokens[size_t((i + 1) % kKvWindow)];
  m->forward(tokens.data(), targets.data(), 1, kKvWindow);
  m->backward();
  m->prefill(tokens.data(), 3);
  for (int n = 3; n < kKvWindow; ++n) m->decode(tokens[size_t(n)]);
  const size_t estimate = bf16_workspace_bytes(m->config(), c.precision, c.kernels, 1, kKvWindow);
  if (c.threads == 1) {
    EXPECT_EQ(m->engine_workspace_bytes(), estimate);
  } else {
    EXPECT_LE(m->engine_workspace_bytes(), estimate);
    EXPECT_GT(m->engine_workspace_bytes(), 0u);
  }
}

// Generations that fit in the window (4 + 40 tokens, across the key tile boundary at 32): the
// same text with the cache as without, greedy and drawn (top-k 5 at temperature 0.8, and all
// tokens at temperature 1.3).
TEST_P(KvCacheText, IsTheRecomputedText) {
  std::unique_ptr<Model> model = kv_model(GetParam());
  const std::vector<int32_t> prompt = {40, 41, 42, 43};
  for (SampleOptions o : {SampleOptions{40, 0.0f, 0, 3}, SampleOptions{40, 0.8f, 5, 4},
                          SampleOptions{40, 1.3f, 0, 5}}) {
    o.kv_cache = false;
    const std::vector<int32_t> recompute = sample_tokens(*model, kKvWindow, prompt, o);
    o.kv_cache = true;
    EXPECT_EQ(sample_tokens(*model, kKvWindow, prompt, o), recompute)
        << "temperature " << o.temperature << " top-k " << o.top_k;
  }
}

// Both families, fp32, mixed and bf16: the fast kernels on 1 and 2 threads, the reference kernels
// (naive matmul, materialised attention) on 1. The logits also on 3 threads, more than the
// cores of a small machine (slow there, so not the text), in mixed and in bf16 (whose decode
// extends each layer's bf16 rounding of the cache by the new rows only).
std::vector<KvCase> kv_cases(bool three_threads) {
  std::vector<KvCase> v;
  for (Arch arch : {Arch::kGpt2, Arch::kLlama}) {
    for (Precision p : {Precision::kFp32, Precision::kMixed, Precision::kBf16}) {
      for (int threads : {1, 2}) v.push_back({arch, p, Kernels::kFast, threads});
      v.push_back({arch, p, Kernels::kReference, 1});
    }
    if (three_threads) {
      for (Precision p : {Precision::kMixed, Precision::kBf16}) {
        v.push_back({arch, p, Kernels::kFast, 3});
      }
    }
  }
  return v;
}

std::string kv_test_name(const ::testing::TestParamInfo<KvCase>& info) {
  return kv_case_name(info.param);
}
INSTANTIATE_TEST_SUITE_P(Models, KvCacheLogits, ::testing::ValuesIn(kv_cases(true)), kv_test_name);
INSTANTIATE_TEST_SUITE_P(Models, KvCacheText, ::testing::ValuesIn(kv_cases(false)), kv_test_name);
std::vector<KvCase> bf16_kv_cases() {
  std::vector<KvCase> v;
  for (const KvCase& c : kv_cases(true)) {
    if (c.precision == Precision::kBf16) v.push_back(c);
  }
  return v;
}
INSTANTIATE_TEST_SUITE_P(Models, KvCacheBf16Memory, ::testing::ValuesIn(bf16_kv_cases()),
                         kv_test_name);

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
  EXPECT_EQ(a.out.rfind("the cat", 0), 0u) << a.out;                // the prompt, then the text
  EXPECT_EQ(a.out.size(), std::string("the cat").size() + 81);      // 80 byte tokens and a newline
  EXPECT_EQ(a.err.rfind("sampled 80 tokens in ", 0), 0u) << a.err;  // one line on stderr
  EXPECT_NE(a.err.find(" tokens/s (kv cache)\n"), std::string::npos) << a.err;
  EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << a.err;
}

// `train` ends with 256 tokens after a newline from the final weights, drawn with the run's
// seed from the nucleus of 0.9; `sample` from the final checkpoint with --top-p 0.9 draws the
// same text.
TEST_F(SampleCommand, TrainEndsWithTheSampleOfItsCheckpoint) {
  const size_t at = train_.output.find("\nsample:\n");
  ASSERT_NE(at, std::string::npos) << train_.output;
  const std::string from_train = train_.output.substr(at + 9, 256);
  const SplitResult r = run_split("sample --ckpt " + ckpt() + " --top-p 0.9");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n" + from_train + "\n");
}

// The recompute path prints the same text while it fits in the window (tiny's is 32 tokens)
// and says which path ran.
TEST_F(SampleCommand, NoKvCacheGivesTheSameTextInTheWindow) {
  const std::string args = "sample --ckpt " + ckpt() + " --prompt 'the' --tokens 29 --seed 2";
  const SplitResult cached = run_split(args), recompute = run_split(args + " --no-kv-cache");
  ASSERT_EQ(recompute.exit_code, 0) << recompute.err;
  EXPECT_EQ(recompute.out, cached.out);
  EXPECT_NE(recompute.err.find(" tokens/s (recompute)\n"), std::string::npos) << recompute.err;
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
  expect_user_error("sample --ckpt " + ckpt() + " --seed -1", 2, "--seed '-1' is not an integer");
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
                    "--prompt needs a tokenizer");
}

}  // namespace
}  // namespace reftrain::testing
