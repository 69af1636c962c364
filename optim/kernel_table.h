// The kernel table: one slot per kernel, filled the way BLIS fills a context — every slot's
// reference first (the plain-named scalar function: the teaching version and the oracle), then
// the fast kernels (`_fast`) and the run's variants (the matmul, the attention) as overrides of
// their slots. The models, the optimizer and data-parallel training call kernels through a table
// and never choose a version themselves; `--kernels reference` is simply the reference table.
// The records (ops/kernel_record.h) say what each slot's kernel binds.
#pragma once

#include <string>
#include <vector>

#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/bf16.h"
#include "ops/cast.h"
#include "ops/embed.h"
#include "ops/kernel_dump.h"
#include "ops/kernel_record.h"
#include "ops/kernels.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16.h"
#include "ops/norm.h"
#include "ops/residual.h"
#include "ops/rope.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"

namespace reftrain {

// One signature for both attention backwards: the materialised one reads att and uses dp as
// scratch, the fused one reads out and lse (in att's place).
using AttentionBackwardFn = void (*)(float* dqkv, float* dp, const float* dout, const float* qkv,
                                     const float* out, const float* att, int B, int T, int C,
                                     int NH, bool accumulate);

struct KernelTable {
  Kernels column;     // kReference: every slot its reference; kFast: the fast overrides
  MatmulKind matmul;  // the variant the linear products run on
  AttentionKind attention;
  Bf16Path bf16;  // the path of the bf16 products (reference, or the CPU's fastest)
  decltype(&embed_forward_fast) embed_forward;
  decltype(&embed_backward_fast) embed_backward;
  decltype(&token_embed_forward_fast) token_embed_forward;
  decltype(&token_embed_backward_fast) token_embed_backward;
  decltype(&layernorm_forward_fast) layernorm_forward;
  decltype(&layernorm_backward_fast) layernorm_backward;
  decltype(&rmsnorm_forward_fast) rmsnorm_forward;
  decltype(&rmsnorm_backward_fast) rmsnorm_backward;
  decltype(&rope_forward_fast) rope_forward;
  decltype(&rope_backward_fast) rope_backward;
  decltype(&attention_forward_fast<float>) attention_forward;  // att: probabilities or lse
  AttentionBackwardFn attention_backward;
  decltype(&attention_decode_fast<float>) attention_decode;
  decltype(&gelu_forward_fast) gelu_forward;
  decltype(&gelu_backward_fast) gelu_backward;
  decltype(&gelu_erf_forward_fast) gelu_erf_forward;
  decltype(&gelu_erf_backward_fast) gelu_erf_backward;
  decltype(&swiglu_forward_fast) swiglu_forward;
  decltype(&swiglu_backward_fast) swiglu_backward;
  decltype(&crossentropy_forward_backward_fast) crossentropy_forward_backward;
  decltype(&residual_forward_fast) residual_forward;
  decltype(&residual_backward_fast) residual_backward;
  decltype(&cast_f32_to_f16_fast) cast_f32_to_f16;
  decltype(&cast_f32_to_bf16_fast) cast_f32_to_bf16;
  decltype(&cast_bf16_to_f32_fast) cast_bf16_to_f32;
  decltype(&reduce_norm_sq_fast) reduce_norm_sq;
  decltype(&norm_sq_partials_fast) norm_sq_partials;
  decltype(&adamw_update_fast) adamw_update;
  decltype(&adamw_update_f16_fast) adamw_update_f16;
  decltype(&adamw_update_bf16_fast) adamw_update_bf16;
  decltype(&adamw_update_bf16_sr_fast) adamw_update_bf16_sr;
  decltype(&adamw_update_bf16_kahan_fast) adamw_update_bf16_kahan;
  decltype(&adamw_8bit_update_fast) adamw_8bit_update;
};

// Every slot its reference, on the naive matmul and the materialised attention.
KernelTable reference_kernels();
// The reference table with every fast kernel over its slot, on `matmul` and `attention`.
KernelTable fast_kernels(MatmulKind matmul = MatmulKind::kBlocked,
                         AttentionKind attention = AttentionKind::kFused);
// The table of a run's options. The reference column is the textbook code end to end, so it
// runs on the naive matmul and the materialised attention only: any other variant throws
// std::invalid_argument with a one-line message (the one place this rule is checked).
KernelTable kernel_table(Kernels column, MatmulKind matmul, AttentionKind attention);
// The table of a column on its default variants (what the optimizer needs).
KernelTable kernel_table(Kernels column);

// Every kernel's record, in pipeline order (the fixtures' order, then the kernels no fixture
// checks), and one by name (std::logic_error when there is none: a programming error).
const std::vector<KernelRecord>& kernel_records();
const KernelRecord& kernel_record(const std::string& name);

// Runs `run` as one call of kernel `kernel` (its record's name) recorded in `dump` under
// `layer` (nothing is recorded when dump is null): `tensors` are the call's non-scalar bindings
// in the record's order, `dims` the sizes their shapes name (ops/kernel_dump.h).
template <typename F>
void dump_call(KernelDump* dump, const std::string& layer, const char* kernel,
               std::initializer_list<KernelDump::Ptr> tensors, std::initializer_list<Dim> dims,
               F&& run) {
  const size_t call = dump ? dump->begin(layer, kernel_record(kernel), tensors, dims) : 0;
  run();
  if (dump) dump->end(call);
}

// The optimizer's records (the end of optim/adamw.cpp, adamw8bit.cpp and grad_accum.cpp).
std::vector<KernelRecord> grad_norm_records();
std::vector<KernelRecord> adamw_records();
std::vector<KernelRecord> adamw_8bit_records();
std::vector<KernelRecord> grad_accum_records();

}  // namespace reftrain
