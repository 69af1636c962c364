// reftrain: a CPU GPT trainer and golden model. Subcommands live in apps/*_cmd.cpp.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/base/error.h"
#include "core/dist/comm.h"

namespace {

// The length of the well-formed UTF-8 sequence of 2 to 4 bytes at text[i], or 0.
size_t utf8_length(const std::string& text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  const size_t n = c >= 0xc2 && c <= 0xdf   ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return 0;
  }
  const unsigned char c1 = static_cast<unsigned char>(text[i + 1]);
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8 either.
  if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
      (c == 0xf4 && c1 > 0x8f)) {
    return 0;
  }
  return n;
}

// A whole message fit for one line of stderr: control bytes (a newline inside a flag's value) as
// \xNN, and when it is longer than `max_chars`, its middle cut (a 100 KB value the command line
// parser echoes), keeping the start and the end, where the reason is.
// Bytes that are not UTF-8 (a raw 0xFF quoted from a file by a parser's message) are \xNN too:
// a terminal would show them as garbage.
std::string one_line(const std::string& message, size_t max_chars = 400) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < message.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    const size_t n = utf8_length(message, i);
    if (c >= 0x80 && n > 0) {
      out += message.substr(i, n);
      i += n - 1;
    } else if (c < 0x20 || c >= 0x7f) {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    } else {
      out += char(c);
    }
  }
  if (out.size() <= max_chars) return out;
  const size_t keep = max_chars / 2;
  return out.substr(0, keep) + "...(" + std::to_string(out.size() - 2 * keep) + " bytes cut)..." +
         out.substr(out.size() - keep);
}

// Edits (insert, delete, replace, swap two neighbours) from a to b: "trian" is 1 from "train".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The message for a first argument that is no command: its name (quoted, cut) and the nearest
// command, where one is near; empty when the first argument is a command or a flag.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string given = argv[1];
  std::string nearest, names;
  size_t best = 3;  // more edits than 2: no suggestion
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == given) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
    const size_t d = edit_distance(given.substr(0, 64), sub->get_name());
    if (d < best) best = d, nearest = sub->get_name();
  }
  return "unknown command " + reftrain::printable(given) +
         (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") + " (commands: " + names +
         ")";
}

// The advice for running out of memory fits the command: only `train` has a batch to shrink;
// other commands ran out on their input (a plot of huge traces, a text to encode).
std::string out_of_memory(const CLI::App* command) {
  const std::string name = command ? command->get_name() : "";
  if (name == "train") {
    return "out of memory; train a smaller --batch or --seq, or a smaller preset (`reftrain "
           "presets` lists what each needs)";
  }
  return "out of memory in `reftrain " + name +
         "`: its input needs more memory than this machine has; give it a smaller input (or "
         "free memory)";
}

// Prints the error; one of several ranks also ends the others (they would wait for it forever).
int end_on_error(const std::string& message, int code) {
  reftrain::Comm& comm = reftrain::Comm::world();
  std::fflush(stdout);
  if (comm.size() == 1) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return code;
  }
  std::fprintf(stderr, "error: rank %d of %d: %s\n", comm.rank(), comm.size(), message.c_str());
  comm.abort(code);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace reftrain;
  // A file-size limit (ulimit -f) then makes write() fail with EFBIG, which the writers report
  // in one line, instead of killing the process mid-file.
  std::signal(SIGXFSZ, SIG_IGN);
  // `reftrain train | head -1`: a reader that goes away must not end the run (and lose its
  // checkpoint); writes to the closed pipe fail with EPIPE, which stdio records and ignores.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"reftrain " REFTRAIN_VERSION ": train small GPTs on the CPU, bit-reproducibly"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("reftrain ") + REFTRAIN_VERSION);
  std::map<CLI::App*, CommandRunner> runners;
  runners[app.add_subcommand("train", "train a preset on text or llm.c tokens")] = {};
  CLI::App* train = app.get_subcommand("train");
  runners[train] = add_train_command(*train);
  CLI::App* sample = app.add_subcommand("sample", "stream text generated by a checkpoint's model");
  runners[sample] = add_sample_command(*sample);
  CLI::App* eval = app.add_subcommand(
      "eval", "a checkpoint's loss, perplexity and bits per byte on a text file");
  runners[eval] = add_eval_command(*eval);
  CLI::App* plot = app.add_subcommand("plot", "plot train and validation loss of traces as SVG");
  runners[plot] = add_plot_command(*plot);
  CLI::App* presets = app.add_subcommand("presets", "list presets, parameter counts and memory");
  runners[presets] = add_presets_command(*presets);
  CLI::App* explain =
      app.add_subcommand("explain", "walk one kernel's math on a tiny example, step by step");
  runners[explain] = add_explain_command(*explain);
  CLI::App* golden =
      app.add_subcommand("golden", "write golden runs and kernel fixtures for GPU parity tests");
  runners[golden] = add_golden_command(*golden);
  CLI::App* compare =
      app.add_subcommand("compare", "compare a result with a golden trace, tensor file or run");
  runners[compare] = add_compare_command(*compare);
  CLI::App* tokenizer =
      app.add_subcommand("tokenizer", "train a BPE tokenizer, or encode and decode text with one");
  runners[tokenizer] = add_tokenizer_command(*tokenizer);
  CLI::App* exporter =
      app.add_subcommand("export", "write a checkpoint's model as a Hugging Face model directory");
  runners[exporter] = add_export_command(*exporter);
  CLI::App* kernels =
      app.add_subcommand("kernels", "list the kernel records, or print them as JSON or Markdown");
  runners[kernels] = add_kernels_command(*kernels);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = unknown_command(app, argc, argv);
    if (what.empty()) what = e.what();
    if (what.empty()) {
      what =
          "a subcommand is required: train, sample, eval, plot, presets, explain, golden, "
          "compare, tokenizer, export or kernels";
    }
    std::fprintf(stderr, "error: %s (see reftrain --help)\n", one_line(what).c_str());
    return kExitUsageError;
  }
  const CLI::App* command = nullptr;
  try {
    for (const auto& [sub, run] : runners) {
      if (!sub->parsed()) continue;
      command = sub;
      const int code = run();
      Comm::world().finalize();
      return code;
    }
  } catch (const UserError& e) {
    if (isatty(fileno(stdout))) std::printf("\n");  // end a progress line left open
    return end_on_error(one_line(e.what()), e.exit_code());
  } catch (const std::bad_alloc&) {
    return end_on_error(out_of_memory(command), kExitInputError);
  }
  return kExitUsageError;
}
