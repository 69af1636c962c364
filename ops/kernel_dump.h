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
#include <string>
#include <vector>

#include "ops/cast.h"

namespace reftrain {

class KernelDump {
 public:
  enum class Role { kIn, kOut, kInOut };
  struct Arg {
    const char* name;
    const char* dtype;  // safetensors dtype: F32, F16, I32, U8
    const void* data;
    size_t numel, elem_size;
    Role role;
  };
  struct Tensor {
    std::string name, dtype;
    size_t numel;
    std::vector<uint8_t> bytes;
  };

  static Arg in(const char* name, const float* p, size_t n) {
    return {name, "F32", p, n, 4, Role::kIn};
  }
  static Arg in(const char* name, const int32_t* p, size_t n) {
    return {name, "I32", p, n, 4, Role::kIn};
  }
  static Arg in(const char* name, const f16* p, size_t n) {
    return {name, "F16", p, n, 2, Role::kIn};
  }
  static Arg out(const char* name, const float* p, size_t n) {
    return {name, "F32", p, n, 4, Role::kOut};
  }
  static Arg out(const char* name, const f16* p, size_t n) {
    return {name, "F16", p, n, 2, Role::kOut};
  }
  static Arg io(const char* name, const float* p, size_t n) {
    return {name, "F32", p, n, 4, Role::kInOut};
  }
  // Packed 8-bit codes: `bytes` bytes from the first, one code each.
  static Arg io_codes(const char* name, const uint32_t* p, size_t bytes) {
    return {name, "U8", p, bytes, 1, Role::kInOut};
  }

  // Starts the next call: records its inputs and the before-values of its in-out bindings.
  // Returns the call's index for end().
  size_t begin(const std::string& layer, const char* kernel, std::initializer_list<Arg> args) {
    char index[16];
    std::snprintf(index, sizeof index, "%04zu", calls_.size());
    calls_.push_back(std::string(index) + "." + layer + "." + kernel);
    pending_.emplace_back(args);
    outputs_.emplace_back();
    for (const Arg& a : args) {
      if (a.role != Role::kOut) record(calls_.back(), a, a.role == Role::kInOut ? "_in" : "");
    }
    return calls_.size() - 1;
  }

  // One more binding of call `call`, begun and not yet ended (an optional one: a bias).
  void begin_more(size_t call, const Arg& a) {
    pending_[call].push_back(a);
    if (a.role != Role::kOut) record(calls_[call], a, a.role == Role::kInOut ? "_in" : "");
  }

  // Ends call `call`: records its outputs and the after-values of its in-out bindings.
  void end(size_t call) {
    for (const Arg& a : pending_[call]) {
      if (a.role != Role::kIn) record(calls_[call], a, ""), outputs_[call].push_back(a.name);
    }
  }

  const std::vector<std::string>& calls() const { return calls_; }
  // The bindings call i wrote (its outputs, in-out ones included).
  const std::vector<std::string>& outputs(size_t i) const { return outputs_[i]; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  void record(const std::string& call, const Arg& a, const char* suffix) {
    const auto* p = static_cast<const uint8_t*>(a.data);
    tensors_.push_back({call + "." + a.name + suffix, a.dtype, a.numel,
                        std::vector<uint8_t>(p, p + a.numel * a.elem_size)});
  }

  std::vector<std::string> calls_;
  std::vector<std::vector<Arg>> pending_;
  std::vector<std::vector<std::string>> outputs_;
  std::vector<Tensor> tensors_;
};

// Runs `run` as one recorded call of `dump` (nothing is recorded when dump is null).
template <typename F>
void dump_call(KernelDump* dump, const std::string& layer, const char* kernel,
               std::initializer_list<KernelDump::Arg> args, F&& run) {
  const size_t call = dump ? dump->begin(layer, kernel, args) : 0;
  run();
  if (dump) dump->end(call);
}

}  // namespace reftrain
