#include "core/golden/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/base/error.h"
#include "ops/cast.h"

namespace reftrain {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool is_float(DType d) {
  return d == DType::kF64 || d == DType::kF32 || d == DType::kF16 || d == DType::kBF16;
}

// Element i of a tensor as a double (exact for every dtype reftrain reads: f16, bf16, f32, f64,
// bool and integers below 2^53). int8: a U8 tensor's bytes read as two's complement.
double value_at(const SafeTensor& t, size_t i, bool int8 = false) {
  const uint8_t* p = t.bytes.data() + i * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::kF64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    case DType::kF32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_bits_to_f32(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint32_t bits = uint32_t(h) << 16;
      float x;
      std::memcpy(&x, &bits, 4);
      return x;
    }
    case DType::kI64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return double(x);
    }
    case DType::kI32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::kU16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case DType::kU8:
      return int8 ? double(int8_t(*p)) : double(*p);
    case DType::kBool:
      return double(*p);
  }
  return 0;
}

// The 8-bit AdamW first moment is stored as int8 codes in a U8 tensor (safetensors has no
// packed-int8-in-u32 type): judged as U8, the codes 0 and −1 would be 0x00 and 0xFF, 255 apart
// instead of 1. So a U8 tensor whose binding (the name after the case) is m_packed or
// m_packed_in is read as int8. The v codes (√v, 0..255) stay unsigned.
bool int8_codes(const std::string& name, const SafeTensor& t) {
  if (t.dtype != DType::kU8) return false;
  const size_t dot = name.rfind('.');
  const std::string binding = dot == std::string::npos ? name : name.substr(dot + 1);
  return binding == "m_packed" || binding == "m_packed_in";
}

