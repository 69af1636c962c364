// Training and sampling through a BPE tokenizer, as a user runs them: `tokenizer train`, then
// `train --tokenizer tok.json` (the model's vocab from the tokenizer, the ids cached beside the
// data, the tokenizer recorded in trace and checkpoint), `sample --prompt` decoding with the
// checkpoint's tokenizer, an exact resume, and the one-line errors for a tokenizer that does
// not fit or is not the checkpoint's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/checkpoint.h"
#include "core/train/data.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

class TokenizedTraining : public TokenizedTextTest {
 protected:
  // `train --preset tiny --steps STEPS` on the text with the tokenizer; ARGS appended.
  CommandResult train(const std::string& args, int steps = 4) {
    return run_reftrain("train --preset tiny --steps " + std::to_string(steps) + " --data " +
                        text_ + " --tokenizer " + tok_ + " " + args);
  }
};

TEST_F(TokenizedTraining, TrainsSamplesAndResumesWithItsTokenizer) {
  const std::string out = dir_.file("run"), trace = dir_.file("t.jsonl");
  const CommandResult r = train("--out " + out + " --trace " + trace + " --stop-after 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Tokenizer tok = load_tokenizer(tok_);

  // The run line names the tokenizer; the model's vocab is the tokenizer's, padded to 64.
  const json run = read_trace(trace).at(0);
  EXPECT_EQ(run["model"]["vocab"], tok.vocab_size());
  EXPECT_EQ(run["model"]["padded_vocab"], (tok.vocab_size() + 63) / 64 * 64);
  EXPECT_EQ(run["data"]["tokenizer"]["kind"], "bpe");
  EXPECT_EQ(run["data"]["tokenizer"]["hash"], tok.hash_text());
  const std::vector<int32_t> ids = tok.encode(read_file(text_));
  EXPECT_EQ(run["data"]["train_tokens"].get<size_t>() + run["data"]["val_tokens"].get<size_t>(),
            ids.size());

  // The ids were cached beside the data, in llm.c's token format, and equal encode().
  const std::string cache = token_cache_path(text_, tok, fnv1a64_bytes(read_file(text_)));
  ASSERT_EQ(fs::path(cache).parent_path(), fs::path(text_).parent_path());
  const std::vector<uint16_t> cached = read_llmc_token_file(cache);
  EXPECT_EQ(std::vector<int32_t>(cached.begin(), cached.end()), ids);

  // The checkpoint records it; the resumed run finds it there and continues bit-exactly.
  const Checkpoint c = read_checkpoint(out);
  EXPECT_EQ(c.meta.data.tokenizer.kind, "bpe");
  EXPECT_EQ(c.meta.data.tokenizer.hash, tok.hash());
  const CommandResult resumed = run_reftrain("train --resume " + out + " --trace " + trace);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string straight = dir_.file("s.jsonl");
  ASSERT_EQ(train("--trace " + straight).exit_code, 0);
  expect_same_trace(straight, trace);

  // sample encodes the prompt and decodes with the checkpoint's tokenizer.
  const SplitResult s = run_split("sample --ckpt " + out + " --prompt 'the cat' --tokens 20");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("the cat", 0), 0u) << s.out;
  EXPECT_GT(s.out.size(), std::string("the cat\n").size()) << s.out;
}

// `export --format hf` writes the checkpoint's tokenizer beside the weights, as tokenizer.json
// and as vocab.json + merges.txt; both read back as the same tokenizer (the same hash), and a
// run started from the export with it keeps the vocabulary.
TEST_F(TokenizedTraining, ExportWritesTheTokenizerBesideTheModel) {
  const std::string out = dir_.file("run"), hf = dir_.file("hf");
  ASSERT_EQ(train("--out " + out, 1).exit_code, 0);
  const CommandResult e = run_reftrain("export --ckpt " + out + " --format hf --out " + hf);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const Tokenizer tok = load_tokenizer(tok_);
  EXPECT_EQ(load_tokenizer(hf).hash(), tok.hash());  // vocab.json + merges.txt
  EXPECT_EQ(load_tokenizer(hf + "/tokenizer.json").hash(), tok.hash());
  const json config = json::parse(read_file(hf + "/config.json"));
  EXPECT_EQ(config["eos_token_id"], tok.eot_id());
  const std::string trace = dir_.file("t.jsonl");
  const CommandResult r =
      run_reftrain("train --preset tiny --steps 1 --data " + text_ + " --init-from " + hf +
                   " --tokenizer " + hf + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_trace(trace).at(0)["data"]["tokenizer"]["hash"], tok.hash_text());
}

TEST_F(TokenizedTraining, ADamagedCacheIsEncodedAgain) {
  const std::string t1 = dir_.file("1.jsonl"), t2 = dir_.file("2.jsonl");
  ASSERT_EQ(train("--trace " + t1, 1).exit_code, 0);
  const Tokenizer tok = load_tokenizer(tok_);
  const std::string cache = token_cache_path(text_, tok, fnv1a64_bytes(read_file(text_)));
  write_file(cache, "not a token file");
  ASSERT_EQ(train("--trace " + t2, 1).exit_code, 0);
  EXPECT_EQ(read_trace(t1).at(0)["data"]["hash"], read_trace(t2).at(0)["data"]["hash"]);
  EXPECT_EQ(read_llmc_token_file(cache).size(), tok.encode(read_file(text_)).size());
}

TEST_F(TokenizedTraining, ATokenizerThatIsNotTheCheckpointsIsRefused) {
  const std::string out = dir_.file("run");
  ASSERT_EQ(train("--out " + out, 1).exit_code, 0);
  const std::string other = dir_.file("other.json");
  write_file(dir_.file("other.txt"), "completely different text, with other merges 12345\n");
  ASSERT_EQ(run_reftrain("tokenizer train --data " + dir_.file("other.txt") +
                         " --vocab-size 280 --out " + other)
                .exit_code,
            0);
  expect_user_error("sample --ckpt " + out + " --tokenizer " + other, 1,
                    "is not the one this model was trained with");
  expect_user_error("train --resume " + out + " --steps 2 --tokenizer " + other, 1,
                    "is not the one this model was trained with");
  fs::rename(tok_, dir_.file("moved.json"));
  expect_user_error("sample --ckpt " + out, 1, "pass it with --tokenizer");
  const CommandResult moved =
      run_reftrain("sample --ckpt " + out + " --tokens 5 --tokenizer " + dir_.file("moved.json"));
  EXPECT_EQ(moved.exit_code, 0) << moved.output;
}

TEST_F(TokenizedTraining, ATokenizerLargerThanTheModelsVocabIsRefused) {
  // llm.c ids for the tiny model (V = 256), with a 300-token tokenizer said to give them meaning.
  const std::string tokens = dir_.file("ids.bin");
  write_llmc_token_file(tokens, std::vector<uint16_t>(4000, 7));
  expect_user_error(
      "train --preset tiny --steps 1 --data-tokens " + tokens + " --tokenizer " + tok_, 2,
      "more than the model's vocab 256");
}

}  // namespace
}  // namespace reftrain::testing
