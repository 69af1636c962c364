// `reftrain tokenizer encode | decode | train` through the built binary: the output formats, the
// same file on one and two threads, and one-line errors with the documented exit codes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/tokenizer/byte_level.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"
#include "tests/tokenizer/corpus.h"

namespace reftrain::testing {
namespace {

const std::string kBin = REFTRAIN_BIN;

TEST(TokenizerCli, EncodePrintsIdsAndDecodeWritesTheExactBytes) {
  TempDir dir;
  const std::string text = "Hello world\r\n\t<|endoftext|> caf\xc3\xa9 \xff\xfe end  ";
  write_file(dir.file("in.txt"), text);
  const SplitResult enc = run_split("tokenizer encode --tokenizer gpt2 " + dir.file("in.txt"));
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  EXPECT_EQ(enc.out.substr(0, 10), "15496 995 ");
  EXPECT_EQ(enc.out.back(), '\n');
  EXPECT_EQ(enc.out.find("  "), std::string::npos);
  write_file(dir.file("ids.txt"), enc.out);
  const CommandResult dec = run_command(kBin + " tokenizer decode --tokenizer gpt2 < " +
                                        dir.file("ids.txt") + " > " + dir.file("out.bin"));
  ASSERT_EQ(dec.exit_code, 0) << dec.output;
  EXPECT_EQ(read_file(dir.file("out.bin")), text);
  // stdin in, and the bytes tokenizer: one id per byte.
  const CommandResult bytes =
      run_command("printf 'AB\\n' | " + kBin + " tokenizer encode --tokenizer bytes");
  EXPECT_EQ(bytes.output, "65 66 10\n");
  EXPECT_EQ(run_command("printf '' | " + kBin + " tokenizer encode --tokenizer bytes").output,
            "\n");
}

TEST(TokenizerCli, TrainWritesTheSameFileOnOneAndTwoThreadsAndSaysWhatItDid) {
  TempDir dir;
  std::string text;
  for (const std::string& t : fortune_texts()) text += t;
  write_file(dir.file("data.txt"), text);
  for (const char* threads : {"1", "2"}) {
    const CommandResult r = run_command(
        std::string("OMP_NUM_THREADS=") + threads + " " + kBin + " tokenizer train --data " +
        dir.file("data.txt") + " --vocab-size 1500 --out " + dir.file(std::string("t") + threads));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<std::string> lines = non_empty_lines(r.output);
    ASSERT_EQ(lines.size(), 1u) << r.output;
    EXPECT_NE(lines[0].find("vocab 1500 ("), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("bytes/token"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find(std::string(threads) + " thread"), std::string::npos) << lines[0];
  }
  EXPECT_EQ(read_file(dir.file("t1")), read_file(dir.file("t2")));
  const SplitResult enc =
      run_split("tokenizer encode --tokenizer " + dir.file("t1") + " " + dir.file("data.txt"));
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  write_file(dir.file("ids"), enc.out);
  EXPECT_EQ(run_split("tokenizer decode --tokenizer " + dir.file("t1") + " " + dir.file("ids")).out,
            text);
}

// A vocab.json + merges.txt pair over the 256 bytes plus `extra` tokens, with `merges`.
std::string gpt2_style_dir(const TempDir& dir, const std::string& name,
                           const std::vector<std::string>& extra,
                           const std::vector<std::string>& merges) {
  nlohmann::json vocab;
  for (int i = 0; i < 256; ++i)
    vocab[to_byte_level(std::string(1, char(gpt2_byte_order()[size_t(i)])))] = i;
  for (size_t k = 0; k < extra.size(); ++k) vocab[extra[k]] = 256 + int(k);
  std::filesystem::create_directories(dir.file(name));
  write_file(dir.file(name + "/vocab.json"), vocab.dump());
  std::string lines = "#version: 0.2\n";
  for (const std::string& m : merges) lines += m + "\n";
  write_file(dir.file(name + "/merges.txt"), lines);
  return dir.file(name);
}

TEST(TokenizerCli, FilesThatDisagreeAreOneLineInputErrors) {
  TempDir dir;
  const std::string ok = gpt2_style_dir(dir, "ok", {"ab", "abc"}, {"a b", "ab c"});
  write_file(dir.file("empty.txt"), "");
  const SplitResult good =
      run_split("tokenizer encode --tokenizer " + ok + " " + dir.file("empty.txt"));
  EXPECT_EQ(good.exit_code, 0) << good.err;
  const std::string enc = "tokenizer encode --tokenizer ";
  expect_user_error(enc + gpt2_style_dir(dir, "r", {"ab"}, {"a b", "a x"}), 1,
                    "merge 2 makes 'ax', which is not in the vocab");
  expect_user_error(enc + gpt2_style_dir(dir, "p", {"ab", "abc"}, {"ab c", "a b"}), 1,
                    "joins token 256 'ab', which is neither a byte nor the result of an earlier");
  expect_user_error(enc + gpt2_style_dir(dir, "m", {"ab"}, {"zz b"}), 1,
                    "line 2: 'zz' is not in the vocab");
  expect_user_error(enc + gpt2_style_dir(dir, "v", {"ab", "xyz"}, {"a b"}), 1,
                    "token 257 'xyz' is neither a byte nor the result of a merge");
  expect_user_error(enc + gpt2_style_dir(dir, "d", {"ab"}, {"a b", "a b"}), 1,
                    "merge 2 repeats merge 1");
  expect_user_error(enc + gpt2_style_dir(dir, "f", {"ab"}, {"a b c"}), 1,
                    "is not a merge \"LEFT RIGHT\"");
  write_file(dir.file("bad.json"), "{\"model\": [1, 2");
  expect_user_error(enc + dir.file("bad.json"), 1, "is not valid JSON");
  write_file(dir.file("wordpiece.json"), R"({"model": {"type": "WordPiece", "vocab": {}}})");
  expect_user_error(enc + dir.file("wordpiece.json"), 1, "model.type is not \"BPE\"");
  write_file(dir.file("template.json"),
             R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": null,
                "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
                "post_processor": {"type": "TemplateProcessing"}})");
  expect_user_error(enc + dir.file("template.json"), 1, "its post_processor is not ByteLevel");
  expect_user_error(enc + dir.file("missing.json"), 1, "is neither 'bytes', 'gpt2'");
  expect_user_error(enc + "bytes " + dir.file("missing.txt"), 1, "does not exist");
}

TEST(TokenizerCli, BadIdsFlagsAndMissingGpt2FilesAreOneLineErrors) {
  TempDir dir;
  write_file(dir.file("ids"), "65 66\n256 1");
  expect_user_error("tokenizer decode --tokenizer bytes " + dir.file("ids"), 1,
                    "token id 256 at position 3 is outside the vocab [0, 256)");
  write_file(dir.file("ids"), "65 x66");
  expect_user_error("tokenizer decode --tokenizer bytes " + dir.file("ids"), 1,
                    "item 2 'x66' is not a token id");
  write_file(dir.file("ids"), "-1");
  expect_user_error("tokenizer decode --tokenizer bytes " + dir.file("ids"), 1,
                    "is not a token id");
  write_file(dir.file("data.txt"), "some text");
  write_file(dir.file("empty.txt"), "");
  expect_user_error(
      "tokenizer train --data " + dir.file("empty.txt") + " --out " + dir.file("t.json"), 1,
      "is empty: there is nothing to train on");
  for (const char* n : {"256", "65537", "4k"}) {
    expect_user_error("tokenizer train --data " + dir.file("data.txt") + " --vocab-size " + n +
                          " --out " + dir.file("t.json"),
                      2, "--vocab-size");
  }
  expect_user_error(
      "tokenizer train --data " + dir.file("none.txt") + " --out " + dir.file("t.json"), 1,
      "does not exist");
  expect_user_error(
      "tokenizer train --data " + dir.file("data.txt") + " --out " + dir.file("data.txt"), 2,
      "--out");
  expect_user_error("tokenizer", 2, "subcommand");
  const CommandResult r = run_command("REFTRAIN_GPT2_DIR=" + dir.file("nowhere") + " " + kBin +
                                      " tokenizer encode --tokenizer gpt2 " + dir.file("data.txt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(non_empty_lines(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find("run scripts/install-deps.sh"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace reftrain::testing
