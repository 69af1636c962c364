// Issue 33's review of the surfaces added since the last one (docs/hardening.md): the token
// cache, tokenizer directories, export, readers' size limits, sampling to a closed pipe, BPE
// training on text without whitespace and the messages. The data-parallel items are with the
// other mpirun tests (tests/train/test_data_parallel.cpp), compare's with compare's.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/formats/atomic_file.h"
#include "core/formats/safetensors.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/tokenizer.h"
#include "core/train/data.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// A text, a small BPE tokenizer trained on it (tok_), and runs of the tiny preset on them.
class HardeningSurfaces : public TokenizedTextTest {
 protected:
  // `train --preset tiny --steps STEPS` on the text with `args`.
  SplitResult train(const std::string& args, int steps = 1) {
    return run_split("train --preset tiny --threads 1 --steps " + std::to_string(steps) +
                     " --data " + text_ + " " + args);
  }
  std::string cache_path() const {
    return token_cache_path(text_, load_tokenizer(tok_), fnv1a64_bytes(read_file(text_)));
  }
  // A checkpoint directory of one step under the BPE tokenizer, exported to `hf`.
  void export_bpe(const std::string& ck, const std::string& hf) {
    ASSERT_EQ(train("--tokenizer " + tok_ + " --out " + ck).exit_code, 0);
    const CommandResult e = run_reftrain("export --ckpt " + ck + " --format hf --out " + hf);
    ASSERT_EQ(e.exit_code, 0) << e.output;
  }
};

// Item 1: the cache's name is predictable, so a link there led the ids into another file.
TEST_F(HardeningSurfaces, TokenCacheNeverWritesThroughALink) {
  const std::string victim = dir_.file("victim.txt");
  write_file(victim, "precious\n");
  const std::string cache = cache_path();
  ASSERT_EQ(::symlink(victim.c_str(), cache.c_str()), 0);
  const SplitResult r = train("--tokenizer " + tok_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(victim), "precious\n");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(cache)));
  EXPECT_NE(r.err.find("note: token cache " + cache + " is a symbolic link"), std::string::npos)
      << r.err;
}

// Item 1 (and every output): a link at the writer's temporary name redirected the bytes.
TEST_F(HardeningSurfaces, AtomicWriterNeverFollowsItsTemporaryName) {
  const std::string victim = dir_.file("victim.txt"), out = dir_.file("out.txt");
  write_file(victim, "precious\n");
  ASSERT_EQ(::symlink(victim.c_str(), atomic_tmp_path(out).c_str()), 0);
  write_text_file(out, "new\n");
  EXPECT_EQ(read_file(victim), "precious\n");
  EXPECT_EQ(read_file(out), "new\n");
  // The cache's writer refuses a link at the name itself.
  const std::string link = dir_.file("link.tokens");
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  EXPECT_NE(user_error_of([&] {
              AtomicFileWriter w(link, AtomicFileWriter::Links::kRefuse);
            }).find("is a symbolic link"),
            std::string::npos);
  EXPECT_EQ(read_file(victim), "precious\n");
}

// Item 2: one flipped bit in the cached ids was trained on without a word.
TEST_F(HardeningSurfaces, DamagedTokenCacheIsCaughtAndEncodedAgain) {
  const std::string t1 = dir_.file("1.jsonl"), t2 = dir_.file("2.jsonl");
  ASSERT_EQ(train("--tokenizer " + tok_ + " --trace " + t1).exit_code, 0);
  const std::string cache = cache_path();
  std::string bytes = read_file(cache);
  ASSERT_GT(bytes.size(), 1100u);
  bytes[1100] = char(bytes[1100] ^ 1);  // an id's low bit: still inside the vocabulary
  write_file(cache, bytes);
  const SplitResult r = train("--tokenizer " + tok_ + " --trace " + t2);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("note: token cache " + cache + " is damaged"), std::string::npos) << r.err;
  EXPECT_EQ(read_trace(t1).at(0)["data"]["hash"], read_trace(t2).at(0)["data"]["hash"]);
  EXPECT_NE(read_file(cache), bytes) << "the cache was not written again";
}

// Item 3: an exported BPE model trained on byte ids when --tokenizer was not repeated.
TEST_F(HardeningSurfaces, InitFromAModelDirectoryUsesItsTokenizer) {
  const std::string ck = dir_.file("ck"), hf = dir_.file("hf"), trace = dir_.file("t.jsonl");
  export_bpe(ck, hf);
  const SplitResult r = train("--init-from " + hf + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_trace(trace).at(0)["data"]["tokenizer"]["hash"], load_tokenizer(tok_).hash_text());
  // Without its tokenizer files, a model of 300 tokens is not fed bytes.
  for (const char* f : {"tokenizer.json", "vocab.json", "merges.txt"}) fs::remove(hf + "/" + f);
  expect_user_error("train --preset tiny --steps 1 --data " + text_ + " --init-from " + hf, 2,
                    "tokens with no tokenizer beside it, so the text would be read as bytes");
}

