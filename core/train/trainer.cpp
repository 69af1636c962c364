#include "core/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/base/error.h"
#include "core/train/run_config.h"
#include "optim/grad_accum.h"
#include "simd/simd.h"

namespace reftrain {

namespace {
BatchSampler::Mode sampler_mode(const Dataset& d) {
  return d.kind == "llmc-tokens" ? BatchSampler::Mode::kSequential : BatchSampler::Mode::kRandom;
}

// The data, once its token ids fit the vocabulary and each split fills a batch: checked before
// the model's buffers are allocated, so bad data fails fast and small.
Dataset checked(Dataset data, const ModelConfig& model, const TrainConfig& train) {
  check_vocab(data, model.vocab);
  const BatchSampler::Mode mode = sampler_mode(data);
  check_batch_fits(data.train, "train", data.source, train.batch, train.seq, mode);
  check_batch_fits(data.val, "val", data.source, train.batch, train.seq, mode);
  check_val_batches(data, train);
  return data;
}
}  // namespace

void check_val_batches(const Dataset& data, const TrainConfig& train) {
  const size_t per_batch = size_t(train.batch) * size_t(train.seq);
  const size_t split_batches = (data.val.size() + per_batch - 1) / per_batch;
  const size_t most = std::max(kMinValBatchesBound, kValRereads * split_batches);
  if (size_t(train.val_batches) <= most) return;
  throw input_error("val_batches " + std::to_string(train.val_batches) +
                    " would read the val split of " + data.source + " (" +
                    std::to_string(data.val.size()) + " tokens, " + std::to_string(split_batches) +
                    " batches of " + std::to_string(per_batch) + ") more than " +
                    std::to_string(kValRereads) + " times per validation; at most " +
                    std::to_string(most) + " (--val-batches)");
}

MemoryEstimate estimate_memory(const ModelConfig& model, const TrainConfig& t, int ranks) {
  const ParamLayout layout = param_layout(model);
  // The f16 or bf16 weight mirror: two bytes per float of the mega-buffer; in bf16, what
  // decoding keeps packed too, the weights and the cache's keys and values (a run samples at its
  // end).
  const size_t mirror = (t.precision != Precision::kFp32 ? layout.total() * 2 : 0) +
                        bf16_decode_weight_bytes(model, t.precision, t.kernels, t.seq);
  const size_t bf16 = bf16_operand_bytes(model, t.precision, t.batch, t.seq) +
                      bf16_workspace_bytes(model, t.precision, t.kernels, t.batch, t.seq);
  // Rank 0's shard: the shards differ by less than one norm chunk.
  const ZeroShard shard = zero_shard(layout.wd_end(), layout.total(), 0, ranks);
  const size_t state = optimizer_state_bytes(t.optimizer, layout.wd_end(), shard.state,
                                             t.precision == Precision::kBf16Kahan);
  const size_t grad_sum = ranks > 1          ? (size_t(ranks) + 1) * shard.window.size() * 4
                          : t.grad_accum > 1 ? layout.total() * sizeof(float)
                                             : 0;
  return {layout.num_params(), 2 * layout.total() * sizeof(float) + grad_sum + state + mirror,
          state,
          activation_floats(model, t.batch, t.seq, t.attention) * sizeof(float) +
              matmul_workspace_bytes(model, t.precision, t.matmul, t.batch * t.seq) + bf16};
}

void check_memory(const MemoryEstimate& need, const MemoryLimit& limit, const std::string& fix) {
  if (limit.bytes == 0 || need.total() <= limit.bytes) return;
  const auto mib = [](size_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; };
  throw input_error(
      "this run needs about " + mib(need.total()) + " (the estimate: " + mib(need.param_bytes) +
      " parameters and optimizer state, " + mib(need.arena_bytes) + " activations) but " +
      mib(limit.bytes) + " is available (" + limit.source + "); " + fix);
}

Trainer::Trainer(const ModelConfig& model, const TrainConfig& train, Dataset data, Comm& comm)
    : train_(train),
      micro_batches_(MicroBatches::split(train.grad_accum, comm.size())),
      comm_(comm),
      data_(checked(std::move(data), model, train)),
      model_(make_model(model, model_options(train))),
      optimizer_(
          train.optimizer, model_->layout().wd_end(), model_->layout().total(), train.kernels,
          zero_shard(model_->layout().wd_end(), model_->layout().total(), comm.rank(), comm.size())
              .state,
          train.precision == Precision::kBf16Kahan),
      inputs_(size_t(train.batch) * train.seq),
      targets_(size_t(train.batch) * train.seq),
      train_batches_(data_.train, train.batch, train.seq, sampler_mode(data_), train.seed,
                     RngStream::kTrainData),
      val_batches_(data_.val, train.batch, train.seq, sampler_mode(data_), train.seed,
                   RngStream::kValData),
      schedule_(lr_schedule(train)),
      grad_sum_(train.grad_accum > 1 && comm.size() == 1 ? model_->layout().total() : 0) {
  if (comm.size() > 1) {
    dp_ = std::make_unique<DataParallel>(comm, model_->layout().wd_end(), model_->layout().total());
  }
  adopt_weights([&](bf16* lost) { model_->init_weights(train.seed, lost); });
}

void Trainer::adopt_weights(const std::function<void(bf16* lost)>& set) {
  if (!optimizer_.has_kahan()) return set(nullptr);
  AlignedBuffer<bf16> lost(model_->layout().total());
  set(lost.data());
  optimizer_.start_kahan(lost.data());
}

void Trainer::weights_loaded() {
  adopt_weights([&](bf16* lost) { model_->refresh_mirror(lost); });
}

StepResult Trainer::step(int k) {
  const auto t0 = std::chrono::steady_clock::now();
  const float loss = dp_ ? data_parallel_micro_batches(k) : accumulate_micro_batches(k);
  const float lr = learning_rate(schedule_, k);
  StepResult r{k + 1, loss, lr, std::nanf(""), std::nanf(""), 0.0, !std::isfinite(loss)};
  if (!r.skipped) {
    const AdamWHyper hp{lr, train_.beta1, train_.beta2, train_.eps, train_.wd};
    float* g = train_.grad_accum > 1 ? grad_sum_.data() : model_->grads();
    const GradStats stats = dp_ ? data_parallel_update(hp)
                                : optimizer_.step(model_->weights(), g, model_->weight_mirror(), hp,
                                                  train_.clip, int(++updates_));
    r.grad_norm = stats.grad_norm, r.clip = stats.clip;
  }
  const auto t1 = std::chrono::steady_clock::now();
  r.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  return r;
}

// Step k reads micro-batches k·K .. k·K + K-1 (so the data position counts micro-batches). With
// K = 1 the gradient stays in the model's buffer, as it always has; with K > 1 each backward
// starts from zero and is added to grad_sum_ in micro-batch order (optim/grad_accum.h). A loss
// that is not finite ends the step early and leaves both buffers zero.
float Trainer::accumulate_micro_batches(int k) {
  const int B = train_.batch, T = train_.seq, K = train_.grad_accum;
  double sum = 0.0;  // the K losses, in micro-batch order
  for (int j = 0; j < K; ++j) {
    train_batches_.fill(uint64_t(k) * uint64_t(K) + uint64_t(j), inputs_.data(), targets_.data());
    const float loss = model_->forward(inputs_.data(), targets_.data(), B, T);
    if (!std::isfinite(loss)) {
      if (K > 1) grad_sum_.zero();
      return loss;
    }
    model_->backward();
    if (K == 1) return loss;
    accumulate_grad(grad_sum_.data(), model_->grads(), grad_sum_.size(), j == 0);
    sum += loss;
  }
  return static_cast<float>(sum / K);
}

// Round j: micro-batch k·M + j·N + rank on this rank, then the exchange that adds the round's N
// gradients in micro-batch order. Every rank sees every loss, so all skip a non-finite step
// together, at the micro-batch where one process would have stopped, with its loss.
float Trainer::data_parallel_micro_batches(int k) {
  const int B = train_.batch, T = train_.seq, M = micro_batches_.total;
  const int N = micro_batches_.ranks, K = micro_batches_.per_rank();
  std::vector<float> losses;  // micro-batch order
  for (int j = 0; j < K; ++j) {
    const uint64_t index = uint64_t(k) * uint64_t(M) + uint64_t(j) * N + uint64_t(comm_.rank());
    train_batches_.fill(index, inputs_.data(), targets_.data());
    const std::vector<float> round =
        dp_->gather(model_->forward(inputs_.data(), targets_.data(), B, T));
    for (const float loss : round) {
      if (!std::isfinite(loss)) return loss;
    }
    losses.insert(losses.end(), round.begin(), round.end());
    model_->backward();
    dp_->add_round(model_->grads(), j == 0);
  }
  double sum = 0.0;
  for (const float loss : losses) sum += loss;
  return static_cast<float>(sum / M);
}

// The norm from every rank's chunks, this rank's shard of the update, then the weights shared.
GradStats Trainer::data_parallel_update(const AdamWHyper& hp) {
  const GradStats stats = finalize_grad_stats(dp_->norm_sq(train_.kernels), train_.clip);
  optimizer_.apply(model_->weights(), dp_->window(), dp_->shard().window.begin,
                   model_->weight_mirror(), stats, hp, int(++updates_));
  dp_->share_weights(model_->weights(), model_->weight_mirror());
  return stats;
}

std::unique_ptr<OptimizerState> Trainer::gather_optimizer() {
  return dp_ ? dp_->gather_state(optimizer_) : nullptr;
}

namespace {
// The model's shape and, per family, the conventions a GPU twin must match.
Json describe_model(const ModelConfig& m, size_t params) {
  Json j = {{"arch", enum_name(m.arch)},      {"layers", m.layers},   {"heads", m.heads},
            {"channels", m.channels},         {"max_seq", m.max_seq}, {"vocab", m.vocab},
            {"padded_vocab", m.padded_vocab}, {"params", params}};
  if (m.arch == Arch::kGpt2) {
    j["norm"] = {{"kind", "layernorm"}, {"eps", 1e-5}};
    j["ffn"] = {{"kind", enum_name(m.activation)}, {"width", 4 * m.channels}};
    j["tied_lm_head"] = true;
  } else {
    j["norm"] = {{"kind", "rmsnorm"}, {"eps", 1e-5}};
    j["ffn"] = {{"kind", "swiglu"}, {"width", m.ffn}};
    j["rope"] = {{"theta", m.rope_theta},
                 {"convention", "rotate_half"},
                 {"pairing", "i with i + head_size/2"},
                 {"positions", "0..T-1"}};
    j["tied_lm_head"] = false;
  }
  return j;
}

// "bytes", "llm.c token ids" (no tokenizer known), or a BPE tokenizer's kind, source, hash and
// vocabulary size.
Json describe_tokenizer(const Tokenizer* tokenizer) {
  const TokenizerRecord r = tokenizer_record(tokenizer);
  if (r.kind == "bytes") return "bytes";
  if (r.kind == "none") return "llm.c token ids";
  return {
      {"kind", r.kind}, {"source", r.source}, {"hash", data_hash_text(r.hash)}, {"vocab", r.vocab}};
}

// The optimizer's values and which tensors decay.
Json optimizer_line(const TrainConfig& t) {
  Json j = run_line_group(t, RunLineGroup::kOptimizer);
  j["decay"] = "matrices and embeddings (the first layout range)";
  return j;
}

}  // namespace

Json Trainer::describe(const std::string& preset, const std::string& init) const {
  const ModelConfig& m = model_->config();
  const TrainConfig& t = train_;
  return {
      {"type", "run"},
      {"version", REFTRAIN_VERSION},
      {"build", REFTRAIN_BUILD_FLAGS},
      {"simd", simd::arch_name()},
      {"preset", preset},
      {"model", describe_model(m, model_->layout().num_params())},
      {"train", run_line_group(t, RunLineGroup::kTrain)},
      {"optimizer", optimizer_line(t)},
      {"seed", t.seed},
      {"init", init},
      {"rng", "philox4x32-10"},
      {"data",
       {{"kind", data_.kind},
        {"source", data_.source},
        {"hash", data_hash_text(data_.hash)},
        {"train_tokens", data_.train.size()},
        {"val_tokens", data_.val.size()},
        {"train_bytes", data_.train_bytes},
        {"val_bytes", data_.val_bytes},
        {"tokenizer", describe_tokenizer(data_.tokenizer.get())}}},
  };
}

float Trainer::validate() {
  const int B = train_.batch, T = train_.seq;
  int n = train_.val_batches > 0 ? train_.val_batches : 1;
  if (sampler_mode(data_) == BatchSampler::Mode::kSequential) {
    const int available = int((data_.val.size() - 1) / (size_t(B) * T));
    n = std::min(n, available);
  }
  double sum = 0.0;
  const int N = comm_.size();
  for (int first = 0; first < n; first += N) {  // batches first .. first+N-1, one per rank
    const int k = first + comm_.rank();
    float loss = 0.0f;
    if (k < n) {
      val_batches_.fill(uint64_t(k), inputs_.data(), targets_.data());
      loss = model_->forward(inputs_.data(), targets_.data(), B, T);
    }
    if (N == 1) {
      sum += loss;
      continue;
    }
    const std::vector<float> losses = dp_->gather(loss);
    for (int r = 0; r < N && first + r < n; ++r) sum += losses[size_t(r)];
  }
  return static_cast<float>(sum / n);
}

std::vector<int32_t> Trainer::sample(const std::vector<int32_t>& prompt,
                                     const SampleOptions& options,
                                     const std::function<void(int32_t)>& on_token) {
  return sample_tokens(*model_, train_.seq, prompt, options, on_token);
}

}  // namespace reftrain
