#include "core/golden/golden_run.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "core/base/error.h"
#include "core/formats/atomic_file.h"
#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "core/golden/compare.h"
#include "core/model/model.h"
#include "core/train/run.h"
#include "core/train/run_config.h"
#include "core/train/trainer.h"
#include "optim/schedule.h"

namespace reftrain {

namespace {

constexpr int kFormatVersion = 1;

std::vector<int64_t> shape64(std::initializer_list<int64_t> s) {
  return std::vector<int64_t>(s);
}

void write_json(const std::string& path, const Json& j) {
  write_text_file(path, json_text(j, 2) + "\n");
}

// The kernels of one step in dispatch order, as a GPU backend runs them.
Json pipeline(const ModelConfig& m, const TrainConfig& t) {
  Json p = Json::array();
  if (m.arch == Arch::kGpt2) {
    p.push_back("embed_forward: x = wte[tok] + wpe[t]");
    p.push_back(
        "per layer: layernorm_forward (ln_1), linear_forward (attn.c_attn, bias), "
        "attention_forward, linear_forward (attn.c_proj), residual_forward, layernorm_forward "
        "(ln_2), linear_forward (mlp.c_fc), gelu_forward, linear_forward (mlp.c_proj), "
        "residual_forward");
    p.push_back(
        "layernorm_forward (ln_f); linear_forward (lm_head = wte, no bias, all Vp columns)");
  } else {
    p.push_back("token_embed_forward: x = embed_tokens[tok]");
    p.push_back(
        "per layer: rmsnorm_forward (input_layernorm), linear_forward q, k, v, rope_forward q "
        "and k, attention_forward, linear_forward (o_proj), residual_forward, rmsnorm_forward "
        "(post_attention_layernorm), linear_forward gate and up, swiglu_forward, "
        "linear_forward (down_proj), residual_forward");
    p.push_back("rmsnorm_forward (model.norm); linear_forward (lm_head, all Vp columns)");
  }
  p.push_back("crossentropy_forward_backward: loss = mean CE + z*mean(lse^2), dlogits fused");
  p.push_back("backward: every forward kernel's backward in reverse order, gradients accumulated");
  p.push_back("reduce_norm_sq over the whole gradient mega-buffer; finalize_grad_stats");
  const bool eight = t.optimizer == Optimizer::kAdamW8bit;
  const bool mixed = t.precision == Precision::kMixed, bf16 = bf16_products(t.precision);
  const std::string update = eight                                  ? "adamw_8bit_update"
                             : mixed                                ? "adamw_update_f16"
                             : t.precision == Precision::kBf16Pure  ? "adamw_update_bf16_sr"
                             : t.precision == Precision::kBf16Kahan ? "adamw_update_bf16_kahan"
                             : bf16                                 ? "adamw_update_bf16"
                                                                    : "adamw_update";
  p.push_back(update + " on [0, wd_end) with wd, then on [wd_end, floats) with wd = 0");
  // The 8-bit kernel writes no mirror: a cast pass does (optim/optimizer.h).
  if (eight && mixed) p.push_back("cast_f32_to_f16 of the whole weight buffer into the mirror");
  if (eight && bf16) {
    p.push_back("cast_f32_to_bf16 of the whole weight buffer into the bf16 mirror");
  }
  return p;
}

// config.json's "mixed_precision": what a GPU replay must do besides the fp32 pipeline.
std::string mixed_precision_text(Precision p) {
  switch (p) {
    case Precision::kBf16Pure:
      return mixed_precision_text(Precision::kBf16) +
             "; bf16-pure: no fp32 master, the weights are bf16 values: the initial ones rounded "
             "to nearest even, each step's by adamw_update_bf16_sr (stochastic rounding, its "
             "noise keyed by the run's seed folded to 32 bits, low ^ high, the step and each "
             "element's index in the mega-buffer)";
    case Precision::kBf16Kahan:
      return mixed_precision_text(Precision::kBf16) +
             "; bf16-kahan: no fp32 master, the weights are bf16 values: the initial ones rounded "
             "to nearest even, each step's by adamw_update_bf16_kahan (the step plus a bf16 "
             "compensation per weight added to the weight and rounded to nearest even; what the "
             "rounding lost becomes the next compensation). The compensation starts as what "
             "rounding the drawn weights lost: init.safetensors' optimizer.kahan.<name>";
    case Precision::kMixed:
      return "every matmul that reads a weight reads its fp16 mirror f16(clamp(w, +-65504)) "
             "(round to nearest even), widened to f32";
    case Precision::kBf16:
      return "bf16: every linear_forward/_backward and attention_forward/_backward is its _bf16 "
             "kernel (materialised attention): each operand rounded by cast_f32_to_bf16 (round "
             "to nearest even, bf16 subnormals to 0, NaN to 0x7FC0) as it enters, weights read "
             "from the bf16 mirror; products in the canonical bf16 order (per output: K in "
             "blocks of 32, the block's even-k and odd-k products in two fp32 fma chains from "
             "+0, then c = c + (even + odd); subnormal inputs read as 0, subnormal results "
             "flushed after rounding: the band where a GPU may differ); the rest fp32";
    case Precision::kFp32:
      break;
  }
  return "none";
}

// config.json: the run line of `train --trace` without what names the build, plus the lr of
// every step, the loss, the pipeline and the files.
Json golden_config(const Trainer& trainer, const Preset& preset, const std::string& init) {
  const TrainConfig& t = trainer.train_config();
  Json j = {{"format", "reftrain-golden-run"}, {"format_version", kFormatVersion}};
  const Json run = trainer.describe(preset.name, init);
  for (const auto& [key, value] : run.items()) {
    if (key != "type" && key != "build" && key != "simd") j[key] = value;
  }
  // A golden run is the fast kernels' run (the command has no --kernels), and its config.json
  // predates the option: it is not repeated there.
  j["train"].erase("kernels");
  // Nor the splits' byte counts (for bits per byte), which came later: the pinned files stay.
  j["data"].erase("train_bytes"), j["data"].erase("val_bytes");
  Json lrs = Json::array();
  for (int k = 0; k < t.steps; ++k) lrs.push_back(json_float(learning_rate(lr_schedule(t), k)));
  j["schedule"] = schedule_json(t);
  j["schedule"]["lrs"] = lrs;
  j["loss"] = {
      {"kind", "mean cross-entropy over B*T positions (first V of Vp logits) + z*mean(lse^2)"},
      {"z", json_float(t.z_loss)}};
  j["mixed_precision"] = mixed_precision_text(t.precision);
  j["pipeline"] = pipeline(preset.model, t);
  j["files"] = {{"init", "init.safetensors"},
                {"batches", "batches.safetensors"},
                {"trace", "trace.jsonl"},
                {"debug_state", "debug_state.safetensors"},
                {"build", "build.json"}};
  return j;
}

// The initial weights; in bf16-kahan also the compensation they start with, what rounding the
// drawn weights to bf16 lost (optimizer.kahan.<name>, BF16), which a replay's state starts from.
void write_init(Trainer& trainer, const std::string& path) {
  const Model& model = trainer.model();
  const ParamLayout& layout = model.layout();
  const OptimizerState& opt = trainer.optimizer();
  SafetensorsFile f;
  Json tensors = Json::array();
  for (const ParamTensor& t : layout.tensors()) {
    const std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
    f.add(t.name, DType::kF32, shape, model.weights() + t.offset);
    if (opt.has_kahan())
      f.add("optimizer.kahan." + t.name, DType::kBF16, shape, &opt.kahan()[t.offset]);
    tensors.push_back({{"name", t.name},
                       {"shape", t.shape},
                       {"offset", t.offset},
                       {"numel", t.numel},
                       {"decay", t.decay}});
  }
  f.metadata["format"] = "reftrain-golden-init";
  f.metadata["layout"] = json_text(tensors, -1);
  f.metadata["mega_buffer"] = json_text(Json{{"dtype", "F32"},
                                             {"floats", layout.total()},
                                             {"wd_end", layout.wd_end()},
                                             {"align_floats", kAlignFloats}},
                                        -1);
  write_safetensors(path, f);
}

// z·mean(lse²) over the N rows of `logits` (the first V of Vp columns), in double: the z-loss
// part of a step's loss, for the trace.
double z_loss_part(const float* logits, int N, int V, int Vp, float z) {
  if (z == 0.0f) return 0.0;
  double sum = 0.0;
  for (int i = 0; i < N; ++i) {
    const float* x = logits + size_t(i) * Vp;
    double m = x[0], s = 0.0;
    for (int j = 1; j < V; ++j) m = std::max<double>(m, x[j]);
    for (int j = 0; j < V; ++j) s += std::exp(double(x[j]) - m);
    const double lse = m + std::log(s);
    sum += lse * lse;
  }
  return double(z) * sum / N;
}

// What `reftrain compare` allows a result's debug state by default: NMSE ≤ 1e-9 for the
// logits, the loss and every gradient; the token ids exactly. In a bf16 run the logits and the
// gradients are sums of bf16 products, judged as the bf16 kernels' outputs are: an f32 value a
// GPU computes a few ulps apart may round to the neighbouring bf16 before its product. The
// logits by NMSE: such an element of the lm_head's input moves its whole row of logits by ~2^-8
// of one term, which no per-element tolerance holds where a logit is near 0 (the gradients sum
// such rows over the batch and stay within the per-element one).
Json debug_state_tolerances(const SafetensorsFile& f, Precision precision) {
  Tolerance t;
  t.allclose = false, t.max_nmse = 1e-9;
  t.why =
      "fp32 in another summation order: the CPU PyTorch replay measures NMSE <= 3e-13 "
      "(docs/parity.md); TF32 or f16 matmuls (~1e-6) fail it, as they should";
  Tolerance logits = t;
  if (bf16_products(precision)) {
    t = bf16_tolerance();
    logits.max_nmse = 1e-6;
    logits.why =
        "a bf16 run's logits: an element of the lm_head's input that a GPU computes an ulp apart "
        "may round to the neighbouring bf16 and move its row of logits by ~2^-8 of one term "
        "(seen: tiny bf16-pure on lavapipe, 12 of 32768 logits past rtol 1.6e-2, NMSE 1.5e-8); "
        "the same replay with fp32 products gives NMSE 3.3e-6";
  }
  Json j = Json::object();
  for (const auto& kv : f.tensors) {
    if (kv.second.dtype == DType::kF32) j[kv.first] = (kv.first == "logits" ? logits : t).to_json();
  }
  return j;
}

// Step 1's gradients, recomputed on a model that starts from the same weights and sees the same
// batch (the trainer's own are zeroed by its update), with the logits and the loss.
void write_debug_state(const ModelConfig& cfg, const std::vector<float>& w0, const Trainer& trainer,
                       float loss, const std::string& path) {
  const TrainConfig& t = trainer.train_config();
  const int B = t.batch, T = t.seq;
  std::unique_ptr<Model> m = make_model(cfg, model_options(t));
  std::copy(w0.begin(), w0.end(), m->weights());
  m->refresh_mirror();
  const float again =
      m->forward(trainer.batch_inputs().data(), trainer.batch_targets().data(), B, T);
  if (!(again == loss)) throw std::logic_error("golden run: step 1 is not reproducible");
  m->backward();
  SafetensorsFile f;
  f.add("inputs", DType::kI32, shape64({B, T}), trainer.batch_inputs().data());
  f.add("targets", DType::kI32, shape64({B, T}), trainer.batch_targets().data());
  f.add("logits", DType::kF32, shape64({B, T, cfg.padded_vocab}), m->logits());
  f.add("loss", DType::kF32, shape64({1}), &loss);
  for (const ParamTensor& p : m->layout().tensors()) {
    f.add("grad." + p.name, DType::kF32, std::vector<int64_t>(p.shape.begin(), p.shape.end()),
          m->grads() + p.offset);
  }
  f.metadata["tolerances"] = json_text(debug_state_tolerances(f, t.precision), -1);
  f.metadata["format"] = "reftrain-golden-debug-state";
  f.metadata["step"] = "1";
  f.metadata["note"] = "gradients of step 1's loss at the initial weights, before clipping";
  write_safetensors(path, f);
}

// The kernel-call dump as safetensors: 1-D tensors by call, the call order and, per tensor, what
// compare applies: NMSE 1e-9 for f32 and f16 (a call's inputs already differ by rounding, so a
// per-element bound such as the cast fixture's one f16 ulp would blame the mirror for weights
// one ulp apart), one code for the 8-bit state, token ids exactly.
void write_dump(const KernelDump& d, int step, const std::string& path) {
  SafetensorsFile f;
  Json tolerances = Json::object();
  for (const KernelDump::Tensor& t : d.tensors()) {
    const DType dtype = t.dtype == "F32"    ? DType::kF32
                        : t.dtype == "F16"  ? DType::kF16
                        : t.dtype == "BF16" ? DType::kBF16
                        : t.dtype == "I32"  ? DType::kI32
                                            : DType::kU8;
    f.add(t.name, dtype, shape64({int64_t(t.numel)}), t.bytes.data());
    Tolerance f32;
    f32.allclose = false, f32.max_nmse = 1e-9, f32.why = "NMSE 1e-9, as the f32 kernel fixtures";
    if (dtype == DType::kU8) {
      tolerances[t.name] = {{"max_ulp", 1}, {"why", "one 8-bit code, as adamw_8bit_update's"}};
    } else if (dtype != DType::kI32) {
      // A bf16 call's tensors (and any BF16 one): bf16_tolerance, as compare's default.
      tolerances[t.name] = default_tolerance(t.name, SafeTensor{dtype, {}, {}}, f32).to_json();
    }
  }
  f.metadata["format"] = "reftrain-kernel-dump";
  f.metadata["step"] = std::to_string(step);
  f.metadata["calls"] = json_text(Json(d.calls()));
  Json outputs = Json::object();
  for (size_t i = 0; i < d.calls().size(); ++i) outputs[d.calls()[i]] = d.outputs(i);
  f.metadata["outputs"] = json_text(outputs);
  f.metadata["tolerances"] = json_text(tolerances);
  write_safetensors(path, f);
}

// The golden run's part of each step: step `dump_step` recorded into a kernel-call dump, every
// step's batch kept for batches.safetensors, the z-loss part of the loss in its trace line, and
// step 1's debug state.
class GoldenSteps : public RunObserver {
 public:
  GoldenSteps(const ModelConfig& model, const TrainConfig& train, int dump_step, std::string dir,
              std::vector<float> w0)
      : model_(model),
        train_(train),
        dump_step_(dump_step),
        dir_(std::move(dir)),
        w0_(std::move(w0)),
        inputs_(size_t(train.steps) * batch_size()),
        targets_(inputs_.size()) {}