// Item 5: a re-export left the earlier export's tokenizer files beside the new model.
TEST_F(HardeningSurfaces, ReexportReplacesTheWholeDirectory) {
  const std::string ck = dir_.file("ck"), hf = dir_.file("hf");
  export_bpe(ck, hf);
  ASSERT_TRUE(fs::exists(hf + "/tokenizer.json"));
  const std::string bytes_ck = dir_.file("bytes");
  ASSERT_EQ(train("--out " + bytes_ck).exit_code, 0);
  const CommandResult e = run_reftrain("export --ckpt " + bytes_ck + " --format hf --out " + hf);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_EQ(files_in(hf), (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_FALSE(fs::exists(dir_.file(".hf.export-tmp")));
  // A directory holding anything else is the user's: refused, nothing removed.
  write_file(hf + "/notes.txt", "mine\n");
  expect_user_error("export --ckpt " + bytes_ck + " --format hf --out " + hf, 2,
                    "holds 'notes.txt', which no export writes");
  EXPECT_EQ(read_file(hf + "/notes.txt"), "mine\n");
}

// Item 5: the export's files must not replace what the checkpoint was trained on.
TEST_F(HardeningSurfaces, ExportNeverOverwritesTheCheckpointsData) {
  const std::string out = dir_.file("out");
  fs::create_directories(out);
  const std::string data = out + "/config.json";  // a text file under an export's name
  write_file(data, learnable_text());
  const std::string ck = dir_.file("ck");
  ASSERT_EQ(
      run_reftrain("train --preset tiny --steps 1 --threads 1 --data " + data + " --out " + ck)
          .exit_code,
      0);
  expect_user_error("export --ckpt " + ck + " --format hf --out " + out, 2,
                    "is the same file as the checkpoint's data");
  EXPECT_EQ(read_file(data), learnable_text());
}

// Item 6: --dump-step went through CLI11's own integer parser (010 was step 8, 0x10 step 16).
TEST_F(HardeningSurfaces, DumpStepIsDecimal) {
  const std::string g = dir_.file("g");
  const CommandResult r = run_reftrain(
      "golden run --preset tiny --steps 10 --dump-step 010 --data " + text_ + " --out " + g);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(g + "/step-10.safetensors")) << r.output;
  expect_user_error("golden run --preset tiny --steps 20 --dump-step 0x10 --out " + g, 2,
                    "--dump-step: '0x10' is not a decimal integer in [1, 1000000]");
  expect_user_error("golden run --preset tiny --steps 20 --dump-step '3 ' --out " + g, 2,
                    "--dump-step: '3 ' is not a decimal integer");
}

// Item 7: `sample | head -c 20` generated every token; `sample > /dev/full` exited 0.
TEST_F(HardeningSurfaces, SampleStopsAtTheFirstFailedWrite) {
  const std::string ck = dir_.file("ck"), err = dir_.file("err"), rc = dir_.file("rc");
  ASSERT_EQ(train("--out " + ck).exit_code, 0);
  const std::string sample =
      std::string(REFTRAIN_BIN) + " sample --ckpt " + ck + " --threads 1 --tokens 1000000";
  const auto started = std::chrono::steady_clock::now();
  run_command("{ " + sample + " 2>" + err + "; echo $? >" + rc + "; } | head -c 20 >/dev/null");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(read_file(rc), "1\n") << read_file(err);
  EXPECT_NE(read_file(err).find("error: standard output cannot be written"), std::string::npos)
      << read_file(err);
  EXPECT_LT(seconds, 10.0) << "the sample went on after its reader left";
  const CommandResult full = run_command("{ " + sample + " >/dev/full; }");
  EXPECT_EQ(full.exit_code, 1) << full.output;
  EXPECT_NE(full.output.find("error: standard output cannot be written"), std::string::npos)
      << full.output;
}

// Item 9: every merge rescanned the whole chunk, and text without whitespace is one chunk: 1 MB
// of random a/b at vocab 1000 took 17 s, 2 MB twice that (now about half a second a MB).
TEST_F(HardeningSurfaces, BpeTrainingOnTextWithoutWhitespaceIsNearLinear) {
  std::string ab;
  uint64_t x = 33;
  while (ab.size() < 2000000) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ab += (x >> 40) & 1 ? 'a' : 'b';
  }
  const std::string path = dir_.file("ab.txt");
  write_file(path, ab);
  const CommandResult r =
      run_command("timeout 10 " + std::string(REFTRAIN_BIN) + " tokenizer train --threads 1 " +
                  "--vocab-size 1000 --data " + path + " --out " + dir_.file("ab.json"));
  ASSERT_EQ(r.exit_code, 0) << "did not finish in 10 s: " << r.output;
  EXPECT_NE(r.output.find("vocab 1000"), std::string::npos) << r.output;
}

