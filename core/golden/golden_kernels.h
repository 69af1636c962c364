// Per-kernel golden tensors: for every kernel a GPU backend implements, one safetensors file
// with the kernel's inputs, outputs and gradients at a small shape and at an awkward one (sizes
// that are not multiples of 4, 16 or 64), or at the large scale at one GPU-sized shape for timing
// a GPU kernel, plus a manifest naming the GPU twin, the bindings in order, the shapes, the
// hyperparameters and the tolerance to check with (docs/golden-format.md). The outputs come from
// reftrain's scalar reference kernels (the templates of ops/ and the plain-named functions of
// optim/; the large case's linear products from the blocked matmul, bit-identical to the naive
// one); the inputs from CounterRng(seed, RngStream::kGolden).
//
// Tensor names in a file are "<case>.<binding>": inputs under the binding's name; a binding the
// kernel reads and writes (an accumulated gradient, the AdamW state) as "<binding>_in" before
// and "<binding>" after.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "core/golden/compare.h"
#include "optim/kernel_table.h"

namespace reftrain {

// Every size a fixture may use; each kernel takes the ones it needs.
struct KernelDims {
  std::string name;  // "small", "awkward", "nonfinite", "large"
  int B, T, C, NH, V, Vp, maxT, F;
  int N() const { return B * T; }
  int n;  // elements of the element-wise and optimizer kernels
};

class FixtureGen;
template <typename T>
class FixtureIo;

enum class Family { kBoth, kGpt2, kLlama };
// A fixture's bindings are its kernel's record's (ops/kernel_record.h).
using Role = BindingRole;
using Binding = KernelBinding;

struct KernelSpec {
  std::string name;  // the fixture file's stem and, unless `entry` says otherwise, the function
  Family family;
  std::string twin_file;          // the GPU kernel file, e.g. "02_norm.wgsl"
  std::string twin_entry;         // its entry point
  std::string twin_seed;          // id of the GPU study fixing its bindings ("" when none does)
  std::string math;               // one line
  std::vector<Binding> bindings;  // reftrain's arguments in order
  std::map<std::string, Tolerance> tolerances;  // by output binding name
  std::vector<std::string> cases;               // "small", "awkward" (+ "nonfinite")
  // Draws the inputs of one case; returns its hyperparameters and sizes for the manifest.
  Json (*make)(FixtureGen& gen, const KernelDims& d);
  // Runs the reference kernel on a case's inputs and adds its outputs (f32, or f64 in the double
  // instantiation; null for kernels that exist in float only).
  void (*run_f32)(FixtureIo<float>& io, const KernelDims& d);
  void (*run_f64)(FixtureIo<double>& io, const KernelDims& d);
  // What a twin must reproduce beyond the math line (the bf16 kernels' order and subnormal
  // band), the manifest entry's "numerics"; null (left out) for the others.
  Json numerics = nullptr;
};

// Every kernel, in pipeline order.
const std::vector<KernelSpec>& golden_kernels();
KernelDims kernel_dims(const std::string& case_name);
bool in_family(const KernelSpec& k, const std::string& arch);  // arch "all", "gpt2", "llama"
constexpr uint64_t kGoldenKernelSeed = 6;

// Which cases the fixtures hold. kSmall: each kernel's own cases (small, awkward, and nonfinite
// where it has one), the pinned fixtures a GPU kernel is checked with. kLarge: one case,
// "large", at GPT-2 small's width and context (C = 768, T = 1024), for timing a GPU kernel on
// inputs whose outputs are known.
enum class FixtureScale { kSmall, kLarge };
FixtureScale fixture_scale(const std::string& name);  // "small" or "large"
std::vector<std::string> fixture_cases(const KernelSpec& k, FixtureScale scale);
// The manifest's "dims": the sizes of every case of `scale`.
Json fixture_dims(FixtureScale scale);

// The fixture of one kernel: every case's inputs and outputs, the tolerances by tensor name in
// the metadata ("tolerances", for `reftrain compare`) and the kernel's manifest entry
// ("manifest").
SafetensorsFile make_kernel_fixture(const KernelSpec& k, uint64_t seed,
                                    FixtureScale scale = FixtureScale::kSmall);
// The kernel's manifest entry; `fixture` supplies the tensor shapes, and its outputs are
// measured against the float64 recomputation when the kernel has one.
Json kernel_manifest(const KernelSpec& k, const SafetensorsFile& fixture, uint64_t seed,
                     FixtureScale scale = FixtureScale::kSmall);
// manifest.json of the kernel entries `kernels` (kernel_manifest's), written for `arch`.
Json kernels_manifest(const std::string& arch, uint64_t seed, FixtureScale scale, Json kernels);
// Runs the float (or double) reference on the inputs of `case_name` in `fixture` and returns its
// outputs under the same names.
SafetensorsFile recompute_f32(const KernelSpec& k, const SafetensorsFile& fixture,
                              const std::string& case_name);
SafetensorsFile recompute_f64(const KernelSpec& k, const SafetensorsFile& fixture,
                              const std::string& case_name);

// Writes `kernel.safetensors` for every kernel of `arch`, and manifest.json, into out_dir.
void write_golden_kernels(const std::string& out_dir, const std::string& arch, uint64_t seed,
                          FixtureScale scale = FixtureScale::kSmall);

// ------------------------------------------------------------------------------------------
// The machinery the kernel files (golden_kernels_<family>.cpp) use.

// Draws a case's inputs into a fixture: element i of tensor NAME is drawn from
// CounterRng(seed, kGolden) at index i, sub = FNV-1a 32 of "<kernel>/<case>.<NAME>".
class FixtureGen {
 public:
  FixtureGen(SafetensorsFile& file, std::string kernel, std::string case_name, uint64_t seed);
  // The draws of tensor `name` without adding it (for inputs built from several draws).
  std::vector<float> draw_normal(const std::string& name, size_t n, double scale) const;
  std::vector<float> draw_uniform(const std::string& name, size_t n, double lo, double hi) const;
  std::vector<int32_t> draw_below(const std::string& name, size_t n, int bound) const;
  // scale·normal(i)
  std::vector<float> normal(const std::string& name, std::vector<int64_t> shape, double scale);
  // lo + (hi − lo)·uniform(i)
  std::vector<float> uniform(const std::string& name, std::vector<int64_t> shape, double lo,
                             double hi);
  std::vector<int32_t> tokens(const std::string& name, std::vector<int64_t> shape, int vocab);
  // A tensor computed from others (the forward's mean and rstd for a backward, ...).
  void add(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v);
  void add_raw(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);
  uint32_t stream_of(const std::string& name) const;  // the sub-stream of tensor `name`
  uint64_t seed() const { return seed_; }

