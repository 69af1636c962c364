// ParamLayout: the table that names every tensor inside the parameter mega-buffer. The weights
// w, gradients g and Adam moments m, v are separate buffers with this same layout. Tensors that
// take weight decay come first and contiguously, so the optimizer runs over exactly two ranges:
// [0, wd_end) with decay and [wd_end, total) without. Every tensor starts on a 64-byte line;
// the padding between tensors stays zero in w, g, m and v.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace reftrain {

// How a tensor starts: norm weights 1, biases 0, matrices and embeddings normal(0, 0.02), the
// projections that write into the residual stream normal(0, 0.02/√(2L)) (GPT-2's scaling).
enum class ParamInit { kOnes, kZeros, kNormal, kNormalResidual };

struct ParamTensor {
  std::string name;
  std::vector<int> shape;
  size_t offset = 0;  // in floats, from the start of the mega-buffer
  size_t numel = 0;
  bool decay = false;
  ParamInit init = ParamInit::kNormal;
  int init_rows = -1;  // rows drawn at init (vocab tables: V of Vp); the rest stay 0. -1 = all
};

class ParamLayout {
 public:
  // Takes the tensors in model order and assigns offsets: decayed tensors first.
  explicit ParamLayout(std::vector<ParamTensor> tensors);

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const ParamTensor& get(const std::string& name) const;  // throws std::out_of_range
  size_t total() const { return total_; }    // floats in the mega-buffer, padding included
  size_t wd_end() const { return wd_end_; }  // end of the weight-decay range
  size_t num_params() const;                 // parameters, padding excluded

 private:
  std::vector<ParamTensor> tensors_;  // in layout order
  size_t total_ = 0;
  size_t wd_end_ = 0;
};

}  // namespace reftrain
