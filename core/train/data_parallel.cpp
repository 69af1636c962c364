#include "core/train/data_parallel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/base/error.h"
#include "optim/adamw8bit.h"
#include "optim/grad_accum.h"
#include "optim/kernel_table.h"

namespace reftrain {

namespace {
// Adds the wall time of its lifetime to `seconds`.
class Stopwatch {
 public:
  explicit Stopwatch(double& seconds) : seconds_(seconds) {}
  ~Stopwatch() {
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  double& seconds_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// Elements [s.begin, s.end) of a buffer of T, as bytes.
template <typename T>
Part part_of(const Shard& s) {
  return {s.begin * sizeof(T), s.size() * sizeof(T)};
}
}  // namespace

MicroBatches MicroBatches::of_ranks(int per_rank, int ranks) {
  return {per_rank * ranks, ranks};
}

MicroBatches MicroBatches::split(int total, int ranks) {
  if (total % ranks != 0) {
    throw usage_error("the checkpoint's steps have " + std::to_string(total) +
                      " micro-batches, which " + std::to_string(ranks) +
                      " ranks cannot share evenly; resume on a number of ranks that divides " +
                      std::to_string(total));
  }
  return {total, ranks};
}

DataParallel::DataParallel(Comm& comm, size_t wd_end, size_t total)
    : comm_(comm), wd_end_(wd_end), total_(total) {
  const int n = comm.size();
  for (int r = 0; r < n; ++r) shards_.push_back(zero_shard(wd_end, total, r, n));
  const Shard& window = shard().window;
  sum_ = AlignedBuffer<float>(window.size());
  parts_ = AlignedBuffer<float>(size_t(n) * window.size());
  for (int r = 0; r < n; ++r) {
    send_.push_back(part_of<float>(shards_[size_t(r)].window));
    recv_.push_back({size_t(r) * window.size() * sizeof(float), window.size() * sizeof(float)});
  }
}

void DataParallel::add_round(float* g, bool first_round) {
  {
    Stopwatch watch(exchange_seconds_);
    comm_.alltoall_parts(g, send_, parts_.data(), recv_);
  }
  const size_t w = sum_.size();
  for (int r = 0; r < comm_.size(); ++r) {
    accumulate_grad(sum_.data(), parts_.data() + size_t(r) * w, w, first_round && r == 0);
  }
  std::memset(static_cast<void*>(g), 0, total_ * sizeof(float));
}

double DataParallel::norm_sq(Kernels kernels) {
  double partial[kNormChunks] = {};
  const ZeroShard& s = shard();
  kernel_table(kernels).norm_sq_partials(sum_.data(), s.window.begin, total_, s.first_chunk,
                                         s.last_chunk, partial + s.first_chunk);
  std::vector<Part> parts;
  for (const ZeroShard& z : shards_) {
    parts.push_back({size_t(z.first_chunk) * sizeof(double),
                     size_t(z.last_chunk - z.first_chunk) * sizeof(double)});
  }
  comm_.allgather_parts(partial, parts);
  return add_norm_partials(partial);
}

void DataParallel::share_weights(float* w, WeightMirror mirror) {
  Stopwatch watch(exchange_seconds_);
  std::vector<Part> parts32, parts16;
  for (const ZeroShard& z : shards_) {
    parts32.push_back(part_of<float>(z.state));
    parts16.push_back(part_of<f16>(z.state));  // bf16's parts too: both are two bytes
  }
  static_assert(sizeof(f16) == sizeof(bf16), "the mirrors' parts are the same bytes");
  comm_.allgather_parts(w, parts32);
  if (mirror.w16) comm_.allgather_parts(mirror.w16, parts16);
  if (mirror.wb16) comm_.allgather_parts(mirror.wb16, parts16);
}

std::vector<float> DataParallel::gather(float loss) {
  std::vector<float> all(size_t(comm_.size()));
  comm_.allgather(&loss, all.data(), sizeof loss);
  return all;
}

std::unique_ptr<OptimizerState> DataParallel::gather_state(OptimizerState& mine) {
  std::unique_ptr<OptimizerState> whole;
  if (comm_.root()) {
    whole = std::make_unique<OptimizerState>(mine.kind(), wd_end_, total_, Kernels::kFast,
                                             Shard{0, total_}, mine.has_kahan());
  }
  // Each buffer's parts: element (or code byte) ranges of the shards, or their scale ranges.
  std::vector<Part> elements, halves, codes, scales;
  for (const ZeroShard& z : shards_) {
    elements.push_back(part_of<float>(z.state));
    halves.push_back(part_of<bf16>(z.state));
    codes.push_back({z.state.begin, quant_words(z.state.size()) * sizeof(uint32_t)});
    const size_t first = quant_scale_index(z.state.begin, wd_end_);
    scales.push_back(
        {first * sizeof(float), (quant_scale_index(z.state.end, wd_end_) - first) * sizeof(float)});
  }
  const auto dst = [&whole](auto buffer) -> void* {
    return whole ? static_cast<void*>(((*whole).*buffer)().data()) : nullptr;
  };
  if (mine.kind() == Optimizer::kAdamW) {
    comm_.gather_parts(mine.m().data(), dst(&OptimizerState::m), elements);
    comm_.gather_parts(mine.v().data(), dst(&OptimizerState::v), elements);
    if (mine.has_kahan()) {
      comm_.gather_parts(mine.kahan().data(), whole ? whole->kahan().data() : nullptr, halves);
    }
  } else {
    comm_.gather_parts(mine.m_codes().data(), dst(&OptimizerState::m_codes), codes);
    comm_.gather_parts(mine.v_codes().data(), dst(&OptimizerState::v_codes), codes);
    comm_.gather_parts(mine.m_scales().data(), dst(&OptimizerState::m_scales), scales);
    comm_.gather_parts(mine.v_scales().data(), dst(&OptimizerState::v_scales), scales);
  }
  return whole;
}

}  // namespace reftrain
