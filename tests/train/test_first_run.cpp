// Issue 31's first run: `--tokenizer auto` (the rule, the training split, the cache), bits per
// byte in the progress line and the trace, the best checkpoint, `reftrain eval` and
// `train --eval-data`, the model's shape flags, and `plot --y bpb`.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/model/model.h"
#include "core/tokenizer/bpe_train.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "core/train/eval.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

TEST(AutoTokenizer, VocabularyGrowsWithTheTextUpTo4096) {
  EXPECT_EQ(auto_vocab_size(0), 256);
  EXPECT_EQ(auto_vocab_size((256 << 10) - 1), 256);  // too little text: bytes
  EXPECT_EQ(auto_vocab_size(256 << 10), 2048);       // 262144 / 128
  EXPECT_EQ(auto_vocab_size(512 * 1024 - 1), 2048);
  EXPECT_EQ(auto_vocab_size(512 * 1024), 4096);
  EXPECT_EQ(auto_vocab_size(size_t(1) << 34), 4096);  // capped
}

// ~300 KB of learnable text: auto trains a 2048-token BPE on its 270 KB training split.
std::string big_text() {
  std::string text;
  for (int i = 0; i < 6; ++i) text += learnable_text();
  return text;
}

TEST(AutoTokenizer, TrainsOnTheTrainingSplitAndCachesBesideTheData) {
  TempDir dir;
  const std::string data = dir.file("book.txt"), text = big_text();
  write_file(data, text);
  const std::shared_ptr<const Tokenizer> t = auto_tokenizer(text, data);
  EXPECT_EQ(t->kind(), "bpe");
  // Learnable text has few distinct words: its merges run out before 2048 ids.
  EXPECT_GT(t->vocab_size(), 256);
  EXPECT_LE(t->vocab_size(), 2048);
  // The first 90 % of the text only: validation text stays unseen.
  const Tokenizer expected =
      train_bpe(std::string_view(text).substr(0, text.size() * 9 / 10), 2048, "expected");
  EXPECT_EQ(t->hash(), expected.hash());
  EXPECT_EQ(t->source().rfind(dir.file("book.txt.auto2048."), 0), 0u) << t->source();
  // A second call reads the file back: the same tokenizer, the file untouched.
  const auto written = fs::last_write_time(t->source());
  EXPECT_EQ(auto_tokenizer(text, data)->hash(), t->hash());
  EXPECT_EQ(fs::last_write_time(t->source()), written);
  // A small text is read as bytes, with nothing written.
  EXPECT_EQ(auto_tokenizer("short text", dir.file("small.txt"))->kind(), "bytes");
  EXPECT_FALSE(fs::exists(dir.file("small.txt.auto2048")));
}

// The name is predictable: a link planted there is neither read nor written through.
TEST(AutoTokenizer, RefusesALinkAtItsName) {
  TempDir dir;
  const std::string data = dir.file("book.txt"), text = big_text();
  const std::string name =
      data + ".auto2048." + data_hash_text(fnv1a64_bytes(text)).substr(8) + ".tokenizer.json";
  fs::create_symlink(dir.file("elsewhere.json"), name);
  try {
    auto_tokenizer(text, data);
    ADD_FAILURE() << "a link was followed";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("elsewhere.json")));
}

class FirstRun : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(data_, big_text());
    write_file(held_, learnable_text().substr(0, 3000));
  }
  // `train --preset tiny` on the 300 KB text with ARGS; must succeed.
  CommandResult train(const std::string& args) {
    const CommandResult r =
        run_reftrain("train --preset tiny --threads 1 --data " + data_ + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    return r;
  }
  TempDir dir_;
  std::string data_ = dir_.file("book.txt"), held_ = dir_.file("held.txt");
  std::string out_ = dir_.file("run"), trace_ = dir_.file("run.jsonl");
};

