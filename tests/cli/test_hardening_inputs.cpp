// Inputs a hostile user can give that used to read out of bounds, run out of memory silently,
// validate for days or be parsed differently by different options (docs/hardening.md, "What the
// review found"): prompt ids past the vocabulary, a run larger than the memory available, a
// crafted checkpoint's val_batches, a data file whose name is not UTF-8, an llm.c checkpoint
// under a llama preset, and numbers (octal, negative seeds, underflowing floats).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/memory.h"
#include "core/formats/safetensors.h"
#include "core/model/model.h"
#include "core/train/config.h"
#include "core/train/data.h"
#include "core/train/sample.h"
#include "core/train/trainer.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// --- 1: prompt ids against the vocabulary ------------------------------------------------------

// A model of V = 128 (an llm.c model can have V < 256) and a prompt byte ≥ 128: the embedding
// would read past its table (ASan: heap-use-after-free in embed_forward_fast); it is an input
// error naming the id and V, before any forward.
TEST(HardeningSample, PromptIdOutsideTheVocabularyIsAnInputError) {
  ModelConfig m = find_preset("tiny").model;
  m.vocab = 128, m.padded_vocab = 128;
  const std::unique_ptr<Model> model = make_model(m, ModelOptions{1, 32});
  model->init_weights(3);
  for (const int32_t id : {200, 128, -1}) {
    const std::string what = user_error_of([&] {
      sample_tokens(*model, 32, {'a', id}, {4, 1.0f, 0, 1});
    });
    EXPECT_NE(what.find("token id " + std::to_string(id)), std::string::npos) << what;
    EXPECT_NE(what.find("V = 128"), std::string::npos) << what;
  }
  // The control: the last id of the vocabulary samples.
  EXPECT_EQ(sample_tokens(*model, 32, {127}, {4, 1.0f, 0, 1}).size(), 4u);
}

// --- 2: memory -----------------------------------------------------------------------------------

