// Loss plots (apps/plot.h, `reftrain plot`, `train --plot`). Plots are parsed by Python's XML
// parser (tests/tools/svg_series.py) and rendered by rsvg-convert.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

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
