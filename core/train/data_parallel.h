// Data-parallel training over the ranks of a Comm (core/dist/comm.h), deterministic and with the
// optimizer state sharded (ZeRO-1, optim/zero_shard.h).
//
// A step of M micro-batches on N ranks (M = N·K) runs K rounds. In round j every rank computes
// the gradient of micro-batch j·N + rank from zero; each rank then receives, from every rank in
// turn, the part of that rank's gradient inside its own window and adds the N parts in rank
// order, which is micro-batch order. So the window holds ((g₀ + g₁) + g₂) + … + g_{M−1}, the
// expression one process with --grad-accum M evaluates (optim/grad_accum.h), element for
// element, whatever N is. The gradient norm is the same 64 fixed chunk sums added in order; each
// rank updates its shard with the shared norm, and the ranks exchange their updated weights (and
// fp16 mirror). No step sums anything inside MPI.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/dist/comm.h"
#include "ops/cast.h"
#include "optim/optimizer.h"
#include "simd/aligned_buffer.h"

namespace reftrain {

// How N ranks share a step's M micro-batches (TrainConfig::grad_accum): K = M/N each, in rounds.
// --grad-accum K is per rank, so the command line asks for M = N·K; only a checkpoint resumed on
// another number of ranks can ask for an M that N does not divide.
struct MicroBatches {
  int total = 1;  // M
  int ranks = 1;  // N
  int per_rank() const { return total / ranks; }
  // N ranks accumulating K micro-batches each.
  static MicroBatches of_ranks(int per_rank, int ranks);
  // M micro-batches on N ranks; a one-line usage error when N does not divide M.
  static MicroBatches split(int total, int ranks);
};

class DataParallel {
 public:
  // The shards of a mega-buffer of `total` floats whose first `wd_end` decay, over comm's ranks
  // (at most kMaxRanks).
  DataParallel(Comm& comm, size_t wd_end, size_t total);

  Comm& comm() { return comm_; }
  const ZeroShard& shard() const { return shards_[size_t(comm_.rank())]; }

  // One round: g is this rank's micro-batch gradient (the whole buffer, computed from zero).
  // Afterwards this rank's window holds the sum so far (the first round starts it) and g is 0.
  void add_round(float* g, bool first_round);
  float* window() { return sum_.data(); }
  // Σg² of the summed gradient: what reduce_norm_sq(_fast) of the whole sum returns.
  double norm_sq(Kernels kernels);
  // After every rank's OptimizerState::apply: each rank's updated shard of w (and of the fp16
  // or bf16 mirror, where there is one) to every rank.
  void share_weights(float* w, WeightMirror mirror);
  // A step's or validation's losses: each rank's, in rank order.
  std::vector<float> gather(float loss);

  // Wall time this rank has spent exchanging gradients and weights (waiting for the others
  // included), for the report at the end of a run.
  double exchange_seconds() const { return exchange_seconds_; }

  // The whole optimizer state, gathered on rank 0 from every rank's shard `mine`, for a
  // checkpoint; null on the other ranks.
  std::unique_ptr<OptimizerState> gather_state(OptimizerState& mine);

 private:
  Comm& comm_;
  size_t wd_end_, total_;
  std::vector<ZeroShard> shards_;  // every rank's
  AlignedBuffer<float> sum_;       // this rank's window of the step's gradient sum
  AlignedBuffer<float> parts_;     // one round's N parts of the window, in rank order
  std::vector<Part> send_, recv_;  // where each rank's part lies in g, and in parts_
  double exchange_seconds_ = 0.0;
};

}  // namespace reftrain
