// The kernel-call dump of one training step (`reftrain golden run --dump-step K`): every kernel
// call in execution order with its inputs, recorded before the call, and its outputs, after;
// a binding the call accumulates into is recorded both ways, as `<binding>_in` and `<binding>`.
// Call n of the step is named `NNNN.<layer>.<kernel>` (0000 first), its tensors
// `NNNN.<layer>.<kernel>.<binding>` with the binding names of the kernel fixtures, so the names
// sort in execution order and a GPU replay's dump of the same step pairs with it tensor for
// tensor (docs/webgpu.md, "Bisecting a divergence"). Off (a null pointer) in every other step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/bf16.h"
#include "ops/cast.h"
#include "ops/kernel_record.h"

namespace reftrain {

class KernelDump {
 public:
  // One tensor argument of a call, in the record's binding order: a pointer whose type names its
  // dtype, or null where this call binds nothing (a bias-free product's b, a structure the CPU
  // kernel takes in place of a GPU's uniform, the fused attention's lse).
  struct Ptr {
    Ptr(std::nullptr_t) {}
    Ptr(const float* p) : data(p), dtype("f32") {}
    Ptr(const int32_t* p) : data(p), dtype("i32") {}
    Ptr(const f16* p) : data(p), dtype("f16") {}
    Ptr(const bf16* p) : data(p), dtype("bf16") {}
    Ptr(const uint32_t* p) : data(p), dtype("u8 (u32 words)") {}  // packed 8-bit codes
    const void* data = nullptr;
    const char* dtype = "";
  };
  struct Tensor {
    std::string name, dtype;
    size_t numel;
    std::vector<uint8_t> bytes;
  };

  // Starts the next call of kernel `k`: `tensors` are its non-scalar bindings in the record's
  // order, `dims` the sizes its shapes name. Records the inputs and the before-values of the
  // in-out bindings; returns the call's index for end(). Throws std::logic_error when the
  // arguments do not match the record (a programming error).
  size_t begin(const std::string& layer, const KernelRecord& k, std::initializer_list<Ptr> tensors,
               std::initializer_list<Dim> dims) {
    char index[16];
    std::snprintf(index, sizeof index, "%04zu", calls_.size());
    calls_.push_back(std::string(index) + "." + layer + "." + k.name);
    pending_.emplace_back();
    outputs_.emplace_back();
    const Ptr* p = tensors.begin();
    for (const KernelBinding& b : k.bindings) {
      if (b.role == BindingRole::kScalar) continue;
      if (p == tensors.end()) mismatch(k, "fewer tensors than the record binds");
      const Ptr arg = *p++;
      if (!arg.data || b.role == BindingRole::kScratch) continue;
      if (b.dtype != arg.dtype) mismatch(k, b.name + " is " + b.dtype + ", given " + arg.dtype);
      const Arg a{b.name, dump_dtype(b.dtype), arg.data, shape_numel(b.shape, dims), b.role};
      if (a.role != BindingRole::kOut) record(calls_.back(), a, a.role == BindingRole::kInOut);
      pending_.back().push_back(a);
    }
    if (p != tensors.end()) mismatch(k, "more tensors than the record binds");
    return calls_.size() - 1;
  }

  // Ends call `call`: records its outputs and the after-values of its in-out bindings.
  void end(size_t call) {
    for (const Arg& a : pending_[call]) {
      if (a.role != BindingRole::kIn) record(calls_[call], a, false);
      if (a.role != BindingRole::kIn) outputs_[call].push_back(a.name);
    }
  }

  const std::vector<std::string>& calls() const { return calls_; }
  // The bindings call i wrote (its outputs, in-out ones included).
  const std::vector<std::string>& outputs(size_t i) const { return outputs_[i]; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  struct Arg {
    std::string name;
    const char* dtype;  // safetensors dtype: F32, F16, BF16, I32, U8 (packed codes: one byte each)
    const void* data;
    size_t numel;
    BindingRole role;
  };
  static const char* dump_dtype(const std::string& dtype) {
    return dtype == "f16"    ? "F16"
           : dtype == "bf16" ? "BF16"
           : dtype == "i32"  ? "I32"
           : dtype == "f32"  ? "F32"
                             : "U8";
  }
  [[noreturn]] static void mismatch(const KernelRecord& k, const std::string& what) {
    throw std::logic_error("kernel dump of " + k.name + ": " + what);
  }
  // The tensor `<call>.<binding>`, or `<call>.<binding>_in` for an in-out binding's before-value.
  void record(const std::string& call, const Arg& a, bool before) {
    const auto* p = static_cast<const uint8_t*>(a.data);
    const std::string d = a.dtype;
    const size_t elem = d == "F16" || d == "BF16" ? 2 : d == "U8" ? 1 : 4;
    tensors_.push_back({call + "." + a.name + (before ? "_in" : ""), a.dtype, a.numel,
                        std::vector<uint8_t>(p, p + a.numel * elem)});
  }

  std::vector<std::string> calls_;
  std::vector<std::vector<Arg>> pending_;
  std::vector<std::vector<std::string>> outputs_;
  std::vector<Tensor> tensors_;
};

}  // namespace reftrain