 private:
  SafetensorsFile& file_;
  std::string kernel_, prefix_;
  uint64_t seed_;
};

// A case's tensors as the kernel sees them: inputs read (and converted to T) from the fixture,
// outputs added to `out` as F32 (T = float) or F64 (T = double).
template <typename T>
class FixtureIo {
 public:
  FixtureIo(const SafetensorsFile& in, SafetensorsFile& out, std::string case_name)
      : in_(in), out_(out), prefix_(std::move(case_name) + ".") {}
  std::vector<T> get(const std::string& name) const;  // an F32 input as T
  std::vector<int32_t> ints(const std::string& name) const;
  std::vector<uint16_t> halves(const std::string& name) const;     // F16 bit patterns
  std::vector<uint16_t> bf16_bits(const std::string& name) const;  // BF16 bit patterns
  std::vector<uint8_t> bytes(const std::string& name) const;
  void put(const std::string& name, std::vector<int64_t> shape, const std::vector<T>& v);
  void put_raw(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);

 private:
  const SafeTensor& tensor(const std::string& name) const;
  const SafetensorsFile& in_;
  SafetensorsFile& out_;
  std::string prefix_;
};

namespace fixture {
Tolerance nmse(double max_nmse, std::string why);
Tolerance ulps(double max_ulp, std::string why);
Tolerance close(double rtol, double atol, std::string why);
// An f32 op's output: NMSE ≤ 1e-9 (ggml test-backend-ops' metric, 100x its default 1e-7).
Tolerance op_tolerance();
// The fixture of kernel `name`: its math, bindings and GPU twin from its record, the cases small
// and awkward, and for every output op_tolerance(), or bf16_tolerance() (core/golden/compare.h)
// when a binding of the kernel is bf16.
KernelSpec record_kernel(const std::string& name, Family family,
                         Json (*make)(FixtureGen&, const KernelDims&),
                         void (*run_f32)(FixtureIo<float>&, const KernelDims&),
                         void (*run_f64)(FixtureIo<double>&, const KernelDims&));
// A kernel with a fixed WGSL bind group: the entry point is the kernel's name, and it
// exists in float only.
KernelSpec seed_kernel(const std::string& name, std::string seed,
                       std::map<std::string, Tolerance> tolerances, std::vector<std::string> cases,
                       Json (*make)(FixtureGen&, const KernelDims&),
                       void (*run)(FixtureIo<float>&, const KernelDims&));
// An f32 → f16 rounding (cast_f32_to_f16 and AdamW's fp16 mirror): within 1 ulp.
Tolerance mirror_tolerance();
// What a twin of a bf16 kernel must reproduce (KernelSpec::numerics): the f32 → bf16 rounding
// and, for the products, the canonical order and the subnormal band
// (golden_kernels_bf16.cpp).
Json bf16_numerics(bool products);
// The parameters of an element-wise kernel (activations, residual): its element count.
Json count_params(const KernelDims& d);
}  // namespace fixture

// A run_* template's float and double instantiations, record_kernel's last two arguments.
#define REFTRAIN_RUN(f) f<float>, f<double>

// The kernel families, one function each, in golden_kernels_<family>.cpp after ops/<family>
// (adamw: optim/adamw and optim/adamw8bit); golden_kernels() calls them in pipeline order, which
// is manifest.json's kernel order and so part of its bytes (tests/golden/golden_bytes.sha256).
void add_embed_kernels(std::vector<KernelSpec>& v);
void add_norm_kernels(std::vector<KernelSpec>& v);
void add_linear_kernels(std::vector<KernelSpec>& v);
void add_rope_kernels(std::vector<KernelSpec>& v);
void add_attention_kernels(std::vector<KernelSpec>& v);
void add_activation_kernels(std::vector<KernelSpec>& v);
void add_loss_kernels(std::vector<KernelSpec>& v);
void add_residual_kernels(std::vector<KernelSpec>& v);
void add_cast_kernels(std::vector<KernelSpec>& v);
void add_adamw_kernels(std::vector<KernelSpec>& v);
void add_bf16_kernels(std::vector<KernelSpec>& v);  // golden_kernels_bf16.cpp, after adamw

}  // namespace reftrain