TEST(HardeningMemory, EstimateOverTheLimitIsRefusedNamingBoth) {
  const Preset& tiny = find_preset("tiny");
  TrainConfig t = tiny.train;
  t.batch = 4000;
  const MemoryEstimate need = estimate_memory(tiny.model, t);
  const std::string what = user_error_of([&] {
    check_memory(need, {size_t(1) << 30, "the cgroup limit (memory.max)"});
  });
  EXPECT_NE(what.find(std::to_string((need.total() + (1 << 20) - 1) >> 20) + " MiB"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("1024 MiB is available (the cgroup limit (memory.max))"), std::string::npos)
      << what;
  // Within the limit, and an unknown limit (0), pass.
  EXPECT_EQ(user_error_of([&] { check_memory(need, {need.total(), "x"}); }), "");
  EXPECT_EQ(user_error_of([&] { check_memory(need, {0, ""}); }), "");
}

TEST(HardeningMemory, LimitComesFromTheEnvironmentOrTheMachine) {
  ::setenv("REFTRAIN_MEMORY_LIMIT", "123456789", 1);
  const MemoryLimit env = available_memory();
  ::unsetenv("REFTRAIN_MEMORY_LIMIT");
  EXPECT_EQ(env.bytes, 123456789u);
  EXPECT_EQ(env.source, "REFTRAIN_MEMORY_LIMIT");
  // Without the override: a cgroup limit or MemAvailable, never unknown on Linux.
  const MemoryLimit machine = available_memory();
  EXPECT_GT(machine.bytes, 0u);
  EXPECT_FALSE(machine.source.empty());
}

using HardeningCli = LearnableTextTest;

// `train --preset tiny --batch 4000` in a small cgroup was OOM-killed (exit 137) with no word.
TEST_F(HardeningCli, RunLargerThanTheMemoryIsRefusedBeforeAllocating) {
  ::setenv("REFTRAIN_MEMORY_LIMIT", "50000000", 1);
  const SplitResult r = run_split("train --preset tiny --steps 1 --batch 4000 --data " + text_);
  ::unsetenv("REFTRAIN_MEMORY_LIMIT");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::vector<std::string> lines = non_empty_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("48 MiB is available (REFTRAIN_MEMORY_LIMIT)"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("--batch"), std::string::npos) << lines[0];
}

// --- 4: values from a checkpoint bounded by the data -------------------------------------------

TEST(HardeningValBatches, BoundedByTheValSplit) {
  Dataset d;
  d.source = "d.txt";
  d.val.assign(1000, 'a');  // 8 batches of B·T = 128
  TrainConfig t = find_preset("tiny").train;
  t.val_batches = 8 * int(kValRereads);
  EXPECT_EQ(user_error_of([&] { check_val_batches(d, t); }), "");
  t.val_batches = 8 * int(kValRereads) + 1;
  const std::string what = user_error_of([&] { check_val_batches(d, t); });
  EXPECT_NE(what.find("val_batches " + std::to_string(t.val_batches)), std::string::npos) << what;
  EXPECT_NE(what.find("at most " + std::to_string(8 * kValRereads)), std::string::npos) << what;
  // A small split still allows the floor (the presets' 8 or 20).
  d.val.assign(40, 'a');
  t.val_batches = int(kMinValBatchesBound);
  EXPECT_EQ(user_error_of([&] { check_val_batches(d, t); }), "");
}

// A checkpoint whose config says val_batches 1048576 (inside the reader's type bound) made
// `--resume` validate for days; now it is refused at once, naming the value and the bound.
TEST_F(HardeningCli, CraftedValBatchesInACheckpointIsRefusedOnResume) {
  const std::string out = dir_.file("run");
  ASSERT_EQ(
      run_split("train --preset tiny --steps 4 --stop-after 2 --out " + out + " --data " + text_)
          .exit_code,
      0);
  const std::string ckpt = (fs::path(out) / "ckpt-00000002.safetensors").string();
  ASSERT_TRUE(fs::exists(ckpt));
  SafetensorsFile f = read_safetensors(ckpt);
  json config = json::parse(f.metadata.at("config"));
  config["train"]["val_batches"] = 1048576;
  f.metadata["config"] = config.dump();
  write_safetensors(ckpt, f);
  expect_user_error("train --resume " + out, 1, "val_batches 1048576");
}

// --- 11: a data file whose name is not UTF-8 ---------------------------------------------------

// The checkpoint stored the path with U+FFFD for the Latin-1 byte, so the resume looked for a
// file that does not exist.
TEST_F(HardeningCli, NonUtf8DataFileNameResumes) {
  const std::string data = dir_.file(
      "donn\xe9"
      "es.txt");
  write_file(data, learnable_text());
  const std::string out = dir_.file("run");
  ASSERT_EQ(run_split("train --preset tiny --steps 4 --stop-after 2 --out " + out + " --data '" +
                      data + "'")
                .exit_code,
            0);
  const SafetensorsFile f =
      read_safetensors((fs::path(out) / "ckpt-00000002.safetensors").string());
  EXPECT_TRUE(json::parse(f.metadata.at("data")).contains("path_hex"));
  const SplitResult r = run_split("train --resume " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// --- 13: an llm.c (GPT-2) checkpoint under a llama preset --------------------------------------

TEST_F(HardeningCli, InitFromGpt2UnderALlamaPresetIsAUsageError) {
  const std::string path = dir_.file("gpt2.bin");
  const size_t C = 32, L = 2;
  const size_t floats = 256 * C + 32 * C + L * (12 * C * C + 13 * C) + 2 * C;
  write_file(path, llmc_header({20240326, 3, 32, 256, 2, 2, 32, 256}, std::string(floats * 4, 0)));
  expect_user_error("train --preset llama-tiny --steps 1 --data " + text_ + " --init-from " + path,
                    2, "holds a gpt2 model but --preset llama-tiny is llama");
}

// --- 15: one number parser ---------------------------------------------------------------------

// `--steps 010` was octal 8 (CLI11 reads a leading 0 as octal) while `--seed 010` was 10.
TEST_F(HardeningCli, LeadingZerosAreDecimal) {
  const std::string trace = dir_.file("t.jsonl");
  ASSERT_EQ(run_split("train --preset tiny --steps 010 --val-every 0 --data " + text_ +
                      " --trace " + trace)
                .exit_code,
            0);
  int steps = 0;
  for (const json& j : read_trace(trace)) steps += j["type"] == "step";
  EXPECT_EQ(steps, 10);
  EXPECT_EQ(read_trace(trace)[0]["train"]["steps"], 10);
}

TEST_F(HardeningCli, NonDecimalIntegersAreUsageErrors) {
  for (const char* flag : {"--steps 0x10", "--batch 1e2", "--warmup +5", "--save-every 08x",
                           "--threads 0b11", "--steps 99999999999999999999"}) {
    expect_user_error(
        "train --preset tiny --data " + text_ + " --out " + dir_.file("o") + " " + flag, 2,
        "not a decimal integer");
  }
  expect_user_error("sample --ckpt x --tokens 0x10", 2, "not a decimal integer");
  expect_user_error("golden run --preset tiny --out x --steps 010x", 2, "not a decimal integer");
}

// `explain`/`golden kernels --seed -1` became 2^64-1 while `train` refused it.
TEST(HardeningNumbers, NegativeSeedIsRefusedEverywhere) {
  for (const std::string cmd :
       {"train --preset tiny", "explain embed", "golden kernels --out /nonexistent/x",
        "golden run --preset tiny --out /nonexistent/x", "sample --ckpt x"}) {
    expect_user_error(cmd + " --seed -1", 2,
                      "--seed '-1' is not an integer in [0, 18446744073709551615]");
  }
}

// `--clip 1e-50` underflowed to 0, which turns clipping off; a text that means a nonzero value
// must not become 0, and nan/inf/hex are not decimal numbers.
TEST_F(HardeningCli, FloatsThatRoundToZeroOrAreNotFiniteAreRefused) {
  for (const char* flag :
       {"--clip 1e-50", "--lr 1e-46", "--wd 0.00000000000000000000000000000000000000000000001"}) {
    expect_user_error("train --preset tiny --data " + text_ + " " + flag, 2, "rounds to 0");
  }
  for (const char* flag : {"--lr nan", "--lr inf", "--lr 1e39", "--clip 0x1p3", "--eps 1e-8x"}) {
    expect_user_error("train --preset tiny --data " + text_ + " " + flag, 2, "is not a");
  }
  expect_user_error("sample --ckpt x --temperature nan", 2, "is not a decimal number");
  // The control: 0 is still 0 (clipping off), and a small normal float passes.
  EXPECT_EQ(
      run_split("train --preset tiny --steps 1 --clip 0 --eps 1e-30 --data " + text_).exit_code, 0);
}

}  // namespace
}  // namespace reftrain::testing
