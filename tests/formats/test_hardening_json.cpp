// Every float reftrain writes to JSON is the shortest decimal that reads back to it
// (docs/formats.md). nlohmann's dump (Grisu2) misses that form for about 1 double in 800, so a
// trace once read "lr":0.00030197992000000003 where 0.00030197992 reads back the same.
#include <gtest/gtest.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "core/train/checkpoint.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

// Significant digits of a decimal ("-0.00120e5" -> 2).
int significant_digits(const std::string& s) {
  const std::string mantissa = s.substr(0, s.find_first_of("eE"));
  std::string digits;
  for (char c : mantissa) {
    if (c >= '0' && c <= '9') digits += c;
  }
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return 1;
  return int(digits.find_last_not_of('0') - first + 1);
}

int shortest_digits(double x) {
  char buf[64];
  *std::to_chars(buf, buf + sizeof buf - 1, x, std::chars_format::scientific).ptr = '\0';
  return significant_digits(buf);
}

// Collects every float token of a JSON text whose digits are more than the shortest form's.
struct LongNumbers : nlohmann::json_sax<json> {
  std::vector<std::string> found;
  bool number_float(number_float_t v, const string_t& s) override {
    if (significant_digits(s) != shortest_digits(v)) found.push_back(s);
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

// Every float in one JSON text is in its shortest form.
void expect_shortest(const std::string& text, const std::string& where) {
  LongNumbers sax;
  ASSERT_TRUE(json::sax_parse(text, &sax)) << where << " is not JSON";
  EXPECT_TRUE(sax.found.empty()) << where << ": " << json(sax.found).dump();
}

void expect_shortest_lines(const std::string& path) {
  int line = 0;
  for (const std::string& l : split_lines(read_file(path))) {
    expect_shortest(l, path + ":" + std::to_string(++line));
  }
}

// A safetensors file's metadata values that hold JSON.
void expect_shortest_metadata(const std::string& path) {
  for (const auto& [key, value] : read_safetensors(path).metadata) {
    if (!value.empty() && (value[0] == '{' || value[0] == '[')) {
      expect_shortest(value, path + " metadata " + key);
    }
  }
}

TEST(HardeningJson, FloatsAreWrittenAsTheirShortestDecimal) {
  EXPECT_EQ(json_text(Json{{"lr", json_float(0.00030197992f)}}), "{\"lr\":0.00030197992}");
  EXPECT_EQ(json_text(Json{{"grad_norm", json_float(0.649395f)}}), "{\"grad_norm\":0.649395}");
  EXPECT_EQ(json_text(Json::array({1.0, 0.0001, 1e-05, 1e21, -0.0, 123.5})),
            "[1.0,0.0001,1e-05,1e+21,-0.0,123.5]");  // dump's layout, kept
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    float x;
    const uint32_t bits = rng();
    std::memcpy(&x, &bits, 4);
    if (!std::isfinite(x)) continue;
    const std::string text = json_text(Json(json_float(x)));
    ASSERT_EQ(std::strtof(text.c_str(), nullptr), x) << text;
    char shortest[32];
    *std::to_chars(shortest, shortest + 31, x).ptr = '\0';
    ASSERT_EQ(significant_digits(text), significant_digits(shortest)) << text << " " << shortest;
  }
}

class HardeningJsonFiles : public LearnableTextTest {};

// Every JSON file kind reftrain writes: trace, checkpoint metadata, compare --json, and the
// golden run and kernel files.
TEST_F(HardeningJsonFiles, EveryJsonFileKindHoldsShortestNumbers) {
  // A learning rate whose double dump used to print 0.00030197992000000003.
  const std::string trace = dir_.file("t.jsonl"), out = dir_.file("ck");
  CommandResult r = run_reftrain(
      "train --preset tiny --steps 6 --val-every 3 --lr 0.00030197992 "
      "--data " +
      text_ + " --trace " + trace + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_shortest_lines(trace);
  expect_shortest_metadata(out + "/" + checkpoint_file_name(6));

  // compare --json echoes numbers read from two traces: 0.649395 used to come back
  // 0.6493949999999999.
  const std::string a = dir_.file("a.jsonl"), b = dir_.file("b.jsonl");
  write_file(a,
             "{\"type\":\"run\"}\n{\"type\":\"step\",\"step\":1,\"loss\":0.649395,"
             "\"lr\":0.00030197992,\"grad_norm\":0.649395}\n");
  write_file(b,
             "{\"type\":\"run\"}\n{\"type\":\"step\",\"step\":1,\"loss\":0.649395,"
             "\"lr\":0.00030197992,\"grad_norm\":0.00030197992}\n");
  r = run_command(std::string(REFTRAIN_BIN) + " compare " + a + " " + b + " --json 2>/dev/null");
  ASSERT_NE(r.output.find("\"rows\""), std::string::npos) << r.output;
  expect_shortest(r.output, "compare --json");
  EXPECT_NE(r.output.find("0.649395"), std::string::npos) << r.output;

  // The golden files: llama-tiny mixed adamw8bit's trace held 0.6706055400000001 at step 49.
  const std::string golden = dir_.file("golden"), kernels = dir_.file("kernels");
  r = run_reftrain("golden run --preset llama-tiny --precision mixed --optimizer adamw8bit --out " +
                   golden);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(run_reftrain("golden kernels --out " + kernels).exit_code, 0);
  expect_shortest_lines(golden + "/trace.jsonl");
  for (const char* f : {"config.json", "build.json"}) {
    expect_shortest(read_file(golden + "/" + f), f);
  }
  for (const char* f : {"init.safetensors", "batches.safetensors", "debug_state.safetensors"}) {
    expect_shortest_metadata(golden + "/" + f);
  }
  expect_shortest(read_file(kernels + "/manifest.json"), "manifest.json");
  for (const auto& e : std::filesystem::directory_iterator(kernels)) {
    if (e.path().extension() == ".safetensors") expect_shortest_metadata(e.path().string());
  }
}

}  // namespace
}  // namespace reftrain::testing
