// `reftrain plot`: training and validation loss of one or more traces, overlaid in one SVG.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "apps/plot.h"
#include "core/base/error.h"
#include "core/formats/atomic_file.h"
#include "core/formats/trace.h"

namespace reftrain {

namespace {

struct PlotArgs {
  std::vector<std::string> traces;
  std::string out, title = "training and validation loss", y = "loss";
};

int run_plot(const PlotArgs& a) {
  if (a.out.empty()) throw usage_error("--out needs a file name");
  std::vector<NamedPath> inputs;
  for (const std::string& path : a.traces) inputs.push_back({"trace", path});
  refuse_clobbering({{"--out", a.out}}, inputs);
  check_writable("--out", a.out);
  std::vector<Trace> traces;
  for (const std::string& path : a.traces) traces.push_back(read_trace(path));
  // Legend names: the file names, or the paths where two files share a name.
  std::multiset<std::string> names;
  for (const std::string& path : a.traces) names.insert(trace_label(path));
  std::vector<PlotRun> runs;
  for (size_t i = 0; i < traces.size(); ++i) {
    const std::string label = trace_label(a.traces[i]);
    runs.push_back({names.count(label) > 1 ? a.traces[i] : label, &traces[i]});
  }
  const PlotAxis axis = a.y == "bpb" ? PlotAxis::kBitsPerByte : PlotAxis::kLoss;
  write_text_file(a.out, loss_plot_svg(runs, a.title, axis));
  std::printf("wrote %s: %zu run%s\n", a.out.c_str(), runs.size(), runs.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace

CommandRunner add_plot_command(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  app.add_option("traces", a->traces, "JSONL traces written by `reftrain train --trace`")
      ->required();
  app.add_option("--out", a->out, "the SVG file to write")->required();
  app.add_option("--title", a->title, "the plot's title")->capture_default_str();
  app.add_option("--y", a->y,
                 "the y axis: loss (nats per token) or bpb (bits per byte, comparable across "
                 "tokenizers)")
      ->capture_default_str()
      ->check(one_of({"loss", "bpb"}));
  return [a] { return run_plot(*a); };
}

}  // namespace reftrain
