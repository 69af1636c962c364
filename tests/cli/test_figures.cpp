// The study pages' figures are the program's: `reftrain explain --figures DIR` writes every one,
// each committed docs/img/NAME.svg must equal what it writes (so a figure cannot drift from the
// code that computes its numbers), every course page shows at least one of them, and the map's
// boxes link to pages that exist.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kRepoRoot = fs::path(REFTRAIN_SOURCE_DIR);

// The figures the program writes into `dir`: NAME -> the page that shows it (the "(page)" that
// --figures prints after each path).
std::map<std::string, std::string> write_figures(const TempDir& dir) {
  const CommandResult r = run_reftrain("explain --figures " + dir.file("img"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::string> figures;
  std::istringstream lines(r.output);
  static const std::regex line(R"(^(\S+)\.svg  \((\S+)\)$)");
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    EXPECT_TRUE(std::regex_match(l, m, line)) << l;
    if (!m.empty()) figures[fs::path(m[1].str()).filename().string()] = m[2];
  }
  return figures;
}

TEST(Figures, TheCommittedFiguresAreWhatTheProgramWrites) {
  TempDir dir;
  const std::map<std::string, std::string> figures = write_figures(dir);
  ASSERT_GE(figures.size(), 15u);
  for (const auto& [name, page] : figures) {
    const fs::path committed = kRepoRoot / "docs" / "img" / (name + ".svg");
    ASSERT_TRUE(fs::exists(committed)) << committed << ": run ./build/reftrain explain --figures "
                                       << "docs/img and commit the new figure";
    const std::string written = read_file(dir.file("img/" + name + ".svg"));
    EXPECT_EQ(read_file(committed.string()), written)
        << name << ".svg differs from the program's: regenerate it with ./build/reftrain explain "
        << "--figures docs/img";
    EXPECT_EQ(written.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << name;
    EXPECT_EQ(written.substr(written.size() - 7), "</svg>\n") << name;
  }
}

TEST(Figures, EachFigureIsShownOnItsPageAndEveryPageHasOne) {
  TempDir dir;
  const std::map<std::string, std::string> figures = write_figures(dir);
  std::set<std::string> pages_with_a_figure;
  for (const auto& [name, page] : figures) {
    const std::string text = read_file((kRepoRoot / page).string());
    EXPECT_NE(text.find("img/" + name + ".svg)"), std::string::npos)
        << page << " does not show " << name << ".svg";
    pages_with_a_figure.insert(fs::path(page).filename().string());
  }
  for (const auto& e : fs::directory_iterator(kRepoRoot / "docs" / "kernels")) {
    EXPECT_TRUE(pages_with_a_figure.count(e.path().filename().string()))
        << e.path().filename() << " shows no figure of `reftrain explain --figures`";
  }
  EXPECT_TRUE(pages_with_a_figure.count("map.md"));
}

TEST(Figures, EveryBoxOfTheMapLinksToAPageThatExists) {
  const std::string svg = read_file((kRepoRoot / "docs" / "img" / "map.svg").string());
  static const std::regex href("<a href=\"([^\"]+)\">");
  std::set<std::string> targets;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), href); it != std::sregex_iterator();
       ++it) {
    const fs::path target = kRepoRoot / "docs" / "img" / (*it)[1].str();
    EXPECT_TRUE(fs::is_regular_file(target)) << (*it)[1];
    targets.insert(fs::weakly_canonical(target).filename().string());
  }
  // Every study page is on the map.
  for (const auto& e : fs::directory_iterator(kRepoRoot / "docs" / "kernels")) {
    if (e.path().filename() == "00_backprop.md") continue;  // the primer: no kernel to place
    EXPECT_TRUE(targets.count(e.path().filename().string()))
        << "the map has no box for " << e.path().filename();
  }
}

// The number in trace line `type` ("step" or "val") of step `step`, field `field`.
double trace_value(const std::string& trace, const std::string& type, int step,
                   const std::string& field) {
  const std::regex line("\\{\"type\":\"" + type + "\",\"step\":" + std::to_string(step) +
                        ",[^\\n]*\"" + field + "\":([-0-9.e]+)");
  std::smatch m;
  if (!std::regex_search(trace, m, line)) return std::nan("");
  return std::stod(m[1]);
}

// docs/training.md's loss curve of `tiny` is the run the page describes, plotted by `reftrain
// plot`: rerunning the page's commands writes the committed figure byte for byte (the run is
// bit-reproducible), and the numbers the page quotes are that run's. (The `laptop` curve's 2000
// steps are too long for a test; its command is on the page.)
TEST(Figures, TheTinyLossCurveIsTheRunThePageDescribes) {
  TempDir dir;
  const CommandResult train =
      run_reftrain("train --preset tiny --tokenizer bytes --steps 300 --val-every 25 --trace " +
                   dir.file("tiny.jsonl"));
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const CommandResult plot =
      run_reftrain("plot " + dir.file("tiny.jsonl") + " --out " + dir.file("tiny_300_steps.svg") +
                   " --title 'tiny, 300 steps: train and validation loss'");
  ASSERT_EQ(plot.exit_code, 0) << plot.output;
  EXPECT_EQ(read_file(dir.file("tiny_300_steps.svg")),
            read_file((kRepoRoot / "docs" / "img" / "tiny_300_steps.svg").string()))
      << "rerun docs/training.md's commands and commit the new figure";
  const std::string page = read_file((kRepoRoot / "docs" / "training.md").string());
  const std::string trace = read_file(dir.file("tiny.jsonl"));
  struct Quote {
    const char* type;
    int step;
    const char* field;
    const char* format;  // the page's phrase, with the number as printf formats it
  };
  for (const Quote& q : {Quote{"val", 0, "val_loss", "`val loss %.4f` before the first step"},
                         Quote{"step", 1, "loss", "`loss %.4f` at"},
                         Quote{"val", 25, "val_loss", "val %.2f at step 25"},
                         Quote{"val", 50, "val_loss", "(%.2f at step 50"},
                         Quote{"val", 300, "val_loss", "%.2f at step 300)"},
                         Quote{"step", 100, "loss", "step 100 prints %.2f"},
                         Quote{"step", 200, "loss", "step 200 %.2f"}}) {
    char phrase[96];
    std::snprintf(phrase, sizeof phrase, q.format, trace_value(trace, q.type, q.step, q.field));
    EXPECT_NE(page.find(phrase), std::string::npos) << "docs/training.md should say: " << phrase;
  }
}

}  // namespace
}  // namespace reftrain::testing