TEST_F(FirstRun, AutoIsTheDefaultAndBytesStaysAvailable) {
  const CommandResult r = train("--steps 2 --trace " + trace_);
  EXPECT_NE(r.output.find("tokenizer: bpe, "), std::string::npos) << r.output;
  const json run = read_trace(trace_)[0];
  EXPECT_GT(run["model"]["vocab"], 256);
  EXPECT_EQ(run["model"]["vocab"], run["data"]["tokenizer"]["vocab"]);
  EXPECT_EQ(run["data"]["tokenizer"]["kind"], "bpe");
  EXPECT_NE(run["data"]["tokenizer"]["source"].get<std::string>().find(".auto2048."),
            std::string::npos);
  const std::string bytes_trace = dir_.file("bytes.jsonl");
  train("--steps 2 --tokenizer bytes --trace " + bytes_trace);
  EXPECT_EQ(read_trace(bytes_trace)[0]["model"]["vocab"], 256);
  expect_user_error("train --tokenizer auto --data-tokens " + data_, 2,
                    "--tokenizer auto trains a tokenizer on text");
}

TEST_F(FirstRun, ValidationShowsBitsPerByte) {
  const CommandResult r = train("--steps 4 --val-every 2 --trace " + trace_);
  EXPECT_NE(r.output.find("bits/byte"), std::string::npos) << r.output;
  const std::vector<json> lines = read_trace(trace_);
  const json& data = lines[0]["data"];
  int vals = 0;
  for (const json& j : lines) {
    if (j["type"] != "val") continue;
    ++vals;
    const double expected = j["val_loss"].get<double>() / std::log(2.0) *
                            data["val_tokens"].get<double>() / data["val_bytes"].get<double>();
    EXPECT_NEAR(j["val_bpb"].get<double>(), expected, 1e-5 * expected) << j.dump();
  }
  EXPECT_EQ(vals, 3);  // steps 0, 2 and 4
  // Bits per byte, not nats per token: a 2048-token BPE holds ~2-4 bytes per token.
  EXPECT_GT(data["val_bytes"].get<double>(), 1.5 * data["val_tokens"].get<double>());
}

TEST_F(FirstRun, KeepsTheBestCheckpointAndTheCommandsReadIt) {
  train("--steps 6 --val-every 2 --out " + out_ + " --trace " + trace_);
  const std::string best = out_ + "/best";
  ASSERT_EQ(files_in(best).size(), 1u);
  const Checkpoint c = read_checkpoint(best);
  float lowest = INFINITY;
  int at = 0;
  for (const json& j : read_trace(trace_)) {
    if (j["type"] == "val" && j["step"] > 0 && j["val_loss"].get<float>() < lowest) {
      lowest = j["val_loss"].get<float>(), at = j["step"].get<int>();
    }
  }
  EXPECT_EQ(c.meta.step, at);
  EXPECT_EQ(c.meta.val_loss, lowest);
  EXPECT_EQ(run_reftrain("sample --ckpt " + best + " --tokens 5").exit_code, 0);
  const CommandResult e = run_reftrain("eval --ckpt " + best + " --data " + held_);
  EXPECT_EQ(e.exit_code, 0) << e.output;
  const CommandResult x =
      run_reftrain("export --ckpt " + best + " --format hf --out " + dir_.file("hf"));
  EXPECT_EQ(x.exit_code, 0) << x.output;
  // A resumed run keeps the best so far and replaces it only with a lower loss.
  train("--steps 6 --val-every 2 --out " + dir_.file("split") + " --stop-after 4");
  EXPECT_EQ(run_reftrain("train --resume " + dir_.file("split")).exit_code, 0);
  EXPECT_EQ(read_checkpoint(dir_.file("split/best")).meta.val_loss, lowest);
}

TEST_F(FirstRun, EvalIsDeterministicAndTheSameForAnyBatch) {
  train("--steps 3 --out " + out_);
  const std::string args = "eval --ckpt " + out_ + " --data " + held_;
  const SplitResult a = run_split(args + " --threads 1"), b = run_split(args + " --batch 1");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::vector<std::string> la = non_empty_lines(a.out), lb = non_empty_lines(b.out);
  EXPECT_EQ(la.back(), lb.back());
  EXPECT_NE(la.back().find("bits/byte"), std::string::npos) << a.out;
  EXPECT_NE(la.back().find("perplexity"), std::string::npos) << a.out;
  EXPECT_NE(a.err.find("eval: window"), std::string::npos) << a.err;  // the progress line
  write_file(dir_.file("empty.txt"), "");
  expect_user_error("eval --ckpt " + out_ + " --data " + dir_.file("empty.txt"), 1, "is empty");
  expect_user_error("eval --ckpt " + out_ + " --data " + dir_.file("none.txt"), 1, "none.txt");
  write_file(dir_.file("one.txt"), "a");
  expect_user_error("eval --ckpt " + out_ + " --data " + dir_.file("one.txt"), 1,
                    "needs at least 2");
}

