// `reftrain eval`: a checkpoint's model on a text file, with the tokenizer it was trained with:
// loss per token, perplexity per token and bits per byte (core/train/eval.h), deterministic,
// with a progress line on stderr.
#include <omp.h>

#include <cstdio>
#include <memory>
#include <string>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "core/base/error.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "core/train/data.h"

namespace reftrain {

namespace {

struct EvalArgs {
  std::string ckpt, data, tokenizer;
  int batch = 0, threads = 0;
};

int run_eval(const EvalArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.ckpt.empty()) throw usage_error("--ckpt needs a checkpoint file or directory");
  if (a.data.empty()) throw usage_error("--data needs a text file");
  Checkpoint c = read_checkpoint(a.ckpt);
  const std::shared_ptr<const Tokenizer> tokenizer =
      reload_tokenizer(c.meta.data.tokenizer, a.tokenizer);
  if (!tokenizer) {
    throw usage_error(
        "this checkpoint's model reads llm.c token ids of unknown meaning; pass "
        "--tokenizer (gpt2 for GPT-2's ids) to evaluate it on text");
  }
  const std::vector<int32_t> ids = eval_ids("--data", a.data, *tokenizer);
  ModelOptions rows = model_options(c.meta.train);
  rows.batch = a.batch > 0 ? a.batch : c.meta.train.batch;
  std::unique_ptr<Model> model = make_model(c.meta.model, rows);
  restore_model(c, *model);
  c.file.tensors.clear();  // the model holds the weights now
  std::printf("eval %s on %s (%s tokenizer, %zu tokens, windows of %d)\n", c.path.c_str(),
              a.data.c_str(), tokenizer->kind().c_str(), ids.size(), c.meta.train.seq);
  const EvalResult e =
      evaluate_with_progress(*model, rows.batch, c.meta.train.seq, ids, *tokenizer);
  std::printf("%s\n", eval_summary(e).c_str());
  return 0;
}

}  // namespace

CommandRunner add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  app.add_option("--ckpt", a->ckpt,
                 "checkpoint file, or a directory (its newest checkpoint; RUN/best: the best)")
      ->required();
  app.add_option("--data", a->data, "the text file to evaluate on")->required();
  app.add_option("--tokenizer", a->tokenizer,
                 "the checkpoint's tokenizer where it is now (checked against its hash), or what "
                 "an llm.c model's ids mean (gpt2)");
  app.add_option("--batch", a->batch,
                 "windows per forward (default: the run's batch); the result does not change")
      ->transform(decimal_int(1, 1 << 16));
  app.add_option("--threads", a->threads, "OpenMP threads (default: all cores)")
      ->transform(decimal_int(1, 4096));
  return [a] { return run_eval(*a); };
}

}  // namespace reftrain
