// The one-line messages of docs/hardening.md's review: each names what is wrong and the fix,
// where the old one named neither (or named the wrong thing).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/train/checkpoint.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

class HardeningMessages : public LearnableTextTest {
 protected:
  std::string train(const std::string& args) {
    const CommandResult r = run_reftrain("train --preset tiny --data " + text_ + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }
};

TEST(HardeningMessagesCli, UnknownCommandIsNamedWithTheNearestOne) {
  expect_user_error("trian --preset tiny", 2, "unknown command 'trian'; did you mean 'train'?");
  expect_user_error("comapre a b", 2, "did you mean 'compare'?");
  expect_user_error("frobnicate", 2, "unknown command 'frobnicate' (commands: train, sample");
}

// A newline in a value made a two-line error; a 100 KB value was echoed whole.
TEST(HardeningMessagesCli, EchoedValuesStayOnOneShortLine) {
  expect_user_error("train --preset \"$(printf 'ti\\nny')\"", 2, "ti\\x0any");
  expect_user_error("train --matmul \"$(printf 'bl\\nas')\"", 2,
                    "'bl\\x0aas' is not one of naive, tiled, blocked or eigen");
  const SplitResult r = run_split("train --preset \"$(head -c 100000 /dev/zero | tr '\\0' x)\"");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(non_empty_lines(r.err).size(), 1u);
  EXPECT_LT(r.err.size(), 600u) << r.err.substr(0, 600);
}

// CLI11's NonNegativeNumber printed "not in range 0.000000 to 17976931348623157...".
TEST(HardeningMessagesCli, RangeErrorsAreShort) {
  TempDir dir;
  const SplitResult r = run_split("sample --ckpt " + dir.file("x") + " --temperature -5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'-5' is below 0.0, the least allowed"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << r.err;
  expect_user_error("sample --ckpt " + dir.file("x") + " --temperature nan", 2,
                    "'nan' is not a decimal number");
}

// "header says 2000 tokens but the file holds 2000": the trailing byte was halved away.
TEST(HardeningMessagesCli, TokenFileWithATrailingByteSaysSo) {
  TempDir dir;
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = 2000;
  std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
  bytes += std::string(4000, '\1') + "x";
  write_file(dir.file("tok.bin"), bytes);
  expect_user_error("train --preset tiny --data-tokens " + dir.file("tok.bin"), 1,
                    "header says 2000 tokens but the file holds 2000 tokens and a trailing byte");
}

// An output path that is a directory: the atomic writer's temporary file went next to it
// ("cannot rename /.tmp.tmp" for /tmp), naming neither the path given nor the reason.
TEST_F(HardeningMessages, OutputThatIsADirectoryIsNamed) {
  const std::string sub = dir_.file("sub");
  fs::create_directories(sub);
  expect_user_error("train --preset tiny --steps 1 --data " + text_ + " --trace " + sub, 1,
                    "--trace " + sub + " cannot be written: it is a directory");
  const std::string out = dir_.file("run"), trace = dir_.file("t.jsonl");
  train("--steps 4 --stop-after 2 --out " + out + " --trace " + trace);
  expect_user_error("train --resume " + out + " --trace " + sub, 1, "is a directory");
  expect_user_error("plot " + trace + " --out " + sub, 1,
                    "--out " + sub + " cannot be written: it is a directory");
}

TEST_F(HardeningMessages, GoldenOutThatIsAFileGivesTheReason) {
  write_file(dir_.file("f"), "x");
  expect_user_error(
      "golden run --preset tiny --steps 1 --data " + text_ + " --out " + dir_.file("f"), 1,
      "is a file, not a directory");
  expect_user_error("golden kernels --arch gpt2 --out " + dir_.file("f/sub"), 1,
                    "cannot create directory");
}

// compare detected the kind by the first non-blank byte: an empty or BOM-prefixed trace was
// called a corrupt safetensors header.
TEST_F(HardeningMessages, CompareDetectsTheKindByContent) {
  const std::string a = dir_.file("a.jsonl"), bom = dir_.file("bom.jsonl");
  const std::string lines = "{\"type\":\"run\"}\n{\"type\":\"step\",\"step\":1,\"loss\":5.5}\n";
  write_file(a, lines);
  write_file(bom, "\xEF\xBB\xBF" + lines);
  const CommandResult r = run_reftrain("compare " + a + " " + bom);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  write_file(dir_.file("empty.jsonl"), "");
  expect_user_error("compare " + a + " " + dir_.file("empty.jsonl"), 2,  // compare's input code
                    "is empty: neither a trace nor a safetensors file");
}

TEST_F(HardeningMessages, NumberOutOfRangeInATraceIsNamed) {
  const std::string t = dir_.file("t.jsonl");
  write_file(t, "{\"type\":\"run\"}\n{\"type\":\"step\",\"step\":1,\"loss\":1e400}\n");
  expect_user_error("plot " + t + " --out " + dir_.file("p.svg"), 1,
                    "t.jsonl:2: a number is out of range");
}

TEST_F(HardeningMessages, DamagedNewestCheckpointNamesTheNewestIntactOne) {
  const std::string out = dir_.file("run");
  train("--steps 4 --save-every 2 --out " + out);
  const std::string newest = out + "/" + checkpoint_file_name(4);
  const std::string bytes = read_file(newest);
  write_file(newest, bytes.substr(0, bytes.size() / 2));
  expect_user_error("train --resume " + out, 1,
                    "the newest intact checkpoint is " + out + "/" + checkpoint_file_name(2) +
                        ": move " + newest + " away");
}

TEST_F(HardeningMessages, DataPathOfACheckpointIsCheckedOnResume) {
  const std::string out = dir_.file("run");
  train("--steps 4 --stop-after 2 --out " + out);
  SafetensorsFile f = read_safetensors(out + "/" + checkpoint_file_name(2));
  json data = json::parse(f.metadata.at("data"));
  const std::string crafted = dir_.file("crafted.safetensors");
  // A directory of text files must not be read as a fortunes corpus.
  fs::create_directories(dir_.file("texts"));
  write_file(dir_.file("texts/a"), "hello\n");
  data["path"] = dir_.file("texts");
  f.metadata["data"] = data.dump();
  write_safetensors(crafted, f);
  expect_user_error("train --resume " + crafted + " --out " + dir_.file("o1"), 1,
                    "is a directory, not the data file it names; pass the data with --data");
  // A data file that moved: the message says how to point at it.
  data["path"] = dir_.file("moved.txt");
  f.metadata["data"] = data.dump();
  write_safetensors(crafted, f);
  expect_user_error("train --resume " + crafted + " --out " + dir_.file("o2"), 1,
                    "does not exist; if it moved, pass it with --data FILE");
}

}  // namespace
}  // namespace reftrain::testing