// Item 10: readers parsed "[[[[" of any depth, ~80 bytes of memory a byte, before any check.
TEST_F(HardeningSurfaces, DeeplyNestedJsonIsRefusedBeforeParsing) {
  const std::string deep(4 << 20, '[');
  const std::string tj = dir_.file("deep.json");
  write_file(tj, deep);
  // ~320 MB of address space is far more than 4 MB needs, and far less than parsing it took.
  const std::string limit = "ulimit -v 600000; ";
  CommandResult r =
      run_command(limit + REFTRAIN_BIN + " tokenizer encode --tokenizer " + tj + " " + text_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nests its JSON deeper than 16 levels"), std::string::npos) << r.output;
  const std::string vdir = dir_.file("vocab");
  fs::create_directories(vdir);
  write_file(vdir + "/vocab.json", deep);
  write_file(vdir + "/merges.txt", "");
  r = run_command(limit + REFTRAIN_BIN + " tokenizer encode --tokenizer " + vdir + " " + text_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nests its JSON deeper than 16 levels"), std::string::npos) << r.output;
  const std::string trace = dir_.file("t.jsonl");
  write_file(trace, "{\"type\":\"run\"}\n" + deep + "\n");
  r = run_command(limit + REFTRAIN_BIN + " plot " + trace + " --out " + dir_.file("p.svg"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("t.jsonl:2: JSON nested deeper than 16 levels"), std::string::npos)
      << r.output;
  const std::string big = dir_.file("big.json");
  write_file(big, "{\"model\": \"" + std::string(17 << 20, 'x') + "\"}");
  expect_user_error("tokenizer encode --tokenizer " + big + " " + text_, 1,
                    "over reftrain's limit of 16 MiB for tokenizer files");
}

// Item 10: a small weights file whose config.json claims GPT-2 small allocated the whole model
// (2.1 GB) before its first tensor was found to have another shape.
TEST_F(HardeningSurfaces, HfWeightsAreCheckedAgainstTheConfigBeforeAllocating) {
  const std::string ck = dir_.file("ck"), hf = dir_.file("hf");
  ASSERT_EQ(train("--out " + ck).exit_code, 0);
  ASSERT_EQ(run_reftrain("export --ckpt " + ck + " --format hf --out " + hf).exit_code, 0);
  nlohmann::json config = nlohmann::json::parse(read_file(hf + "/config.json"));
  config["n_embd"] = 768, config["n_layer"] = 12, config["n_head"] = 12;
  write_file(hf + "/config.json", config.dump());
  // The estimate of a 124M-parameter run is over this limit: refused there on the old path.
  const SplitResult r =
      run_split("train --preset tiny --steps 1 --data " + text_ + " --init-from " + hf);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("model.safetensors: tensor 'transformer.wte.weight' has shape [256,32], "
                       "expected [256,768]"),
            std::string::npos)
      << r.err;
  const CommandResult limited =
      run_command("REFTRAIN_MEMORY_LIMIT=300000000 " + std::string(REFTRAIN_BIN) +
                  " train --preset tiny " + "--steps 1 --data " + text_ + " --init-from " + hf);
  EXPECT_NE(limited.output.find("has shape"), std::string::npos) << limited.output;
}

// Beyond the list: a JSON value inside safetensors metadata is a string, which the header's depth
// limit does not reach into: a checkpoint's 12 MB "[[[[" config cost ~500 MB to parse.
TEST_F(HardeningSurfaces, DeeplyNestedMetadataIsRefusedBeforeParsing) {
  const std::string ck = dir_.file("ck"), bad = dir_.file("bad.safetensors");
  ASSERT_EQ(train("--out " + ck).exit_code, 0);
  SafetensorsFile f = read_safetensors(ck + "/ckpt-00000001.safetensors");
  f.metadata["config"] = std::string(12 << 20, '[');
  write_safetensors(bad, f);
  const CommandResult r = run_command("{ ulimit -v 400000; " + std::string(REFTRAIN_BIN) +
                                      " sample --ckpt " + bad + " --tokens 1; }");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("config metadata nests deeper than 16 levels"), std::string::npos)
      << r.output;
  // compare reads a fixture's tolerances from its metadata the same way.
  SafetensorsFile t;
  const float x = 1.0f;
  t.add("x", DType::kF32, {1}, &x);
  t.metadata["tolerances"] = std::string(12 << 20, '[');
  const std::string tf = dir_.file("t.safetensors");
  write_safetensors(tf, t);
  const CommandResult c = run_command("{ ulimit -v 400000; " + std::string(REFTRAIN_BIN) +
                                      " compare " + tf + " " + tf + "; }");
  EXPECT_EQ(c.exit_code, 2) << c.output;
  EXPECT_NE(c.output.find("metadata \"tolerances\" is not JSON"), std::string::npos) << c.output;
}

// --- messages: one line, naming the real problem and the fix ----------------------------------

TEST_F(HardeningSurfaces, MovedTokenizerDirectoryIsNamed) {
  const std::string ck = dir_.file("ck"), hf = dir_.file("hf"), moved = dir_.file("moved");
  export_bpe(ck, hf);
  // Trained with the directory's vocab.json + merges.txt (kind gpt2: GPT-2's file names).
  fs::remove(hf + "/tokenizer.json");
  const std::string ck2 = dir_.file("ck2");
  ASSERT_EQ(train("--tokenizer " + hf + " --out " + ck2).exit_code, 0);
  fs::rename(hf, moved);
  expect_user_error("sample --ckpt " + ck2 + " --tokens 2", 1,
                    "tokenizer " + hf + " does not exist; if it moved, pass it with --tokenizer");
}

TEST_F(HardeningSurfaces, VocabWithATokenMissingNamesTheFreeId) {
  const std::string d = dir_.file("v");
  fs::create_directories(d);
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 256; ++i) {
    if (i != 65) vocab[to_byte_level(std::string(1, char(i)))] = i;
  }
  vocab["<|endoftext|>"] = 256;
  write_file(d + "/vocab.json", vocab.dump());
  write_file(d + "/merges.txt", "");
  expect_user_error("tokenizer encode --tokenizer " + d + " " + text_, 1,
                    "no token has id 65 while '<|endoftext|>' has id 256 past the 256 tokens");
}