  StepResult step(Trainer& trainer, int k) override {
    if (k + 1 != dump_step_) return trainer.step(k);
    KernelDump dump;
    trainer.model().set_dump(&dump), trainer.optimizer().set_dump(&dump);
    const StepResult r = trainer.step(k);
    trainer.model().set_dump(nullptr), trainer.optimizer().set_dump(nullptr);
    write_dump(dump, dump_step_, file("step-" + std::to_string(dump_step_) + ".safetensors"));
    return r;
  }

  void stepped(Trainer& trainer, const StepResult& r, StepRecord& line) override {
    if (!std::isfinite(r.loss)) {
      throw input_error("golden run: loss is not finite at step " + std::to_string(r.step));
    }
    const size_t BT = batch_size(), k = size_t(r.step - 1);
    std::copy(trainer.batch_inputs().begin(), trainer.batch_inputs().end(), &inputs_[k * BT]);
    std::copy(trainer.batch_targets().begin(), trainer.batch_targets().end(), &targets_[k * BT]);
    line.z_loss = float(z_loss_part(trainer.model().logits(), int(BT), model_.vocab,
                                    model_.padded_vocab, train_.z_loss));
    if (k == 0) write_debug_state(model_, w0_, trainer, r.loss, file("debug_state.safetensors"));
  }

