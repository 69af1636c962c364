#include "core/train/run_config.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <type_traits>

namespace reftrain {

namespace {

using G = RunLineGroup;
using TC = TrainConfig;
using I = TrainField::Int;

std::vector<TrainField> make_fields() {
  return {
      {"batch", G::kTrain, "batch", "sequences per batch (B)", I{&TC::batch, 1, 1 << 20}},
      {"seq", G::kTrain, "seq", "tokens per sequence (T), at most the model's maximum",
       I{&TC::seq, 1, 1 << 20}},
      {"grad_accum", G::kTrain, "grad_accum",
       "micro-batches of B×T per optimizer step: the gradient is the mean over K·B·T positions "
       "(default 1)",
       I{&TC::grad_accum, 1, kMaxGradAccum}, /*required=*/false},
      {"steps", G::kTrain, "steps", "optimizer steps", I{&TC::steps, 1, INT32_MAX}},
      {"warmup", G::kTrain, "warmup", "linear warmup steps", I{&TC::warmup, 0, INT32_MAX}},
      {"schedule", G::kTrain, "schedule", "learning-rate schedule after warmup", &TC::schedule},
      {"lr", G::kTrain, "lr", "peak learning rate", &TC::lr},
      {"min_lr", G::kTrain, "min_lr", "learning rate at the end of the cosine decay", &TC::min_lr},
      {"val_every", G::kTrain, "val_every", "validation loss every N steps (0 = only at the end)",
       I{&TC::val_every, 0, INT32_MAX}},
      {"val_batches", G::kTrain, "val_batches", "batches averaged for one validation loss",
       I{&TC::val_batches, 0, 1 << 20}},
      {"z_loss", G::kTrain, "z_loss",
       "z in loss = CE + z·mean(logsumexp²) (preset: 0 gpt2, 1e-4 llama)", &TC::z_loss},
      {"precision", G::kTrain, "precision",
       "fp32; mixed: matmuls read the fp16 weight mirror; bf16: every product (linear and "
       "attention) in bf16 with f32 sums, the rest fp32; bf16-pure: bf16's products, and the "
       "weights bf16 values (no fp32 master), each update rounded stochastically; bf16-kahan: "
       "the same, each update rounded to nearest with a bf16 compensation (default fp32)",
       &TC::precision},
      {"attention", G::kTrain, "attention",
       "fused (online softmax, keeps the row logsumexp) or materialised (the reference, keeps "
       "the T×T probabilities) (default fused)",
       &TC::attention},
      {"matmul", G::kTrain, "matmul",
       "linear-layer GEMM: naive, tiled, blocked or eigen (default "
       "blocked)",
       &TC::matmul},
      {"kernels", G::kTrain, "kernels",
       "fast (default), or reference: every kernel's scalar reference, the naive matmul and the "
       "materialised attention, model and optimizer",
       &TC::kernels, /*required=*/false},
      {"optimizer", G::kOptimizer, "name",
       "adamw (fp32 state) or adamw8bit (8-bit m and v, one scale per 256 elements)",
       &TC::optimizer},
      {"beta1", G::kOptimizer, "beta1", "AdamW beta1", &TC::beta1},
      {"beta2", G::kOptimizer, "beta2", "AdamW beta2", &TC::beta2},
      {"eps", G::kOptimizer, "eps", "AdamW epsilon", &TC::eps},
      {"wd", G::kOptimizer, "wd", "AdamW weight decay (matrices and embeddings only)", &TC::wd},
      {"clip", G::kOptimizer, "clip", "max global gradient norm (0 = off)", &TC::clip},
      {"seed", G::kTop, "seed", "seed for init, batches and sampling (0 .. 2^64-1)", &TC::seed},
  };
}

// Reads field `f` of `j` into `t`.
void read_field(const TrainField& f, const JsonFields& j, TrainConfig& t) {
  std::visit(
      [&](auto m) {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, TrainField::Int>) {
          t.*m.member = int(j.integer(f.key, m.lo, m.hi));
        } else if constexpr (std::is_same_v<M, float TC::*>) {
          t.*m = j.real32(f.key);
        } else if constexpr (std::is_same_v<M, uint64_t TC::*>) {
          t.*m = j.unsigned64(f.key);
        } else {
          using E = std::remove_reference_t<decltype(t.*m)>;
          t.*m = j.choice<E>(f.key);
        }
      },
      f.member);
}

}  // namespace