TEST_F(FirstRun, TrainEvaluatesAHeldOutFile) {
  const CommandResult r = train("--steps 3 --trace " + trace_ + " --eval-data " + held_);
  EXPECT_NE(r.output.find("eval " + held_ + ": loss"), std::string::npos) << r.output;
  bool found = false;
  for (const json& j : read_trace(trace_)) {
    if (j["type"] != "eval") continue;
    found = true;
    EXPECT_EQ(j["step"], 3);
    EXPECT_NEAR(j["bpb"].get<double>(),
                j["loss"].get<double>() / std::log(2.0) * j["tokens"].get<double>() /
                    j["bytes"].get<double>(),
                1e-9);
  }
  EXPECT_TRUE(found);
  // Checked before step 1.
  expect_user_error("train --preset tiny --data " + data_ + " --eval-data " + dir_.file("no.txt"),
                    1, "no.txt");
}

TEST_F(FirstRun, ShapeFlagsSetAModelFromScratchOnly) {
  const CommandResult r =
      train("--steps 1 --tokenizer bytes --layers 1 --heads 2 --channels 16 --max-seq 48 --seq 48");
  EXPECT_NE(r.output.find("L1 NH2 C16"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("T48"), std::string::npos) << r.output;
  train("--steps 2 --tokenizer bytes --out " + out_ + " --stop-after 1");
  expect_user_error("train --resume " + out_ + " --layers 3", 2,
                    "--layers conflicts with --resume");
  expect_user_error("train --preset tiny --data " + data_ + " --heads 3", 2, "not divisible");
}

TEST_F(FirstRun, PlotsBitsPerByte) {
  train("--steps 4 --val-every 2 --trace " + trace_);
  const std::string svg = dir_.file("bpb.svg");
  const CommandResult r = run_reftrain("plot " + trace_ + " --out " + svg + " --y bpb");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = read_file(svg);
  EXPECT_NE(text.find(">bits per byte</text>"), std::string::npos);
  EXPECT_NE(text.find("data-kind=\"val\" data-points=\"3\""), std::string::npos);
  EXPECT_NE(text.find("data-kind=\"train\" data-points=\"4\""), std::string::npos);
  expect_user_error("plot " + trace_ + " --out " + svg + " --y nats", 2, "nats");
}

// The eval's cross-entropy is the model's own loss on one full window (gpt2: no z-loss).
TEST(Evaluate, MatchesTheModelsLossOnOneWindow) {
  const ModelConfig m = find_preset("tiny").model;
  std::unique_ptr<Model> model = make_model(m, ModelOptions{2, 16});
  model->init_weights(3);
  std::vector<int32_t> ids;
  for (int i = 0; i < 17; ++i) ids.push_back((i * 37 + 5) % 256);
  const Tokenizer bytes;
  const EvalResult e = evaluate(*model, 2, 16, ids, bytes);
  EXPECT_EQ(e.tokens, 16u);
  EXPECT_EQ(e.bytes, 16u);
  const float loss = model->forward(ids.data(), ids.data() + 1, 1, 16);
  EXPECT_NEAR(e.loss(), loss, 1e-5);
  EXPECT_NEAR(e.bits_per_byte(), loss / std::log(2.0), 1e-5);
  // Windows overlap by one id, and the short last one counts too: 40 ids, 39 predicted.
  ids.resize(40, 7);
  EXPECT_EQ(evaluate(*model, 2, 16, ids, bytes).tokens, 39u);
}

}  // namespace
}  // namespace reftrain::testing