  void write_batches() const {
    const int B = train_.batch, T = train_.seq, S = train_.steps;
    SafetensorsFile batches;
    batches.add("inputs", DType::kI32, shape64({S, B, T}), inputs_.data());
    batches.add("targets", DType::kI32, shape64({S, B, T}), targets_.data());
    batches.metadata["format"] = "reftrain-golden-batches";
    batches.metadata["note"] = "step k+1 reads inputs[k] and targets[k] ([B,T] each)";
    write_safetensors(file("batches.safetensors"), batches);
  }

  std::string file(const std::string& name) const {
    return (std::filesystem::path(dir_) / name).string();
  }

 private:
  size_t batch_size() const { return size_t(train_.batch) * size_t(train_.seq); }
  const ModelConfig& model_;
  const TrainConfig& train_;
  int dump_step_;
  std::string dir_;
  std::vector<float> w0_;
  std::vector<int32_t> inputs_, targets_;
};

}  // namespace

void write_golden_run(const Preset& preset, const TrainConfig& train, Dataset data,
                      const std::string& out_dir, int dump_step) {
  create_output_dir(out_dir);
  Trainer trainer(preset.model, train, std::move(data));
  const Model& model = trainer.model();
  GoldenSteps golden(preset.model, train, dump_step, out_dir,
                     std::vector<float>(model.weights(), model.weights() + model.layout().total()));
  const std::string init = "normal(0.02) from seed " + std::to_string(train.seed);
  write_json(golden.file("config.json"), golden_config(trainer, preset, init));
  write_json(golden.file("build.json"), {{"version", REFTRAIN_VERSION},
                                         {"build", REFTRAIN_BUILD_FLAGS},
                                         {"simd", trainer.describe(preset.name, init).at("simd")}});
  write_init(trainer, golden.file("init.safetensors"));
  RunLog log(golden.file("trace.jsonl"), {});
  log.write({{"type", "run"},
             {"format", "reftrain-golden-trace"},
             {"preset", preset.name},
             {"arch", enum_name(preset.model.arch)},
             {"precision", enum_name(train.precision)},
             {"optimizer", enum_name(train.optimizer)},
             {"steps", train.steps},
             {"seed", train.seed}});
  // No validation, and no wall time in the trace: every file is a pure function of the flags.
  LoopOptions steps;
  steps.stop = train.steps, steps.validate = false, steps.timed = false;
  run_loop(trainer, log, golden, steps);
  golden.write_batches();
}

}  // namespace reftrain
