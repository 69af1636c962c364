// `reftrain plot` on hostile inputs (docs/hardening.md): titles and file names that are not
// UTF-8, losses near the double range's ends. Each plot must parse as XML
// (tests/tools/svg_series.py), render (rsvg-convert), and label its ticks with their values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

class HardeningPlot : public ::testing::Test {
 protected:
  // Plots a trace of one step line per loss (given as JSON numbers) and returns the plot's texts.
  json plot(const std::string& trace_name, const std::vector<std::string>& losses,
            const std::string& title = "t") {
    const std::string trace = dir_.file(trace_name), svg = dir_.file("plot.svg");
    std::string lines = "{\"type\":\"run\"}\n";
    for (size_t k = 0; k < losses.size(); ++k) {
      lines +=
          "{\"type\":\"step\",\"step\":" + std::to_string(k + 1) + ",\"loss\":" + losses[k] + "}\n";
    }
    write_file(trace, lines);
    const CommandResult r =
        run_reftrain("plot '" + trace + "' --out " + svg + " --title '" + title + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const CommandResult parsed =
        run_command(std::string(REFTRAIN_TORCH_PYTHON) +
                    " " REFTRAIN_SOURCE_DIR "/tests/tools/svg_series.py " + svg + " 2>&1");
    EXPECT_EQ(parsed.exit_code, 0) << parsed.output;
    if (run_command("command -v rsvg-convert").exit_code == 0) {
      const CommandResult png = run_command("rsvg-convert " + svg + " -o " + dir_.file("p.png"));
      EXPECT_EQ(png.exit_code, 0) << png.output;
    }
    return parsed.exit_code == 0 ? json::parse(parsed.output)["texts"] : json::array();
  }

  // The texts that are numbers (tick labels), as numbers.
  static std::vector<double> numbers(const json& texts) {
    std::vector<double> out;
    for (const json& t : texts) {
      const std::string s = t.get<std::string>();
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') out.push_back(v);
    }
    return out;
  }

  TempDir dir_;
};

TEST_F(HardeningPlot, NonUtf8TitleAndFileNameGiveWellFormedSvg) {
  const json texts = plot("caf\xe9.jsonl", {"5.5", "5", "4.5"}, "r\xe9sum\xe9 <&>");
  EXPECT_NE(std::find(texts.begin(), texts.end(), "r\xEF\xBF\xBDsum\xEF\xBF\xBD <&>"), texts.end())
      << texts.dump();
  EXPECT_NE(std::find(texts.begin(), texts.end(), "caf\xEF\xBF\xBD train"), texts.end())
      << texts.dump();
}

TEST_F(HardeningPlot, HugeLossesAreLabelledWithTheirValue) {
  const std::vector<double> ticks = numbers(plot("huge.jsonl", {"1e308", "5e307", "1.5e308"}));
  double top = 0;
  for (double v : ticks) top = std::max(top, v);
  EXPECT_GE(top, 1e308) << "a label cut at 31 characters reads about 1e30";
}

TEST_F(HardeningPlot, LossesSpanningTheWholeRangeAreLabelled) {
  const std::vector<double> ticks = numbers(plot("span.jsonl", {"-1e308", "0", "1e308"}));
  double lo = 0, hi = 0;
  for (double v : ticks) {
    EXPECT_TRUE(std::isfinite(v));
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  EXPECT_LE(lo, -5e307);
  EXPECT_GE(hi, 5e307);
}

TEST_F(HardeningPlot, DenormalLossesGetDistinctLabels) {
  std::vector<double> tiny;
  for (double v : numbers(plot("tiny.jsonl", {"2e-310", "3e-310", "4e-310"}))) {
    if (v != 0 && std::fabs(v) < 1e-300) tiny.push_back(v);
  }
  ASSERT_GE(tiny.size(), 3u) << "denormal ticks labelled 0.000...";
  std::sort(tiny.begin(), tiny.end());
  EXPECT_EQ(std::unique(tiny.begin(), tiny.end()), tiny.end());
}

}  // namespace
}  // namespace reftrain::testing
