// Loss curves as a standalone SVG: training loss (thin line) and validation loss (thick line with
// dots) against step, one colour per run, with a legend, axis ticks, axis labels and a title.
// `reftrain plot` draws traces read by read_trace; `reftrain train --plot` draws its own run.
#pragma once

#include <string>
#include <vector>

#include "core/formats/trace.h"

namespace reftrain {

struct PlotRun {
  std::string label;  // the legend's name for the run (a file name, by default)
  const Trace* trace;
};

// What the y axis shows: the loss (nats per token), or bits per byte (the val lines' val_bpb,
// the step lines' loss converted with the run line's train_tokens / train_bytes), which
// compares runs of different tokenizers.
enum class PlotAxis { kLoss, kBitsPerByte };

// The SVG document. Losses that are null (not finite) break a line instead of being drawn.
// Every series is a <g class="series" data-run=LABEL data-kind="train"|"val" data-points=N>,
// so a test (or a script) can find what was drawn. An input error when no run has a finite loss.
std::string loss_plot_svg(const std::vector<PlotRun>& runs, const std::string& title,
                          PlotAxis axis = PlotAxis::kLoss);

// The legend name of a trace file: its file name without the directory and the extension.
std::string trace_label(const std::string& path);

}  // namespace reftrain
