#include "optim/zero_shard.h"

#include <stdexcept>

#include "optim/adamw8bit.h"

namespace reftrain {

namespace {
// The block boundary at or below element i: blocks start every kQuantBlock elements from 0 in
// the wd range and from wd_end in the no-wd range.
size_t block_floor(size_t i, size_t wd_end) {
  if (i < wd_end) return i - i % kQuantBlock;
  return i - (i - wd_end) % kQuantBlock;
}
}  // namespace

ZeroShard zero_shard(size_t wd_end, size_t total, int rank, int ranks) {
  if (ranks < 1 || ranks > kMaxRanks || rank < 0 || rank >= ranks) {
    throw std::logic_error("zero_shard: rank out of range");
  }
  const auto first_chunk = [ranks](int r) { return kNormChunks * r / ranks; };
  const auto state_begin = [&](int r) {
    return r == ranks ? total : block_floor(norm_chunk_begin(total, first_chunk(r)), wd_end);
  };
  ZeroShard s;
  s.first_chunk = first_chunk(rank), s.last_chunk = first_chunk(rank + 1);
  s.state = {state_begin(rank), state_begin(rank + 1)};
  s.window = {s.state.begin, norm_chunk_begin(total, s.last_chunk)};
  return s;
}

size_t quant_scale_index(size_t i, size_t wd_end) {
  return i <= wd_end ? quant_blocks(i) : quant_blocks(wd_end) + quant_blocks(i - wd_end);
}

}  // namespace reftrain
