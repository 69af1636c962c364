#include "core/golden/golden_kernels.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/base/error.h"
#include "core/base/rng.h"
#include "core/formats/atomic_file.h"

namespace reftrain {

namespace {

uint32_t fnv1a32(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

const char* family_name(Family f) {
  return f == Family::kGpt2 ? "gpt2" : f == Family::kLlama ? "llama" : "both";
}

// The output tensors of a case: "<case>.<binding>" for every out and inout binding.
std::vector<std::string> output_names(const KernelSpec& k, const std::string& case_name) {
  std::vector<std::string> names;
  for (const Binding& b : k.bindings) {
    if (b.role == Role::kOut || b.role == Role::kInOut) names.push_back(case_name + "." + b.name);
  }
  return names;
}

Json tensor_table(const SafetensorsFile& f, const std::string& case_name) {
  Json t = Json::object();
  const std::string prefix = case_name + ".";
  for (const auto& [name, tensor] : f.tensors) {
    if (name.rfind(prefix, 0) != 0) continue;
    t[name.substr(prefix.size())] = {{"dtype", dtype_name(tensor.dtype)}, {"shape", tensor.shape}};
  }
  return t;
}

// Our float outputs against the float64 recomputation of the same inputs: how much of the
// tolerance an exact evaluation uses.
Json f64_error(const KernelSpec& k, const SafetensorsFile& fixture, const std::string& case_name) {
  if (!k.run_f64) return nullptr;
  const SafetensorsFile exact = recompute_f64(k, fixture, case_name);
  Json j = Json::object();
  for (const std::string& name : output_names(k, case_name)) {
    const std::string binding = name.substr(case_name.size() + 1);
    const TensorDiff d = compare_tensor(name, exact.tensors.at(name), fixture.tensors.at(name),
                                        k.tolerances.at(binding));
    j[binding] = {
        {"max_abs", d.max_abs}, {"max_rel", d.max_rel}, {"nmse", d.nmse}, {"used", d.used}};
  }
  return j;
}

}  // namespace

namespace fixture {

Tolerance nmse(double max_nmse, std::string why) {
  Tolerance t;
  t.allclose = false, t.max_nmse = max_nmse, t.why = std::move(why);
  return t;
}

Tolerance ulps(double max_ulp, std::string why) {
  Tolerance t;
  t.allclose = false, t.max_ulp = max_ulp, t.why = std::move(why);
  return t;
}

Tolerance close(double rtol, double atol, std::string why) {
  Tolerance t;
  t.rtol = rtol, t.atol = atol, t.why = std::move(why);
  return t;
}

Tolerance op_tolerance() {
  return nmse(1e-9,
              "ggml test-backend-ops' metric, 100x tighter than its default 1e-7: f32 kernels "
              "summing in another order, with exp/tanh a few ulps off, reproduce these fixtures "
              "at NMSE ~1e-14 (f32_vs_f64; numpy float32 ~1e-13), and 1e-9 still fails one "
              "element wrong by ~0.2% of the tensor's RMS");
}

KernelSpec record_kernel(const std::string& name, Family family,
                         Json (*make)(FixtureGen&, const KernelDims&),
                         void (*run_f32)(FixtureIo<float>&, const KernelDims&),
                         void (*run_f64)(FixtureIo<double>&, const KernelDims&)) {
  const KernelRecord& r = kernel_record(name);
  KernelSpec k{name,
               family,
               r.twin_file,
               r.twin_entry.empty() ? name : r.twin_entry,
               "",
               r.math,
               r.bindings,
               {},
               {"small", "awkward"},
               make,
               run_f32,
               run_f64};
  const bool bf16 = std::any_of(k.bindings.begin(), k.bindings.end(),
                                [](const Binding& b) { return b.dtype == "bf16"; });
  for (const Binding& b : k.bindings) {
    if (b.role == Role::kOut || b.role == Role::kInOut) {
      k.tolerances[b.name] = bf16 ? bf16_tolerance() : op_tolerance();
    }
  }
  return k;
}

KernelSpec seed_kernel(const std::string& name, std::string seed,
                       std::map<std::string, Tolerance> tolerances, std::vector<std::string> cases,
                       Json (*make)(FixtureGen&, const KernelDims&),
                       void (*run)(FixtureIo<float>&, const KernelDims&)) {
  KernelSpec k = record_kernel(name, Family::kBoth, make, run, nullptr);
  k.twin_seed = std::move(seed);
  k.tolerances = std::move(tolerances);
  k.cases = std::move(cases);
  return k;
}

Tolerance mirror_tolerance() {
  return ulps(1,
              "WGSL leaves the f32→f16 rounding to the implementation (either neighbour of a "
              "value between two f16s); 0 on a device that rounds to nearest even");
}

Json count_params(const KernelDims& d) {
  return {{"n", d.n}};
}

}  // namespace fixture

KernelDims kernel_dims(const std::string& case_name) {
  // small: powers of two; awkward: nothing a multiple of 4 where it can be avoided (hs = 10 must
  // be even for RoPE; C = 30, 3C = 90, F = 37, Vp = 67, N = 21, n = 1237 = 4·256 + 213).
  if (case_name == "small") return {"small", 2, 8, 16, 2, 32, 32, 8, 32, 512};
  if (case_name == "awkward" || case_name == "nonfinite") {
    return {case_name, 3, 7, 30, 3, 61, 67, 9, 37, 1237};
  }
  // large: one GPT-2 small layer at B = 1 (C = 768, NH = 12, hs = 64, F = 4C, T = maxT = 1024).
  // The vocabulary is not GPT-2's: 50257 (padded 50304) would make the embedding and loss
  // fixtures ~1.3 GB; V = 4049 keeps its 47 padded columns. n = 2^18, 1024 workgroups of 256:
  // N·C (3x more) would add ~90 MB of element-wise and optimizer fixtures of no new shape.
  if (case_name == "large") return {"large", 1, 1024, 768, 12, 4049, 4096, 1024, 3072, 262144};
  throw std::invalid_argument("no fixture case named " + case_name);
}

FixtureScale fixture_scale(const std::string& name) {
  if (name == "small") return FixtureScale::kSmall;
  if (name == "large") return FixtureScale::kLarge;
  throw std::invalid_argument("no fixture scale named " + name);
}

std::vector<std::string> fixture_cases(const KernelSpec& k, FixtureScale scale) {
  return scale == FixtureScale::kSmall ? k.cases : std::vector<std::string>{"large"};
}

Json fixture_dims(FixtureScale scale) {
  Json dims = Json::object();
  for (const char* c : scale == FixtureScale::kSmall ? std::vector<const char*>{"small", "awkward"}
                                                     : std::vector<const char*>{"large"}) {
    const KernelDims d = kernel_dims(c);
    dims[c] = {{"B", d.B},         {"T", d.T},   {"C", d.C},   {"NH", d.NH},
               {"hs", d.C / d.NH}, {"V", d.V},   {"Vp", d.Vp}, {"maxT", d.maxT},
               {"F", d.F},         {"N", d.N()}, {"n", d.n}};
  }
  if (scale == FixtureScale::kLarge) {
    dims["large"]["note"] =
        "GPT-2 small's width, heads, MLP and context at B = 1; V and Vp are not GPT-2's 50257 "
        "and 50304 (the embedding and loss fixtures would be ~1.3 GB) but 4049 and 4096, the same "
        "47 padded columns; n = 2^18 elements for the element-wise and optimizer kernels";
  }
  return dims;
}

bool in_family(const KernelSpec& k, const std::string& arch) {
  return arch == "all" || k.family == Family::kBoth || arch == family_name(k.family);
}

const std::vector<KernelSpec>& golden_kernels() {
  static const std::vector<KernelSpec> all = [] {
    std::vector<KernelSpec> v;
    add_embed_kernels(v);
    add_norm_kernels(v);
    add_linear_kernels(v);
    add_rope_kernels(v);
    add_attention_kernels(v);
    add_activation_kernels(v);
    add_loss_kernels(v);
    add_residual_kernels(v);
    add_cast_kernels(v);
    add_adamw_kernels(v);
    add_bf16_kernels(v);
    return v;
  }();
  return all;
}

// ------------------------------------------------------------------------------------------
// FixtureGen

FixtureGen::FixtureGen(SafetensorsFile& file, std::string kernel, std::string case_name,
                       uint64_t seed)
    : file_(file), kernel_(std::move(kernel)), prefix_(std::move(case_name) + "."), seed_(seed) {}

uint32_t FixtureGen::stream_of(const std::string& name) const {
  return fnv1a32(kernel_ + "/" + prefix_ + name);
}

std::vector<float> FixtureGen::draw_normal(const std::string& name, size_t n, double scale) const {
  const CounterRng rng(seed_, RngStream::kGolden);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(scale * rng.normal(i, stream_of(name)));
  return v;
}

std::vector<float> FixtureGen::draw_uniform(const std::string& name, size_t n, double lo,
                                            double hi) const {
  const CounterRng rng(seed_, RngStream::kGolden);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(lo + (hi - lo) * double(rng.uniform(i, stream_of(name))));
  return v;
}

std::vector<int32_t> FixtureGen::draw_below(const std::string& name, size_t n, int bound) const {
  const CounterRng rng(seed_, RngStream::kGolden);
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = int32_t(rng.below(uint64_t(bound), i, stream_of(name)));
  return v;
}

std::vector<float> FixtureGen::normal(const std::string& name, std::vector<int64_t> shape,
                                      double scale) {
  std::vector<float> v = draw_normal(name, numel(shape), scale);
  add(name, std::move(shape), v);
  return v;
}

std::vector<float> FixtureGen::uniform(const std::string& name, std::vector<int64_t> shape,
                                       double lo, double hi) {
  std::vector<float> v = draw_uniform(name, numel(shape), lo, hi);
  add(name, std::move(shape), v);
  return v;
}

std::vector<int32_t> FixtureGen::tokens(const std::string& name, std::vector<int64_t> shape,
                                        int vocab) {
  std::vector<int32_t> v = draw_below(name, numel(shape), vocab);
  add_raw(name, DType::kI32, std::move(shape), v.data());
  return v;
}

void FixtureGen::add(const std::string& name, std::vector<int64_t> shape,
                     const std::vector<float>& v) {
  add_raw(name, DType::kF32, std::move(shape), v.data());
}

void FixtureGen::add_raw(const std::string& name, DType dtype, std::vector<int64_t> shape,
                         const void* data) {
  file_.add(prefix_ + name, dtype, std::move(shape), data);
}

// ------------------------------------------------------------------------------------------
// FixtureIo

template <typename T>
const SafeTensor& FixtureIo<T>::tensor(const std::string& name) const {
  return in_.get(prefix_ + name);
}

template <typename T>
std::vector<T> FixtureIo<T>::get(const std::string& name) const {
  const std::vector<float> f = tensor(name).template as<float>();
  return std::vector<T>(f.begin(), f.end());
}

template <typename T>
std::vector<int32_t> FixtureIo<T>::ints(const std::string& name) const {
  return tensor(name).template as<int32_t>();
}

template <typename T>
std::vector<uint16_t> FixtureIo<T>::halves(const std::string& name) const {
  const SafeTensor& t = tensor(name);
  if (t.dtype != DType::kF16) throw std::invalid_argument(name + " is not F16");
  std::vector<uint16_t> v(t.numel());
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

template <typename T>
std::vector<uint16_t> FixtureIo<T>::bf16_bits(const std::string& name) const {
  const SafeTensor& t = tensor(name);
  if (t.dtype != DType::kBF16) throw std::invalid_argument(name + " is not BF16");
  return t.bf16_bits();
}

template <typename T>
std::vector<uint8_t> FixtureIo<T>::bytes(const std::string& name) const {
  return tensor(name).template as<uint8_t>();
}

template <typename T>
void FixtureIo<T>::put(const std::string& name, std::vector<int64_t> shape,
                       const std::vector<T>& v) {
  put_raw(name, sizeof(T) == 8 ? DType::kF64 : DType::kF32, std::move(shape), v.data());
}

template <typename T>
void FixtureIo<T>::put_raw(const std::string& name, DType dtype, std::vector<int64_t> shape,
                           const void* data) {
  out_.add(prefix_ + name, dtype, std::move(shape), data);
}

template class FixtureIo<float>;
template class FixtureIo<double>;

// ------------------------------------------------------------------------------------------
// Fixtures and the manifest

SafetensorsFile recompute_f32(const KernelSpec& k, const SafetensorsFile& fixture,
                              const std::string& case_name) {
  SafetensorsFile out;
  FixtureIo<float> io(fixture, out, case_name);
  k.run_f32(io, kernel_dims(case_name));
  return out;
}

SafetensorsFile recompute_f64(const KernelSpec& k, const SafetensorsFile& fixture,
                              const std::string& case_name) {
  SafetensorsFile out;
  if (!k.run_f64) throw std::invalid_argument(k.name + " has no float64 reference");
  FixtureIo<double> io(fixture, out, case_name);
  k.run_f64(io, kernel_dims(case_name));
  return out;
}

SafetensorsFile make_kernel_fixture(const KernelSpec& k, uint64_t seed, FixtureScale scale) {
  SafetensorsFile f;
  Json params = Json::object(), tolerances = Json::object();
  for (const std::string& c : fixture_cases(k, scale)) {
    FixtureGen gen(f, k.name, c, seed);
    params[c] = k.make(gen, kernel_dims(c));
    const SafetensorsFile outputs = recompute_f32(k, f, c);
    for (const auto& kv : outputs.tensors) f.tensors[kv.first] = kv.second;
    for (const std::string& name : output_names(k, c)) {
      tolerances[name] = k.tolerances.at(name.substr(c.size() + 1)).to_json();
    }
  }
  f.metadata["format"] = "reftrain-golden-kernel";
  f.metadata["kernel"] = k.name;
  f.metadata["params"] = json_text(params, -1);
  f.metadata["tolerances"] = json_text(tolerances, -1);
  return f;
}

Json kernel_manifest(const KernelSpec& k, const SafetensorsFile& fixture, uint64_t seed,
                     FixtureScale scale) {
  Json bindings = Json::array(), tols = Json::object(), cases = Json::object();
  for (const Binding& b : k.bindings) {
    bindings.push_back(
        {{"name", b.name}, {"role", role_name(b.role)}, {"dtype", b.dtype}, {"shape", b.shape}});
    if (!b.wgsl.empty()) bindings.back()["wgsl"] = b.wgsl;
  }
  for (const auto& [name, t] : k.tolerances) tols[name] = t.to_json();
  const Json params = Json::parse(fixture.metadata.at("params"));
  for (const std::string& c : fixture_cases(k, scale)) {
    cases[c] = {{"params", params.at(c)},
                {"tensors", tensor_table(fixture, c)},
                {"f32_vs_f64", f64_error(k, fixture, c)}};
    if (c == "nonfinite") {
      cases[c]["optional"] = "gradients hold NaN and Inf; WGSL may assume there are none";
    }
  }
  Json entry = {{"name", k.name},
                {"file", k.name + ".safetensors"},
                {"family", family_name(k.family)},
                {"twin", {{"file", k.twin_file}, {"entry", k.twin_entry}, {"seed", k.twin_seed}}},
                {"math", k.math},
                {"bindings", bindings},
                {"tolerances", tols},
                {"seed", seed},
                {"cases", cases}};
  if (!k.numerics.is_null()) entry["numerics"] = k.numerics;
  return entry;
}

Json kernels_manifest(const std::string& arch, uint64_t seed, FixtureScale scale, Json kernels) {
  Json manifest = {{"format", "reftrain-golden-kernels"}, {"format_version", 1}, {"arch", arch}};
  // Only the large scale names itself: the small manifest's bytes are pinned
  // (tests/golden/golden_bytes.sha256).
  if (scale == FixtureScale::kLarge) manifest["scale"] = "large";
  manifest["seed"] = seed;
  manifest["rng"] =
      "philox4x32-10, CounterRng(seed, stream 5), index i, sub FNV-1a 32 of "
      "\"<kernel>/<case>.<tensor>\" (docs/rng.md)";
  manifest["names"] =
      "<case>.<binding>; an inout binding as <binding>_in (before) and <binding> (after)";
  manifest["dims"] = fixture_dims(scale);
  manifest["kernels"] = std::move(kernels);
  return manifest;
}

void write_golden_kernels(const std::string& out_dir, const std::string& arch, uint64_t seed,
                          FixtureScale scale) {
  namespace fs = std::filesystem;
  create_output_dir(out_dir);
  Json kernels = Json::array();
  for (const KernelSpec& k : golden_kernels()) {
    if (!in_family(k, arch)) continue;
    SafetensorsFile f = make_kernel_fixture(k, seed, scale);
    Json entry = kernel_manifest(k, f, seed, scale);
    f.metadata["manifest"] = json_text(entry, -1);
    write_safetensors((fs::path(out_dir) / (k.name + ".safetensors")).string(), f);
    kernels.push_back(std::move(entry));
  }
  write_text_file((fs::path(out_dir) / "manifest.json").string(),
                  json_text(kernels_manifest(arch, seed, scale, std::move(kernels)), 1) + "\n");
}

}  // namespace reftrain
