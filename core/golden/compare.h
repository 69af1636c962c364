// Comparing a result with a reference: element-wise metrics of two tensors and the per-step loss
// drift of two traces — the numbers behind `reftrain compare`. docs/golden-format.md gives the
// exact definitions; in short, with r the reference (file A) and x the result (file B):
//   max_abs = max |x − r|;   max_rel = max over r ≠ 0 of |x − r| / |r|
//   nmse    = Σ(x − r)² / Σr²  (ggml's test-backend-ops; 0/0 = 0)
//   ulp     = max distance in units in the last place, both in the reference's float type
//   drift   = |loss_x − loss_r| / |loss_r| per step (the parity gate: ≤ 5 % at every step)
// NaN equals NaN and an infinity equals itself; any other NaN or infinity is an infinite error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/formats/safetensors.h"
#include "core/formats/trace.h"

namespace reftrain {

// What "within tolerance" means for a tensor: every criterion that is on must hold.
//   allclose: |x − r| ≤ atol + rtol·|r| for every element (numpy.allclose)
//   max_nmse: nmse ≤ max_nmse          max_ulp: ulp ≤ max_ulp
struct Tolerance {
  bool allclose = true;
  double rtol = 1e-5, atol = 1e-8;
  double max_nmse = -1;  // < 0: not checked
  double max_ulp = -1;   // < 0: not checked
  std::string why;       // where a fixture states its reason

  static Tolerance exact();  // allclose with rtol = atol = 0
  Json to_json() const;
  // {"rtol", "atol"} (both or either; the other 0), "max_nmse", "max_ulp", "why": the keys
  // present are the criteria that are on. An input error naming `where` on anything else.
  static Tolerance from_json(const Json& j, const std::string& where);
};

// bf16 kernels' outputs: |x − r| ≤ 1e-5 + 1.6e-2·|r| (PyTorch assert_close's bf16 default).
// A bf16 kernel is one with a bf16 binding (its name ends in _bf16); its f32 outputs are judged
// so too, since they are sums of bf16 products (docs/golden-format.md, "Tolerances").
Tolerance bf16_tolerance();
// The tolerance of a tensor no option and no file states one for: bf16_tolerance() for a BF16
// tensor and for every tensor of a bf16 kernel's call in a kernel-call dump
// ("NNNN.<layer>.<kernel>_bf16.<binding>"), else `fallback` (compare's --rtol/--atol defaults).
Tolerance default_tolerance(const std::string& name, const SafeTensor& ref,
                            const Tolerance& fallback);

struct TensorDiff {
  std::string name;
  std::string dtype;  // the reference's
  std::vector<int64_t> shape;
  size_t numel = 0;
  double max_abs = 0, max_rel = 0, nmse = 0;
  double ulp = -1;   // max ulp distance; -1 when the dtypes differ (not defined)
  size_t worst = 0;  // the element that used most of the tolerance
  double used = 0;   // fraction of the tolerance used (the largest over the criteria that are on)
  bool pass = true;
};

// "[2,8,16]"
std::string shape_text(const std::vector<int64_t>& shape);

// Input error when the shapes differ or one tensor is an integer type and the other a float.
TensorDiff compare_tensor(const std::string& name, const SafeTensor& ref, const SafeTensor& got,
                          const Tolerance& tol);

struct StepDiff {
  long long step = 0;
  double loss_ref = 0, loss_got = 0, drift = 0;
  double norm_ref = 0, norm_got = 0, norm_rel = 0;  // grad_norm; NaN when a trace lacks it
  bool lr_differs = false;                          // lr given in both and not within 1e-6
  bool pass = true;
};

struct TraceDiff {
  std::vector<StepDiff> steps;  // the reference's steps (up to the limit), in order
  double max_drift = 0;
  long long max_drift_step = 0;
  long long first_fail = -1;       // first step past tolerance or missing from the result, -1 none
  std::vector<long long> missing;  // reference steps the result does not have
  bool pass = true;
};

// The reference's steps 1..steps_limit (all when 0) against the result's steps of the same
// numbers. A step passes when its drift ≤ max_drift and its lr agrees; a missing step fails.
// Input error when the result has no step lines, when steps_limit is past the reference's last
// step, or when the run lines name different architectures (model.arch), precisions
// (train.precision) or optimizers (optimizer.name).
TraceDiff compare_traces(const Trace& ref, const Trace& got, double max_drift,
                         long long steps_limit);

}  // namespace reftrain
