// ZeRO-1 sharding of the optimizer state. With N data-parallel ranks, rank r keeps the optimizer
// state (m and v, or the 8-bit codes and scales) of one contiguous shard of the mega-buffer,
// updates only that shard's weights, and the ranks then exchange the updated weights. The state
// per rank falls as 1/N; the weights and the gradient buffer stay whole on every rank.
//
// Two things place the boundaries, and neither depends on N, so the bits do not either:
//   - the gradient norm's kNormChunks fixed chunks (optim/adamw.h): rank r sums whole chunks,
//     [64·r/N, 64·(r+1)/N), so its partial sums are the single process's;
//   - the 8-bit state's 256-element blocks, counted from the start of each range (wd, no-wd): a
//     shard starts on the block boundary at or below its first chunk's start, so each block and
//     its scale belong to one rank.
// Rank r therefore needs the step's summed gradient on [state.begin, its last chunk's end): its
// window. Neighbouring windows overlap by less than a block; both ranks compute the same sums
// there (the sum is element-wise).
#pragma once

#include <cstddef>

#include "optim/adamw.h"

namespace reftrain {

struct Shard {
  size_t begin = 0, end = 0;  // mega-buffer elements [begin, end)
  size_t size() const { return end - begin; }
};

struct ZeroShard {
  Shard state;   // the optimizer state this rank keeps and the weights it updates
  Shard window;  // the summed gradient it needs: the state shard and its norm chunks
  int first_chunk = 0, last_chunk = 0;  // the norm chunks it sums: [first, last)
};

// At most one norm chunk per rank.
constexpr int kMaxRanks = kNormChunks;

// Rank `rank` of `ranks` (1 ≤ ranks ≤ kMaxRanks) in a mega-buffer of `total` elements whose
// first `wd_end` decay. One rank holds everything.
ZeroShard zero_shard(size_t wd_end, size_t total, int rank, int ranks);

// The 8-bit state's blocks before element i, which is a block boundary or a range's end: the
// index of the scale of the block that starts at i.
size_t quant_scale_index(size_t i, size_t wd_end);

}  // namespace reftrain
