#include "core/model/model.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/base/rng.h"
#include "core/model/gpt2.h"
#include "core/model/llama.h"
#include "ops/attention.h"
#include "ops/linear.h"
#include "ops/loss.h"
#include "ops/residual.h"
#include "simd/parallel.h"

namespace reftrain {

namespace {
// Elements of the largest f16 weight a product reads: what the eigen variant widens at once.
size_t widen_elems(const ParamLayout& layout, Precision precision, MatmulKind matmul) {
  if (precision != Precision::kMixed || matmul != MatmulKind::kEigen) return 0;
  size_t most = 0;
  for (const ParamTensor& t : layout.tensors()) {
    if (t.shape.size() == 2) most = std::max(most, t.numel);
  }
  return most;
}

// The widest input (K) and output (O) of any product of the model: the MLP's hidden width and
// qkv's 3C; the lm_head's Vp is the widest output.
size_t widest_input(const ModelConfig& cfg) {
  return size_t(std::max({3 * cfg.channels, 4 * cfg.channels, cfg.ffn}));
}
size_t widest_output(const ModelConfig& cfg) {
  return std::max(widest_input(cfg), size_t(cfg.padded_vocab));
}

// The bf16 inputs a training step keeps for its backward (Model::input_bf16), per row of B·T:
// in each layer the norm output read by qkv (or q, k, v), qkv read by the attention, the
// attention's output read by its projection, the second norm's output read by the MLP's first
// product(s) and the MLP's hidden activation (F), 6C + F; then the final norm's
// output, read by the lm_head.
size_t bf16_kept_inputs(const ModelConfig& cfg, size_t N) {
  const size_t C = size_t(cfg.channels), F = size_t(mlp_width(cfg));
  return N * (size_t(cfg.layers) * (6 * C + F) + C);
}
}  // namespace

Model::Model(const ModelConfig& cfg, ParamLayout layout, const ModelOptions& o)
    : seq_(o.seq),
      cfg_(cfg),
      layout_(std::move(layout)),
      precision_(o.precision),
      kt_(kernel_table(o.kernels, o.matmul, o.attention)),
      z_loss_(o.z_loss),
      grad_accum_(o.grad_accum),
      w_(layout_.total()),
      g_(layout_.total()),
      w16_(o.precision == Precision::kMixed ? layout_.total() : 0),
      matmul_(o.matmul, 0, widen_elems(layout_, o.precision, o.matmul)) {
  if (!bf16_products(precision_)) return;
  if (o.attention != AttentionKind::kMaterialised) {
    throw std::invalid_argument("bf16 precision runs the materialised attention");
  }
  const size_t N = size_t(o.batch) * o.seq, TT = size_t(o.seq) * o.seq;
  wb16_ = AlignedBuffer<bf16>(layout_.total());
  b16_.mm = std::make_unique<MatmulBf16>(kt_.bf16);
  b16_.weights_mm = std::make_unique<MatmulBf16>(kt_.bf16);
  b16_.weights_mm->keep_weights(true);
  b16_.in = AlignedBuffer<bf16>(N * widest_input(cfg));
  b16_.dout = AlignedBuffer<bf16>(N * widest_output(cfg));
  b16_.att = AlignedBuffer<bf16>(size_t(o.batch) * cfg.heads * TT);
  b16_.kept = AlignedBuffer<bf16>(bf16_kept_inputs(cfg, N));
  b16_.kv_rows.assign(size_t(cfg.layers), 0);
  const size_t per_thread = size_t(b16_.mm->threads()) * TT;  // the attention backward's
  b16_.ds = AlignedBuffer<bf16>(per_thread);
  b16_.dp = AlignedBuffer<float>(per_thread);
}

double init_std(ParamInit init, int layers) {
  // 2·layers branches add into the residual stream; scaling each by 1/sqrt(2·layers) keeps the
  // stream's variance that of one branch whatever the depth (docs/training.md).
  return init == ParamInit::kNormalResidual ? 0.02 / std::sqrt(2.0 * layers) : 0.02;
}

void Model::init_weights(uint64_t seed, bf16* lost) {
  const CounterRng rng(seed, RngStream::kInit);
  noise_seed_ = stochastic_seed(seed);
  w_.zero();
  for (const ParamTensor& t : layout_.tensors()) {
    float* p = w_.data() + t.offset;
    if (t.init == ParamInit::kOnes || t.init == ParamInit::kZeros) {
      std::fill(p, p + t.numel, t.init == ParamInit::kOnes ? 1.0f : 0.0f);
      continue;
    }
    const double std_dev = init_std(t.init, cfg_.layers);
    const size_t n = t.init_rows < 0 ? t.numel : t.numel / size_t(t.shape[0]) * size_t(t.init_rows);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(std_dev * rng.normal(t.offset + i));
  }
  refresh_mirror(lost);
}

float Model::forward(const int32_t* inputs, const int32_t* targets, int B, int T) {
  last_ = {B, T, inputs, targets != nullptr};
  cached_ = 0;
  decoding_ = false;
  if (b16_.weights_mm) b16_.weights_mm->forget_weights();
  b16_.kept_at.clear();
  std::fill(b16_.kv_rows.begin(), b16_.kv_rows.end(), 0);
  tag_ = "embed";
  const float* res = embedding_forward(inputs, B, T);
  for (int l = 0; l < cfg_.layers; ++l) {
    tag_ = "h" + std::to_string(l);
    res = layer_forward(l, res, B, T);
  }
  tag_ = "head";
  return head_forward(res, targets, B * T);
}

const float* Model::prefill(const int32_t* tokens, int n) {
  if (n < 1 || n > seq_) throw std::logic_error("Model::prefill: n outside 1..seq()");
  forward(tokens, nullptr, 1, n);
  cached_ = n;
  return logits() + size_t(n - 1) * cfg_.padded_vocab;
}

const float* Model::decode(int32_t token) {
  if (cached_ < 1 || cached_ >= seq_) {
    throw std::logic_error("Model::decode needs a prefill and room in the cache");
  }
  const int pos = cached_;
  last_ = {1, 1, nullptr, false};
  decoding_ = true;
  tag_ = "embed";
  const float* res = embedding_decode(token, pos);
  for (int l = 0; l < cfg_.layers; ++l) {
    tag_ = "h" + std::to_string(l);
    res = layer_decode(l, res, pos);
  }
  tag_ = "head";
  head_forward(res, nullptr, 1);
  cached_ = pos + 1;
  return logits();
}

void Model::backward() {
  require_targets("Model::backward");
  const int B = last_.B, T = last_.T;
  tag_ = "head";
  float* dres = head_backward(B * T);
  for (int l = cfg_.layers - 1; l >= 0; --l) {
    tag_ = "h" + std::to_string(l);
    layer_backward(l, dres, B, T);
  }
  tag_ = "embed";
  embedding_backward(dres, last_.inputs, B, T);
}

void Model::require_targets(const char* who) const {
  if (!last_.has_targets)
    throw std::logic_error(std::string(who) + " needs a forward with targets");
}

void Model::refresh_mirror(bf16* lost) {
  if (precision_ == Precision::kMixed) {
    kt_.cast_f32_to_f16(w16_.data(), w_.data(), w_.size());
  } else if (bf16_products(precision_)) {
    b16_.weights_mm->forget_weights();
    kt_.cast_f32_to_bf16(wb16_.data(), w_.data(), w_.size());
    // bf16-pure and bf16-kahan keep no fp32 master: the weights are their bf16 values from here
    if (!bf16_only_weights(precision_)) return;
    if (lost) {
      const float* w = w_.data();
      const bf16* wb16 = wb16_.data();
#pragma omp parallel for schedule(static)
      for (size_t i = 0; i < w_.size(); ++i) lost[i] = f32_to_bf16(w[i] - bf16_to_f32(wb16[i]));
    }
    kt_.cast_bf16_to_f32(w_.data(), wb16_.data(), w_.size());
  }
}

void Model::residual_fwd(float* out, const float* a, const float* b, size_t n) const {
  traced("residual_forward", {out, a, b}, {{"n", n}}, [&] { kt_.residual_forward(out, a, b, n); });
}

void Model::residual_bwd(float* da, float* db, const float* dout, size_t n) const {
  fresh_for_dump(da, n), fresh_for_dump(db, n);
  traced("residual_backward", {da, db, dout}, {{"n", n}},
         [&] { kt_.residual_backward(da, db, dout, n, false); });
}

// Every thread clears its share of 64 KiB blocks (simd::parallel_blocks): a backward step clears
// 18 [B·T, C] buffers per gpt2 layer (340 MB for baby at B8), which one thread writing them took
// 12-15 % of a 16-thread step (bench/RESULTS.md, issue 17). Zeros are zeros whoever writes them.
void Model::zero(float* p, size_t n) const {
  ProfileScope timer(profile_, "zero (backward scratch)");
  constexpr size_t kBlock = 16384;
  simd::parallel_blocks(n, kBlock,
                        [&](size_t begin, size_t end) { std::fill(p + begin, p + end, 0.0f); });
}

void Model::fresh_for_dump(float* p, size_t n) const {
  if (dump_) zero(p, n);
}

std::string Model::product_name(const KernelProfile* profile, const char* kernel, int N, int K,
                                int O) {
  if (!profile) return {};
  return std::string(kernel) + " " + std::to_string(N) + "x" + std::to_string(K) + "->" +
         std::to_string(O);
}

const f16* Model::mirror_of(const float* w) const {
  return precision_ == Precision::kMixed ? w16_.data() + (w - w_.data()) : nullptr;
}

// In the dump, a bias-free product has no `b` (forward) and no `db` (backward), and the
// backward is two calls, as on a GPU: backward-data, then backward-weight (with the bias).
void Model::linear_fwd(float* out, const float* inp, const float* w, const float* b, int N, int K,
                       int O) const {
  if (bf16_products(precision_)) return linear_fwd_bf16(out, inp, w, b, N, K, O);
  const f16* w16 = mirror_of(w);
  const std::string profile = product_name(profile_, "linear_forward", N, K, O);
  const std::initializer_list<Dim> dims = {{"N", size_t(N)}, {"K", size_t(K)}, {"O", size_t(O)}};
  if (w16) {
    traced_as(profile, "linear_forward_f16", {out, inp, w16, b}, dims,
              [&] { linear_forward(matmul_, out, inp, w16, b, N, K, O); });
  } else {
    traced_as(profile, "linear_forward", {out, inp, w, b}, dims,
              [&] { linear_forward(matmul_, out, inp, w, b, N, K, O); });
  }
}

void Model::linear_bwd(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, int N, int K, int O, Grad grad) const {
  if (dinp && grad == Grad::kFresh) fresh_for_dump(dinp, size_t(N) * K);
  if (bf16_products(precision_)) {
    return linear_bwd_bf16(dinp, dw, db, dout, inp, w, N, K, O, grad);
  }
  const f16* w16 = mirror_of(w);
  const bool accumulate = grad == Grad::kAdd;
  const std::initializer_list<Dim> dims = {{"N", size_t(N)}, {"K", size_t(K)}, {"O", size_t(O)}};
  if (dinp && w16) {
    traced_as(product_name(profile_, "linear_backward_data", N, K, O), "linear_backward_data_f16",
              {dinp, dout, w16}, dims,
              [&] { linear_backward_data(matmul_, dinp, dout, w16, N, K, O, accumulate); });
  } else if (dinp) {
    traced_as(product_name(profile_, "linear_backward_data", N, K, O), "linear_backward_data",
              {dinp, dout, w}, dims,
              [&] { linear_backward_data(matmul_, dinp, dout, w, N, K, O, accumulate); });
  }
  traced_as(product_name(profile_, "linear_backward_weight", N, K, O), "linear_backward_weight",
            {dw, db, dout, inp}, dims,
            [&] { linear_backward_weight(matmul_, dw, db, dout, inp, N, K, O); });
}

// The dump records the probabilities `att` only where the model keeps them (materialised);
// the fused kernel keeps each row's log-sum-exp in att's place, which no GPU twin binds.
void Model::attention_fwd(float* out, float* att, const float* qkv, int B, int T) const {
  if (bf16_products(precision_)) return attention_fwd_bf16(out, att, qkv, B, T);
  const bool fused = kt_.attention == AttentionKind::kFused;
  const int C = cfg_.channels, NH = cfg_.heads;
  traced("attention_forward", {out, fused ? nullptr : att, qkv},
         {{"B", size_t(B)}, {"T", size_t(T)}, {"C", size_t(C)}, {"NH", size_t(NH)}},
         [&] { kt_.attention_forward(out, att, qkv, B, T, C, NH); });
}

void Model::attention_bwd(float* dqkv, float* dp, const float* dout, const float* qkv,
                          const float* out, const float* att, int B, int T) const {
  const int C = cfg_.channels, NH = cfg_.heads;
  fresh_for_dump(dqkv, size_t(B) * T * 3 * C);
  if (bf16_products(precision_)) return attention_bwd_bf16(dqkv, dout, qkv, att, B, T);
  const bool fused = kt_.attention == AttentionKind::kFused;
  traced("attention_backward", {dqkv, nullptr, dout, qkv, fused ? nullptr : att},
         {{"B", size_t(B)}, {"T", size_t(T)}, {"C", size_t(C)}, {"NH", size_t(NH)}},
         [&] { kt_.attention_backward(dqkv, dp, dout, qkv, out, att, B, T, C, NH, false); });
}

void Model::attention_decode_fwd(float* out, float* att, const float* qkv, int l, int pos) const {
  if (bf16_products(precision_)) return attention_decode_bf16_fwd(out, qkv, l, pos);
  const int C = cfg_.channels, NH = cfg_.heads;
  traced("attention_decode", {out, nullptr, qkv}, {{"C", size_t(C)}, {"rows", size_t(pos) + 1}},
         [&] { kt_.attention_decode(out, att, qkv, pos, C, NH); });
}

float Model::mean_loss(float* losses, float* dlogits, const float* logits, const int32_t* targets,
                       int N) const {
  const int V = cfg_.vocab, Vp = cfg_.padded_vocab;
  const float dloss = 1.0f / float(int64_t(grad_accum_) * N);
  traced("crossentropy_forward_backward", {losses, dlogits, logits, targets},
         {{"N", size_t(N)}, {"Vp", size_t(Vp)}}, [&] {
           kt_.crossentropy_forward_backward(losses, dlogits, logits, targets, N, V, Vp, dloss,
                                             z_loss_);
         });
  ProfileScope timer(profile_, "loss mean (position order)");
  double sum = 0.0;  // in position order
  for (int i = 0; i < N; ++i) sum += losses[i];
  return static_cast<float>(sum / N);
}

ParamLayout param_layout(const ModelConfig& cfg) {
  return cfg.arch == Arch::kLlama ? llama_param_layout(cfg) : gpt2_param_layout(cfg);
}

size_t attention_state_floats(const ModelConfig& cfg, AttentionKind kind, int B, int T) {
  const size_t rows = size_t(B) * cfg.heads * T;
  return kind == AttentionKind::kFused ? rows : rows * T;
}

size_t attention_scratch_floats(const ModelConfig& cfg, AttentionKind kind, int B, int T) {
  return kind == AttentionKind::kFused ? 0 : size_t(B) * cfg.heads * T;
}

size_t activation_floats(const ModelConfig& cfg, int B, int T, AttentionKind attention) {
  return cfg.arch == Arch::kLlama ? Llama::activation_floats(cfg, B, T, attention)
                                  : Gpt2::activation_floats(cfg, B, T, attention);
}

size_t bf16_operand_bytes(const ModelConfig& cfg, Precision precision, int B, int T) {
  if (!bf16_products(precision)) return 0;
  const size_t N = size_t(B) * T, TT = size_t(T) * T, threads = size_t(omp_get_max_threads());
  const size_t halves = N * (widest_input(cfg) + widest_output(cfg)) + bf16_kept_inputs(cfg, N) +
                        size_t(B) * cfg.heads * TT + threads * TT;
  return halves * sizeof(bf16) + threads * TT * sizeof(float);
}

namespace {

// [O, K] of every linear product's weight: each layer's (as the families' layer_forward runs
// them), once per layer, and the lm_head's.
std::vector<std::pair<int, int>> linear_weights(const ModelConfig& cfg) {
  const int C = cfg.channels, F = mlp_width(cfg);
  const std::vector<std::pair<int, int>> layer =
      cfg.arch == Arch::kLlama
          ? std::vector<std::pair<int, int>>{{C, C}, {C, C}, {C, C}, {C, C}, {F, C}, {F, C}, {C, F}}
          : std::vector<std::pair<int, int>>{{3 * C, C}, {C, C}, {F, C}, {C, F}};
  std::vector<std::pair<int, int>> all;
  for (int l = 0; l < cfg.layers; ++l) all.insert(all.end(), layer.begin(), layer.end());
  all.emplace_back(cfg.padded_vocab, C);
  return all;
}

// A product's shape as MatmulBf16::workspace reads it (no operands).
GemmBf16 product(int M, int N, int K, Trans ta, Trans tb) {
  GemmBf16 g;
  g.M = M, g.N = N, g.K = K, g.ta = ta, g.tb = tb;
  return g;
}

}  // namespace

size_t bf16_decode_weight_bytes(const ModelConfig& cfg, Precision precision, Kernels kernels,
                                int T) {
  if (!bf16_products(precision)) return 0;
  const Bf16Path path = kernel_table(kernels).bf16;
  const int hs = cfg.channels / cfg.heads;
  size_t bytes = 0;
  for (const auto& [O, K] : linear_weights(cfg)) bytes += MatmulBf16::kept_weight_bytes(path, O, K);
  // each head's keys (T rows of hs) and values (hs columns over T) at a full window
  const size_t kv =
      MatmulBf16::kept_weight_bytes(path, T, hs) + MatmulBf16::kept_weight_bytes(path, hs, T);
  return bytes + size_t(cfg.layers) * cfg.heads * kv;
}

size_t bf16_workspace_bytes(const ModelConfig& cfg, Precision precision, Kernels kernels, int B,
                            int T) {
  if (!bf16_products(precision)) return 0;
  using W = MatmulBf16::Workspace;
  const Bf16Path path = kernel_table(kernels).bf16;
  const int threads = omp_get_max_threads(), N = B * T, hs = cfg.channels / cfg.heads;
  const Trans no = Trans::kNo, yes = Trans::kYes;
  W step, decode, head;  // the model's two engines, and one single-thread engine of the step's
  for (const auto& [O, K] : linear_weights(cfg)) {  // forward, backward data, backward weight
    for (const GemmBf16& g :
         {product(N, O, K, no, yes), product(N, K, O, no, no), product(O, K, N, yes, no)}) {
      step.grow(MatmulBf16::workspace(path, threads, false, g));
    }
    decode.grow(MatmulBf16::workspace(path, threads, true, product(1, O, K, no, yes)));
  }
  // a decoded token's attention against a full window, on decoding's engine
  for (const GemmBf16& g : {product(1, T, hs, no, yes), product(1, hs, T, no, no)}) {
    decode.grow(MatmulBf16::workspace(path, threads, true, g));
  }
  // the heads' products in the attention's forward and backward (ops/attention_bf16.cpp)
  for (const GemmBf16& g :
       {product(T, T, hs, no, yes), product(T, hs, T, no, no), product(T, hs, T, yes, no)}) {
    head.grow(MatmulBf16::workspace(path, 1, false, g));
  }
  return step.bytes() + decode.bytes() + size_t(threads) * head.bytes();
}

size_t matmul_workspace_bytes(const ModelConfig& cfg, Precision precision, MatmulKind matmul,
                              int rows) {
  const ParamLayout layout = param_layout(cfg);
  const int threads = omp_get_max_threads();
  size_t bytes = Matmul::workspace_bytes(matmul, threads, widen_elems(layout, precision, matmul));
  if (matmul != MatmulKind::kEigen) return bytes;
  // A linear's products have depth K (forward), O (input gradient) and rows (weight gradient);
  // every thread may hold Eigen's packing for the deepest at once.
  size_t packing = Matmul::eigen_packing_bytes(rows);
  for (const ParamTensor& t : layout.tensors()) {
    if (t.shape.size() != 2) continue;
    for (const int depth : t.shape) packing = std::max(packing, Matmul::eigen_packing_bytes(depth));
  }
  return bytes + size_t(threads) * packing;
}

std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& options) {
  if (cfg.arch == Arch::kLlama) return std::make_unique<Llama>(cfg, options);
  return std::make_unique<Gpt2>(cfg, options);
}

}  // namespace reftrain