// A float's bit pattern mapped to a signed integer that orders like the values (−0 and +0 both
// 0), so the difference of two is their distance in units in the last place.
double ordered_bits(const SafeTensor& t, size_t i) {
  const size_t size = dtype_size(t.dtype);
  uint64_t bits = 0;
  std::memcpy(&bits, t.bytes.data() + i * size, size);  // little-endian host
  const uint64_t sign = uint64_t(1) << (8 * size - 1);
  const double magnitude = double(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

// |x − r| with NaN = NaN and ∞ = ∞ counting as equal.
double abs_diff(double r, double x) {
  if (std::isnan(r) || std::isnan(x)) return std::isnan(r) && std::isnan(x) ? 0.0 : kInf;
  if (r == x) return 0.0;  // also equal infinities
  return std::abs(x - r);
}

// Fraction of a limit used: 0/0 = 0, x/0 = ∞.
double fraction(double value, double limit) {
  if (value == 0) return 0;
  return limit > 0 ? value / limit : kInf;
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

Tolerance Tolerance::exact() {
  Tolerance t;
  t.rtol = 0, t.atol = 0;
  return t;
}

Json Tolerance::to_json() const {
  Json j = Json::object();
  if (allclose) j["rtol"] = rtol, j["atol"] = atol;
  if (max_nmse >= 0) j["max_nmse"] = max_nmse;
  if (max_ulp >= 0) j["max_ulp"] = max_ulp;
  if (!why.empty()) j["why"] = why;
  return j;
}

Tolerance Tolerance::from_json(const Json& j, const std::string& where) {
  const auto bad = [&](const std::string& what) {
    return input_error(where + ": tolerance " + what + " (see docs/golden-format.md)");
  };
  if (!j.is_object()) throw bad("is not a JSON object");
  Tolerance t;
  t.allclose = j.contains("rtol") || j.contains("atol");
  t.rtol = t.atol = 0;
  for (const auto& [key, value] : j.items()) {
    if (key == "why") {
      if (!value.is_string()) throw bad("\"why\" must be a string");
      t.why = value.get<std::string>();
      continue;
    }
    if (!value.is_number() || value.get<double>() < 0) throw bad(key + " must be a number >= 0");
    const double v = value.get<double>();
    if (key == "rtol")
      t.rtol = v;
    else if (key == "atol")
      t.atol = v;
    else if (key == "max_nmse")
      t.max_nmse = v;
    else if (key == "max_ulp")
      t.max_ulp = v;
    else
      throw bad("has an unknown key \"" + key + "\"");
  }
  if (!t.allclose && t.max_nmse < 0 && t.max_ulp < 0) throw bad("names no criterion");
  return t;
}

Tolerance bf16_tolerance() {
  Tolerance t;
  t.rtol = 1.6e-2, t.atol = 1e-5;
  t.why =
      "a bf16 kernel: PyTorch assert_close's bf16 default; twins that sum in the canonical order "
      "reproduce the products bit for bit, and a probability that the GPU's exp rounds to the "
      "neighbouring bf16 moves an output by ~2^-8 of its term";
  return t;
}

Tolerance default_tolerance(const std::string& name, const SafeTensor& ref,
                            const Tolerance& fallback) {
  if (ref.dtype == DType::kBF16) return bf16_tolerance();
  // A dump's tensor name is "<call>.<binding>": the kernel is the part before the last dot.
  const size_t dot = name.rfind('.');
  const std::string call = dot == std::string::npos ? "" : name.substr(0, dot);
  const std::string suffix = "_bf16";
  const bool bf16_call = call.size() > suffix.size() &&
                         call.compare(call.size() - suffix.size(), suffix.size(), suffix) == 0;
  return bf16_call ? bf16_tolerance() : fallback;
}

TensorDiff compare_tensor(const std::string& name, const SafeTensor& ref, const SafeTensor& got,
                          const Tolerance& tol) {
  if (ref.shape != got.shape) {
    throw input_error("tensor '" + name + "' has shape " + shape_text(ref.shape) + " in A but " +
                      shape_text(got.shape) + " in B");
  }
  if (is_float(ref.dtype) != is_float(got.dtype)) {
    throw input_error("tensor '" + name + "' is " + dtype_name(ref.dtype) + " in A but " +
                      dtype_name(got.dtype) + " in B (a float and an integer type)");
  }
  TensorDiff d;
  d.name = name, d.dtype = dtype_name(ref.dtype), d.shape = ref.shape, d.numel = ref.numel();
  const bool ulp_defined = ref.dtype == got.dtype;
  d.ulp = ulp_defined ? 0 : -1;
  const bool int8 = int8_codes(name, ref) && got.dtype == DType::kU8;
  if (int8) d.dtype = "I8 (in U8)";
  double sq_diff = 0, sq_ref = 0, worst_used = -1;
  for (size_t i = 0; i < d.numel; ++i) {
    const double r = value_at(ref, i, int8), x = value_at(got, i, int8), e = abs_diff(r, x);
    d.max_abs = std::max(d.max_abs, e);
    if (r != 0 && std::isfinite(r)) d.max_rel = std::max(d.max_rel, e / std::abs(r));
    sq_diff += e * e;
    if (std::isfinite(r)) sq_ref += r * r;
    double ulp = 0;
    if (ulp_defined && e != 0) {
      ulp = is_float(ref.dtype) ? std::abs(ordered_bits(got, i) - ordered_bits(ref, i)) : e;
      if (std::isnan(r) != std::isnan(x)) ulp = kInf;
      d.ulp = std::max(d.ulp, ulp);
    }
    double used = 0;
    if (tol.allclose)
      used = fraction(e, tol.atol + tol.rtol * (std::isfinite(r) ? std::abs(r) : 0));
    if (tol.max_ulp >= 0) used = std::max(used, ulp_defined ? fraction(ulp, tol.max_ulp) : kInf);
    if (used > worst_used) worst_used = used, d.worst = i;
  }
  d.nmse = sq_diff == 0 ? 0 : (sq_ref > 0 ? sq_diff / sq_ref : kInf);
  d.used = std::max(0.0, worst_used);
  if (tol.max_nmse >= 0) d.used = std::max(d.used, fraction(d.nmse, tol.max_nmse));
  d.pass = d.used <= 1.0;
  return d;
}

namespace {

double number_or_nan(const Json& line, const char* key) {
  if (!line.contains(key) || !line.at(key).is_number()) return std::nan("");
  return line.at(key).get<double>();
}

// |x − r| / |r| (|x| when r = 0); ∞ when either is not a number.
double relative(double r, double x) {
  if (std::isnan(r) || std::isnan(x)) return kInf;
  return r == 0 ? std::abs(x) : std::abs(x - r) / std::abs(r);
}

StepDiff diff_step(const Json& ref, const Json& got, double max_drift) {
  StepDiff s;
  s.step = ref.at("step").get<long long>();
  s.loss_ref = number_or_nan(ref, "loss"), s.loss_got = number_or_nan(got, "loss");
  s.drift = relative(s.loss_ref, s.loss_got);
  s.norm_ref = number_or_nan(ref, "grad_norm"), s.norm_got = number_or_nan(got, "grad_norm");
  s.norm_rel = std::isnan(s.norm_ref) || std::isnan(s.norm_got) ? std::nan("")
                                                                : relative(s.norm_ref, s.norm_got);
  const double lr_ref = number_or_nan(ref, "lr"), lr_got = number_or_nan(got, "lr");
  s.lr_differs = !std::isnan(lr_ref) && !std::isnan(lr_got) && relative(lr_ref, lr_got) > 1e-6;
  s.pass = s.drift <= max_drift && !s.lr_differs;
  return s;
}

}  // namespace

namespace {
// What makes two runs different computations, by run-line pointer: comparing their losses says
// nothing about a kernel, so such a pair is an input error rather than a drift.
void check_same_kind_of_run(const Trace& ref, const Trace& got) {
  for (const char* where : {"/model/arch", "/train/precision", "/optimizer/name"}) {
    const Json::json_pointer p(where);
    if (!ref.run.contains(p) || !got.run.contains(p) || ref.run.at(p) == got.run.at(p)) continue;
    std::string field = where + 1;  // "model/arch" -> "model.arch"
    std::replace(field.begin(), field.end(), '/', '.');
    throw input_error(ref.path + " and " + got.path + " are runs of different kinds: " + field +
                      " " + ref.run.at(p).dump() + " vs " + got.run.at(p).dump() +
                      "; compare runs of the same architecture, " + "precision and optimizer");
  }
}
}  // namespace

TraceDiff compare_traces(const Trace& ref, const Trace& got, double max_drift,
                         long long steps_limit) {
  if (got.steps.empty()) throw input_error(got.path + ": the trace has no step lines");
  check_same_kind_of_run(ref, got);
  const long long last = ref.steps.empty() ? 0 : ref.steps.back().at("step").get<long long>();
  if (steps_limit > last) {
    throw input_error("--steps " + std::to_string(steps_limit) + " is past the end of " + ref.path +
                      ", whose last step is " + std::to_string(last));
  }
  TraceDiff d;
  size_t j = 0;
  for (const Json& r : ref.steps) {
    const long long step = r.at("step").get<long long>();
    if (steps_limit > 0 && step > steps_limit) break;
    while (j < got.steps.size() && got.steps[j].at("step").get<long long>() < step) ++j;
    if (j == got.steps.size() || got.steps[j].at("step").get<long long>() != step) {
      d.missing.push_back(step);
      if (d.first_fail < 0) d.first_fail = step;
      d.pass = false;
      continue;
    }
    const StepDiff s = diff_step(r, got.steps[j], max_drift);
    if (d.steps.empty() || !(s.drift <= d.max_drift))
      d.max_drift = s.drift, d.max_drift_step = step;
    if (!s.pass && d.first_fail < 0) d.first_fail = step;
    d.pass = d.pass && s.pass;
    d.steps.push_back(s);
  }
  if (d.steps.empty() && d.missing.empty()) {
    throw input_error(ref.path + ": the reference trace has no step lines to compare");
  }
  return d;
}

}  // namespace reftrain