const std::vector<TrainField>& train_fields() {
  static const std::vector<TrainField> fields = make_fields();
  return fields;
}

const TrainField& train_field(const std::string& key) {
  for (const TrainField& f : train_fields()) {
    if (key == f.key) return f;
  }
  throw std::logic_error("no training field '" + key + "'");
}

std::string field_flag(const TrainField& f) {
  std::string flag = std::string("--") + f.key;
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

Json field_json(const TrainField& f, const TrainConfig& t) {
  return std::visit(
      [&](auto m) -> Json {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, TrainField::Int>) {
          return t.*m.member;
        } else if constexpr (std::is_same_v<M, float TC::*>) {
          return json_float(t.*m);
        } else if constexpr (std::is_same_v<M, uint64_t TC::*>) {
          return t.*m;
        } else {
          return enum_name(t.*m);
        }
      },
      f.member);
}

Json train_config_json(const TrainConfig& t) {
  Json j = Json::object();
  for (const TrainField& f : train_fields()) j[f.key] = field_json(f, t);
  return j;
}

TrainConfig parse_train_config(const Json& j) {
  const JsonFields fields(j, "config.train");
  TrainConfig t;
  for (const TrainField& f : train_fields()) {
    if (f.required || fields.has(f.key)) read_field(f, fields, t);
  }
  return t;
}

Json run_line_group(const TrainConfig& t, RunLineGroup group) {
  Json j = Json::object();
  for (const TrainField& f : train_fields()) {
    if (f.group == group) j[f.run_key] = field_json(f, t);
  }
  return j;
}

LrSchedule lr_schedule(const TrainConfig& t) {
  return {t.lr, t.min_lr, t.warmup, t.steps, t.schedule};
}

Json schedule_json(const TrainConfig& t) {
  return {{"kind", enum_name(t.schedule)},
          {"lr", json_float(t.lr)},
          {"min_lr", json_float(t.min_lr)},
          {"warmup", t.warmup},
          {"steps", t.steps}};
}

// ---- JsonFields ---------------------------------------------------------------------------------

JsonFields::JsonFields(Json j, std::string where) : j_(std::move(j)), where_(std::move(where)) {
  if (!j_.is_object()) throw std::runtime_error(where_ + " is not a JSON object");
}

int64_t JsonFields::integer(const char* key, int64_t lo, int64_t hi) const {
  const Json& v = at(key);
  if (!v.is_number_integer()) bad(key, "an integer");
  const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
  if (!negative && v.get<uint64_t>() > uint64_t(hi)) bad(key, "at most " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo) bad(key, "at least " + std::to_string(lo));
  return x;
}

uint64_t JsonFields::unsigned64(const char* key) const {
  const Json& v = at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    bad(key, "an integer >= 0");
  }
  return v.get<uint64_t>();
}

double JsonFields::real(const char* key) const {
  const Json& v = at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) bad(key, "a finite number");
  return v.get<double>();
}

float JsonFields::real32(const char* key) const {
  const double d = real(key);
  if (std::fabs(d) > double(FLT_MAX)) bad(key, "within the float range");
  const float x = float(d);
  for (float c : {x, std::nextafter(x, -FLT_MAX), std::nextafter(x, FLT_MAX)}) {
    if (json_float(c) == d) return c;
  }
  bad(key, "a float value as reftrain writes it");
}

std::string JsonFields::text(const char* key) const {
  const Json& v = at(key);
  if (!v.is_string()) bad(key, "a string");
  return v.get<std::string>();
}

const Json& JsonFields::at(const char* key) const {
  if (!j_.contains(key)) throw std::runtime_error(where_ + " lacks \"" + key + "\"");
  return j_.at(key);
}

void JsonFields::bad(const char* key, const std::string& want) const {
  throw std::runtime_error(where_ + "." + key + " must be " + want);
}

}  // namespace reftrain
