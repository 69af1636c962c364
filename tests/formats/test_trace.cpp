// read_trace: a written trace reads back bit-exact; every malformed file is an input error
// naming the file and the line.
#include <gtest/gtest.h>

#include <fstream>

#include "core/formats/trace.h"
#include "tests/common/test_util.h"

namespace reftrain {
namespace {
using namespace reftrain::testing;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(Trace, WrittenTraceReadsBackBitExact) {
  TempDir dir;
  const std::string path = dir.file("t.jsonl");
  const float loss = 5.5451774f, lr = 3.0000001e-4f;
  {
    TraceWriter w(path);
    w.write(Json{{"type", "run"}, {"preset", "tiny"}});
    w.write(
        Json{{"type", "step"}, {"step", 1}, {"loss", json_float(loss)}, {"lr", json_float(lr)}});
    w.write(Json{{"type", "val"}, {"step", 1}, {"val_loss", json_float(kNaN)}});
    w.write(Json{{"type", "step"}, {"step", 2}, {"loss", json_float(loss)}});
    w.write(Json{{"type", "note"}, {"text", "kept"}});
  }
  const Trace t = reftrain::read_trace(path);
  EXPECT_EQ(t.run.at("preset"), "tiny");
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].at("loss").get<float>(), loss);
  EXPECT_EQ(t.steps[0].at("lr").get<float>(), lr);
  ASSERT_EQ(t.vals.size(), 1u);
  EXPECT_TRUE(t.vals[0].at("val_loss").is_null());  // JSON writes NaN as null
  EXPECT_EQ(t.other.size(), 1u);
}

// One writer for both traces: the golden run's fields (with the z-loss part, no wall time) in
// the order its pinned trace.jsonl has, and `train`'s (wall time, a skipped step) in the same.
TEST(Trace, StepLinesOfBothTracesComeFromOneWriter) {
  StepRecord golden{1, 5.578825f, 1.0583502f, 0.94486684f, 3e-4f, 0.003082594f, {}};
  EXPECT_EQ(json_text(step_line(golden)),
            R"({"type":"step","step":1,"loss":5.578825,"z_loss":0.003082594,)"
            R"("grad_norm":1.0583502,"clip":0.94486684,"lr":0.0003})");
  StepRecord train{2, kNaN, kNaN, kNaN, 3e-4f, {}, 12.34567, true};
  EXPECT_EQ(json_text(step_line(train)),
            R"({"type":"step","step":2,"loss":null,"grad_norm":null,"clip":null,"lr":0.0003,)"
            R"("ms":12.346,"skipped":true})");
}

TEST(Trace, MalformedFilesAreInputErrorsNamingTheLine) {
  TempDir dir;
  const std::string run = "{\"type\":\"run\"}\n";
  const struct {
    const char* text;
    const char* expect;
  } cases[] = {
      {"", "empty trace"},
      {"{\"type\":\"step\",\"step\":1,\"loss\":1}\n", ":1: the first line must be the run line"},
      {"[1,2]\n", ":1: not a JSON object"},
      {"{\"type\":\"run\"\n", ":1: not a JSON object"},
      {"{\"kind\":\"run\"}\n", ":1: needs a string \"type\""},
  };
  for (const auto& c : cases) {
    const std::string path = dir.file("bad.jsonl");
    write_text(path, c.text);
    const std::string err = user_error_of([&] { reftrain::read_trace(path); });
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.text << " -> " << err;
  }
  const struct {
    const char* lines;
    const char* expect;
  } bodies[] = {
      {"{\"type\":\"step\",\"loss\":1}\n", ":2: step line needs an integer \"step\""},
      {"{\"type\":\"step\",\"step\":-1,\"loss\":1}\n", ":2: step line needs an integer"},
      {"{\"type\":\"step\",\"step\":1,\"loss\":\"x\"}\n", ":2: step line needs a number \"loss\""},
      {"{\"type\":\"val\",\"step\":1}\n", ":2: val line needs a number \"val_loss\""},
      {"{\"type\":\"step\",\"step\":2,\"loss\":1}\n{\"type\":\"step\",\"step\":2,\"loss\":1}\n",
       ":3: step line step numbers must increase"},
      {"{\"type\":\"step\",\"step\":1,\"loss\":1}\ngarbage\n", ":3: not a JSON object"},
  };
  for (const auto& c : bodies) {
    const std::string path = dir.file("bad.jsonl");
    write_text(path, run + c.lines);
    const std::string err = user_error_of([&] { reftrain::read_trace(path); });
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.lines << " -> " << err;
  }
  EXPECT_EQ(user_error_of([&] { reftrain::read_trace(dir.file("missing.jsonl")); }),
            "trace " + dir.file("missing.jsonl") + " does not exist");
  EXPECT_NE(user_error_of([&] { reftrain::read_trace("/dev/zero"); }).find("not a regular file"),
            std::string::npos);
}

}  // namespace
}  // namespace reftrain