TEST_F(HardeningSurfaces, BytesThatAreNotUtf8AreEscapedInMessages) {
  const std::string bad = dir_.file("bad.json");
  write_file(bad, "{\"model\": \xff}");
  const SplitResult r = run_split("tokenizer encode --tokenizer " + bad + " " + text_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.find('\xff'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\xff"), std::string::npos) << r.err;
}

TEST_F(HardeningSurfaces, HugeIdIsNamedAsTooLarge) {
  const std::string ids = dir_.file("ids.txt");
  write_file(ids, "12 99999999999999999999\n");
  expect_user_error("tokenizer decode --tokenizer bytes " + ids, 1,
                    "item 2 '99999999999999999999' is larger than any token id");
}

TEST_F(HardeningSurfaces, OutOfMemoryOutsideTrainDoesNotAdviseABatch) {
  const std::string big = dir_.file("big.txt");
  write_file(big, std::string(40 << 20, 'a'));
  // Braces: run_command's 2>&1 comes after them, so stderr is not sent to /dev/null too.
  const CommandResult r =
      run_command("{ ulimit -v 400000; " + std::string(REFTRAIN_BIN) +
                  " tokenizer encode --tokenizer bytes " + big + " >/dev/null; }");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("out of memory in `reftrain tokenizer`"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--batch"), std::string::npos) << r.output;
}

TEST_F(HardeningSurfaces, ImportedWeightsGetAdviceThatApplies) {
  const std::string ck = dir_.file("ck"), hf = dir_.file("hf");
  ASSERT_EQ(train("--out " + ck).exit_code, 0);
  ASSERT_EQ(run_reftrain("export --ckpt " + ck + " --format hf --out " + hf).exit_code, 0);
  // Ids past the model's 256 tokens: the file's vocabulary is fixed, no preset changes it.
  const std::string tokens = dir_.file("t.bin");
  std::vector<uint16_t> ids(4000, 7);
  ids[3] = 300;
  write_file(tokens, llmc_header({20240520, 1, int32_t(ids.size())}, uint16_le(ids)));
  expect_user_error("train --preset tiny --steps 1 --data-tokens " + tokens + " --init-from " + hf,
                    1, "the model of --init-from " + hf + " has that vocabulary");
  // Weights that overflow: the loss of step 1 comes before any learning rate acted.
  SafetensorsFile w = read_safetensors(hf + "/model.safetensors");
  SafeTensor& ln = w.tensors.at("transformer.ln_f.weight");
  std::vector<float> huge(ln.numel(), 3e38f);
  std::memcpy(ln.bytes.data(), huge.data(), ln.bytes.size());
  write_safetensors(hf + "/model.safetensors", w);
  const SplitResult r = train("--init-from " + hf);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("check the weights of --init-from " + hf), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("lower --lr"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace reftrain::testing
