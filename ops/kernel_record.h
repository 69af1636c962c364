// The kernel record: everything written down about one kernel, in one place, next to its code
// (each family's .cpp ends with its records). The name is the one key: the golden fixture's file
// stem, the GPU entry point, the kernel-call dump's call name, the `reftrain explain` topic and
// the row of KERNELS.md. The bindings are the reference function's arguments in order, and every
// consumer reads them from here: the fixture manifest, the call dump (ops/kernel_dump.h), the
// JSON the WebGPU harness reads (`reftrain kernels --json`) and KERNELS.md (`reftrain kernels
// --markdown`). Which function runs a kernel is the kernel table's business (optim/kernels.h).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace reftrain {

// in: read; out: written; inout: read and written (recorded as <name>_in and <name>); scalar: a
// size or hyperparameter; scratch: working memory (never recorded).
enum class BindingRole { kIn, kOut, kInOut, kScalar, kScratch };

struct KernelBinding {
  std::string name;  // the tensor's name in fixtures and dumps
  BindingRole role;
  std::string dtype;  // "f32", "f16", "bf16", "i32", "u8 (u32 words)", "u32", "f64"
  std::string shape;  // in the params' letters, "[N,C]", "[4·ceil(size/4)]"; "[]" for scalars
  std::string wgsl;   // the GPU study's variable, where it is named otherwise
};

struct KernelRecord {
  std::string name;
  std::string math;  // one line
  std::vector<KernelBinding> bindings;
  // The GPU study the kernel mirrors: its file and entry point (the entry defaults to name).
  std::string twin_file, twin_entry;
  // Where the code lives and what teaches and holds it (KERNELS.md's columns). `reference` and
  // `fast` name functions declared in `header`; `fast_how` says how the fast one differs.
  std::string header, reference, fast, fast_how;
  std::string variants;  // the variants a run selects, "" when none
  std::string wgsl;      // our twin: a file under tests/webgpu/kernels/ ("" for none)
  std::string page, explain, tests, bench;
};

namespace record {
inline KernelBinding in(std::string name, std::string dtype, std::string shape) {
  return {std::move(name), BindingRole::kIn, std::move(dtype), std::move(shape), ""};
}
inline KernelBinding out(std::string name, std::string dtype, std::string shape) {
  return {std::move(name), BindingRole::kOut, std::move(dtype), std::move(shape), ""};
}
inline KernelBinding inout(std::string name, std::string dtype, std::string shape) {
  return {std::move(name), BindingRole::kInOut, std::move(dtype), std::move(shape), ""};
}
inline KernelBinding scalar(std::string name, std::string dtype = "u32") {
  return {std::move(name), BindingRole::kScalar, std::move(dtype), "[]", ""};
}
// Scratch is f32 unless its dtype says otherwise (the bf16 attention's ds16).
inline KernelBinding scratch(std::string name, std::string shape, std::string dtype = "f32") {
  return {std::move(name), BindingRole::kScratch, std::move(dtype), std::move(shape), ""};
}
}  // namespace record

const char* role_name(BindingRole r);

// The element count of `shape` ("[B,T,3C]", "[4·ceil(size/4)]") for the sizes in `dims`.
// Throws std::logic_error naming the shape when it uses a size dims lacks.
struct Dim {
  const char* name;
  size_t value;
};
size_t shape_numel(const std::string& shape, std::initializer_list<Dim> dims);

// Each family's records (the end of its .cpp), in pipeline order.
std::vector<KernelRecord> embed_records();
std::vector<KernelRecord> norm_records();
std::vector<KernelRecord> linear_records();
std::vector<KernelRecord> linear_bf16_records();  // ops/linear_bf16.cpp
std::vector<KernelRecord> rope_records();
std::vector<KernelRecord> attention_records();
std::vector<KernelRecord> attention_bf16_records();  // ops/attention_bf16.cpp
std::vector<KernelRecord> activation_records();
std::vector<KernelRecord> loss_records();
std::vector<KernelRecord> residual_records();
std::vector<KernelRecord> cast_records();
std::vector<KernelRecord> cast_bf16_records();  // ops/bf16.cpp

}  // namespace reftrain
