#include "core/model/param_layout.h"

#include <stdexcept>

#include "simd/aligned_buffer.h"

namespace reftrain {

ParamLayout::ParamLayout(std::vector<ParamTensor> tensors) {
  for (int pass = 0; pass < 2; ++pass) {
    const bool decay = pass == 0;
    for (ParamTensor& t : tensors) {
      if (t.decay != decay) continue;
      t.numel = 1;
      for (int d : t.shape) t.numel *= size_t(d);
      t.offset = total_;
      total_ = align_floats(total_ + t.numel);
      tensors_.push_back(t);
    }
    if (decay) wd_end_ = total_;
  }
}

const ParamTensor& ParamLayout::get(const std::string& name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.name == name) return t;
  }
  throw std::out_of_range("no parameter tensor named " + name);
}

size_t ParamLayout::num_params() const {
  size_t n = 0;
  for (const ParamTensor& t : tensors_) n += t.numel;
  return n;
}

}  // namespace reftrain
