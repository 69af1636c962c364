// Data-parallel training (core/train/data_parallel.h), run as a user runs it: `mpirun -np N
// reftrain train` against one process with --grad-accum N·K, byte for byte (trace and final
// checkpoint), for both families, all three precisions and both optimizers; resuming on another
// rank count; a rank killed mid-run; ranks given different data. And, without MPI, the sharding
// itself: N simulated ranks' norm partials, sharded updates and gathered state against the whole
// optimizer step.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/train/checkpoint.h"
#include "core/train/config.h"
#include "core/train/data_parallel.h"
#include "optim/adamw8bit.h"
#include "optim/optimizer.h"
#include "optim/zero_shard.h"
#include "tests/common/cli_util.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {
namespace {

namespace fs = std::filesystem;

// --- the shards --------------------------------------------------------------------------------

bool on_block_boundary(size_t i, size_t wd_end, size_t total) {
  if (i == total || i == wd_end) return true;
  return i < wd_end ? i % kQuantBlock == 0 : (i - wd_end) % kQuantBlock == 0;
}

// The state shards tile the buffer in rank order, each starting on an 8-bit block boundary; the
// norm chunks are dealt out whole and in order; each window holds its shard and its chunks.
// --grad-accum K on N ranks is N·K micro-batches a step; a step of M shares out only when N
// divides M, and otherwise one line says so (what a checkpoint resumed on 3 ranks meets).
TEST(MicroBatches, RanksTimesPerRankAndBack) {
  const MicroBatches m = MicroBatches::of_ranks(3, 4);
  EXPECT_EQ(m.total, 12);
  EXPECT_EQ(MicroBatches::split(12, 4).per_rank(), 3);
  try {
    MicroBatches::split(2, 3);
    FAIL() << "3 ranks shared 2 micro-batches";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "the checkpoint's steps have 2 micro-batches, which 3 ranks cannot share evenly; "
              "resume on a number of ranks that divides 2");
  }
}

TEST(ZeroShard, ShardsTileTheBufferOnBlockBoundaries) {
  std::vector<std::pair<size_t, size_t>> buffers = {{1000, 1300}, {256, 512}, {48, 64}};
  for (const char* preset : {"tiny", "llama-tiny", "baby"}) {
    const ParamLayout layout = param_layout(find_preset(preset).model);
    buffers.push_back({layout.wd_end(), layout.total()});
  }
  for (const auto& [wd_end, total] : buffers) {
    for (int n : {1, 2, 3, 4, 7, 16, kMaxRanks}) {
      size_t next = 0;
      int next_chunk = 0;
      for (int r = 0; r < n; ++r) {
        const ZeroShard s = zero_shard(wd_end, total, r, n);
        SCOPED_TRACE("buffer " + std::to_string(total) + " rank " + std::to_string(r) + "/" +
                     std::to_string(n));
        EXPECT_EQ(s.state.begin, next);
        EXPECT_LE(s.state.begin, s.state.end);
        EXPECT_TRUE(on_block_boundary(s.state.begin, wd_end, total));
        EXPECT_EQ(s.first_chunk, next_chunk);
        EXPECT_EQ(s.window.begin, s.state.begin);
        EXPECT_GE(s.window.end, s.state.end);
        EXPECT_LE(s.window.begin, norm_chunk_begin(total, s.first_chunk));
        EXPECT_EQ(s.window.end, norm_chunk_begin(total, s.last_chunk));
        EXPECT_LT(s.window.end - s.state.end, kQuantBlock);  // windows overlap by < a block
        next = s.state.end, next_chunk = s.last_chunk;
      }
      EXPECT_EQ(next, total);
      EXPECT_EQ(next_chunk, kNormChunks);
    }
  }
}

// N simulated ranks: each computes its chunks' norm partials from its window of the gradient,
// updates its shard from the shared norm, and the shards' weights, mirror and state are put
// together. Three steps later everything equals the whole state's step() bit for bit.
enum class MirrorKind { kNone, kF16, kBf16 };

struct ShardCase {
  Optimizer kind;
  MirrorKind mirror;
  Kernels kernels;
  int ranks;
};

// A buffer's mirror of the case's kind (empty vectors where it has none), and the pointers the
// optimizer takes.
struct DpMirror {
  std::vector<f16> w16;
  std::vector<bf16> wb16;
  DpMirror(MirrorKind kind, size_t n)
      : w16(kind == MirrorKind::kF16 ? n : 0), wb16(kind == MirrorKind::kBf16 ? n : 0) {}
  WeightMirror pointers() {
    return {w16.empty() ? nullptr : w16.data(), wb16.empty() ? nullptr : wb16.data()};
  }
  // Elements [begin, end) of `from`'s mirror into this one: a rank's shard, shared.
  void take(const DpMirror& from, size_t begin, size_t end) {
    const auto part = [&](const auto& src, auto& dst) {
      std::copy(src.begin() + long(begin), src.begin() + long(end), dst.begin() + long(begin));
    };
    if (!w16.empty()) part(from.w16, w16);
    if (!wb16.empty()) part(from.wb16, wb16);
  }
  bool same_bytes(
      const DpMirror& o) const {  // memcmp's pointers must not be null, even for 0 bytes
    return (w16.empty() || std::memcmp(w16.data(), o.w16.data(), w16.size() * 2) == 0) &&
           (wb16.empty() || std::memcmp(wb16.data(), o.wb16.data(), wb16.size() * 2) == 0);
  }
};

class ShardedStep : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardedStep, EqualsTheWholeStep) {
  const ShardCase c = GetParam();
  const size_t wd_end = 3 * 256 + 100, total = wd_end + 600;  // partial blocks at both ends
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(total), w_whole, w_ranks;
  for (float& x : w) x = normal(rng);
  w_whole = w_ranks = w;
  DpMirror m_whole(c.mirror, total), m_ranks(c.mirror, total);
  OptimizerState whole(c.kind, wd_end, total, c.kernels);
  std::vector<OptimizerState> shards;
  for (int r = 0; r < c.ranks; ++r) {
    shards.emplace_back(c.kind, wd_end, total, c.kernels,
                        zero_shard(wd_end, total, r, c.ranks).state);
  }
  const AdamWHyper hp{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (int t = 1; t <= 3; ++t) {
    std::vector<float> g(total);
    for (float& x : g) x = normal(rng) * 3.0f;
    std::vector<float> g_whole = g;
    const GradStats want =
        whole.step(w_whole.data(), g_whole.data(), m_whole.pointers(), hp, 1.0f, t);
    double partial[kNormChunks];
    std::vector<std::vector<float>> windows;
    for (int r = 0; r < c.ranks; ++r) {
      const ZeroShard s = zero_shard(wd_end, total, r, c.ranks);
      windows.emplace_back(g.begin() + long(s.window.begin), g.begin() + long(s.window.end));
      (c.kernels == Kernels::kFast ? norm_sq_partials_fast : norm_sq_partials)(
          windows.back().data(), s.window.begin, total, s.first_chunk, s.last_chunk,
          partial + s.first_chunk);
    }
    const GradStats stats = finalize_grad_stats(add_norm_partials(partial), 1.0f);
    ASSERT_EQ(std::memcmp(&stats, &want, sizeof stats), 0) << "the norm at step " << t;
    std::vector<float> w_next = w_ranks;
    DpMirror m_next = m_ranks;
    for (int r = 0; r < c.ranks; ++r) {  // each rank on its own copy; then its shard is shared
      const ZeroShard s = zero_shard(wd_end, total, r, c.ranks);
      std::vector<float> w_rank = w_ranks;
      DpMirror m_rank = m_ranks;
      shards[size_t(r)].apply(w_rank.data(), windows[size_t(r)].data(), s.window.begin,
                              m_rank.pointers(), stats, hp, t);
      std::copy(w_rank.begin() + long(s.state.begin), w_rank.begin() + long(s.state.end),
                w_next.begin() + long(s.state.begin));
      m_next.take(m_rank, s.state.begin, s.state.end);
    }
    w_ranks = w_next, m_ranks = m_next;
  }
  EXPECT_EQ(std::memcmp(w_ranks.data(), w_whole.data(), total * sizeof(float)), 0);
  EXPECT_TRUE(m_ranks.same_bytes(m_whole));
  // The whole step's mirror is the cast of its weights (fused or by the 8-bit kernels' pass).
  if (c.mirror == MirrorKind::kBf16) {
    std::vector<bf16> cast(total);
    cast_f32_to_bf16(cast.data(), w_whole.data(), total);
    EXPECT_EQ(std::memcmp(cast.data(), m_whole.wb16.data(), total * sizeof(bf16)), 0);
  }
  // The shards' state, put together in rank order, is the whole state.
  const auto concat = [&](auto buffer) {
    std::vector<uint8_t> all;
    for (OptimizerState& s : shards) {
      const auto& b = (s.*buffer)();
      const auto* p = reinterpret_cast<const uint8_t*>(b.data());
      all.insert(all.end(), p, p + b.size() * sizeof(*b.data()));
    }
    return all;
  };
  const auto bytes = [&](auto buffer) {
    const auto& b = (whole.*buffer)();
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    return std::vector<uint8_t>(p, p + b.size() * sizeof(*b.data()));
  };
  if (c.kind == Optimizer::kAdamW) {
    EXPECT_TRUE(concat(&OptimizerState::m) == bytes(&OptimizerState::m));
    EXPECT_TRUE(concat(&OptimizerState::v) == bytes(&OptimizerState::v));
  } else {
    EXPECT_TRUE(concat(&OptimizerState::m_scales) == bytes(&OptimizerState::m_scales));
    EXPECT_TRUE(concat(&OptimizerState::v_scales) == bytes(&OptimizerState::v_scales));
    // Codes: every shard but the last ends on a multiple of 4 elements, so the words concatenate.
    EXPECT_TRUE(concat(&OptimizerState::m_codes) == bytes(&OptimizerState::m_codes));
    EXPECT_TRUE(concat(&OptimizerState::v_codes) == bytes(&OptimizerState::v_codes));
  }
}

INSTANTIATE_TEST_SUITE_P(
    KindsMirrorsKernelsRanks, ShardedStep,
    ::testing::Values(ShardCase{Optimizer::kAdamW, MirrorKind::kNone, Kernels::kFast, 3},
                      ShardCase{Optimizer::kAdamW, MirrorKind::kF16, Kernels::kFast, 4},
                      ShardCase{Optimizer::kAdamW, MirrorKind::kBf16, Kernels::kFast, 3},
                      ShardCase{Optimizer::kAdamW, MirrorKind::kBf16, Kernels::kReference, 2},
                      ShardCase{Optimizer::kAdamW, MirrorKind::kNone, Kernels::kReference, 2},
                      ShardCase{Optimizer::kAdamW8bit, MirrorKind::kNone, Kernels::kFast, 3},
                      ShardCase{Optimizer::kAdamW8bit, MirrorKind::kF16, Kernels::kFast, 7},
                      ShardCase{Optimizer::kAdamW8bit, MirrorKind::kBf16, Kernels::kFast, 4},
                      ShardCase{Optimizer::kAdamW8bit, MirrorKind::kF16, Kernels::kReference, 2}));

// --- mpirun ------------------------------------------------------------------------------------
#ifdef REFTRAIN_MPIEXEC  // a build with MPI (tests/CMakeLists.txt refuses tests without it)

// The environment mpirun needs here. Open MPI refuses root without its two variables (CI runs
// as root). In the sanitize job, LeakSanitizer would report Open MPI's own allocations, made in
// plugins it unloads before exit (so no suppression can name them): the ranks run without leak
// detection, with every other ASan and UBSan check on.
#define MPI_ENV                                                \
  "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " \
  "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:detect_leaks=0\" "

// `mpirun -np N reftrain ARGS`; --oversubscribe lets 4 ranks share 2 cores.
CommandResult run_ranks(int n, const std::string& args) {
  return run_command(MPI_ENV REFTRAIN_MPIEXEC " -np " + std::to_string(n) + " --oversubscribe " +
                     REFTRAIN_BIN + " " + args);
}

struct DpCase {
  const char* preset;
  const char* precision;
  const char* optimizer;
};

void PrintTo(const DpCase& c, std::ostream* os) {
  *os << c.preset << "/" << c.precision << "/" << c.optimizer;
}

class DataParallel : public LearnableTextTest {
 protected:
  // One process with --grad-accum `k`, or N ranks with --grad-accum k/N: the trace and the
  // directory of checkpoints under dir_/NAME.
  void train(int ranks, int k, const std::string& name, const std::string& args) {
    const std::string run = "train --data " + text_ + " --threads 1 --val-every 4 --grad-accum " +
                            std::to_string(k / ranks) + " --trace " + dir_.file(name + ".jsonl") +
                            " --out " + dir_.file(name) + " " + args;
    const CommandResult r = ranks == 1 ? run_reftrain(run) : run_ranks(ranks, run);
    ASSERT_EQ(r.exit_code, 0) << ranks << " ranks: " << run << "\n" << r.output;
    last_output_ = r.output;
  }
  void expect_same_run(const std::string& a, const std::string& b, int step) {
    expect_same_trace(dir_.file(a + ".jsonl"), dir_.file(b + ".jsonl"));
    const std::string ckpt = checkpoint_file_name(step);
    EXPECT_TRUE(read_file(fs::path(dir_.file(a)) / ckpt) ==
                read_file(fs::path(dir_.file(b)) / ckpt))
        << a << " and " << b << ": the final checkpoints differ";
  }
  std::string last_output_;
};

class DataParallelCases : public DataParallel, public ::testing::WithParamInterface<DpCase> {};

// 2 ranks × 1 micro-batch against one process × 2: the same trace lines and checkpoint bytes.
TEST_P(DataParallelCases, TwoRanksEqualOneProcessWithTwiceTheAccumulation) {
  const DpCase c = GetParam();
  const std::string args = std::string("--preset ") + c.preset + " --precision " + c.precision +
                           " --optimizer " + c.optimizer + " --steps 8";
  train(1, 2, "one", args);
  train(2, 2, "two", args);
  EXPECT_NE(last_output_.find("K2 = 2 ranks × 1"), std::string::npos) << last_output_;
  EXPECT_NE(last_output_.find("per rank (ZeRO-1: 1/2 of"), std::string::npos) << last_output_;
  expect_same_run("one", "two", 8);
}

INSTANTIATE_TEST_SUITE_P(
    FamiliesPrecisionsOptimizers, DataParallelCases,
    ::testing::Values(DpCase{"tiny", "fp32", "adamw"}, DpCase{"tiny", "fp32", "adamw8bit"},
                      DpCase{"tiny", "mixed", "adamw"}, DpCase{"tiny", "mixed", "adamw8bit"},
                      DpCase{"llama-tiny", "fp32", "adamw"},
                      DpCase{"llama-tiny", "fp32", "adamw8bit"},
                      DpCase{"llama-tiny", "mixed", "adamw"},
                      DpCase{"llama-tiny", "mixed", "adamw8bit"}, DpCase{"tiny", "bf16", "adamw"},
                      DpCase{"llama-tiny", "bf16", "adamw8bit"},
                      DpCase{"tiny", "bf16-pure", "adamw"}, DpCase{"tiny", "bf16-kahan", "adamw"}));

// The bar: 1, 2 and 4 ranks sharing 4 micro-batches per step train what one process does.
TEST_F(DataParallel, OneTwoAndFourRanksEqualOneProcess) {
  const std::string args = "--preset llama-tiny --precision mixed --optimizer adamw8bit --steps 6";
  train(1, 4, "single", args);
  for (int n : {1, 2, 4}) {
    train(n, 4, "ranks" + std::to_string(n), args);
    expect_same_run("single", "ranks" + std::to_string(n), 6);
  }
}

// Stopped on 2 ranks and resumed on 1, and stopped on 1 and resumed on 2: each ends with the
// bytes of the run that never stopped.
TEST_F(DataParallel, ResumesOnAnotherRankCount) {
  const std::string args = "--preset tiny --precision mixed --optimizer adamw --steps 10";
  train(1, 2, "straight", args);
  train(2, 2, "two_then_one", args + " --stop-after 5");
  train(1, 2, "one_then_two", args + " --stop-after 5");
  const std::string resume1 = "train --threads 1 --resume " + dir_.file("two_then_one") +
                              " --trace " + dir_.file("two_then_one.jsonl");
  const CommandResult r1 = run_reftrain(resume1);
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  const CommandResult r2 = run_ranks(2, "train --threads 1 --resume " + dir_.file("one_then_two") +
                                            " --trace " + dir_.file("one_then_two.jsonl"));
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  expect_same_run("straight", "two_then_one", 10);
  expect_same_run("straight", "one_then_two", 10);
  // 3 ranks cannot share a step of 2 micro-batches: one line says so.
  const CommandResult r3 = run_ranks(3, "train --resume " + dir_.file("straight") + " --steps 12");
  EXPECT_NE(r3.exit_code, 0);
  EXPECT_NE(r3.output.find("the checkpoint's steps have 2 micro-batches, which 3 ranks cannot "
                           "share evenly"),
            std::string::npos)
      << r3.output;
}

// Ranks given different data (mpirun's MPMD form: one command per rank) refuse to train.
TEST_F(DataParallel, RanksWithDifferentDataStop) {
  const std::string other = dir_.file("other.txt");
  write_file(other, read_file(text_) + "one more line\n");
  const std::string run = std::string(" --oversubscribe ") + REFTRAIN_BIN +
                          " train --preset tiny --steps 2 --threads 1 --data ";
  const CommandResult r =
      run_command(MPI_ENV REFTRAIN_MPIEXEC " -np 1" + run + text_ + " : -np 1" + run + other);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rank 1 would train another run than rank 0 (its data or configuration "
                          "differs"),
            std::string::npos)
      << r.output;
}

// Ranks given different checkpoint flags entered their collective saves at different steps (or
// one rank alone) and waited for each other forever, at 100 % CPU; now the first check says
// which flag differs. `timeout` turns the old hang into a failure.
TEST_F(DataParallel, RanksWithDifferentCheckpointFlagsStop) {
  const std::string run = std::string(" --oversubscribe ") + REFTRAIN_BIN +
                          " train --preset tiny --steps 6 --threads 1 --data " + text_ + " ";
  const struct {
    std::string rank0, rank1, message;
  } cases[] = {
      {"--out " + dir_.file("a0") + " --save-every 2",
       "--out " + dir_.file("a1") + " --save-every 3",
       "rank 1's --save-every (3) differs from rank 0's (2)"},
      {"--out " + dir_.file("b0"), "", "rank 1's --out (not given) differs from rank 0's (given)"},
      {"--out " + dir_.file("c0") + " --stop-after 2",
       "--out " + dir_.file("c1") + " --stop-after 4",
       "rank 1's --stop-after (4) differs from rank 0's (2)"},
  };
  for (const auto& c : cases) {
    const CommandResult r = run_command("timeout 120 env " MPI_ENV REFTRAIN_MPIEXEC " -np 1" + run +
                                        c.rank0 + " : -np 1" + run + c.rank1);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(" of 2: " + c.message), std::string::npos) << r.output;
  }
}

// The pid of the rank `rank` process that mpirun started, found by its environment.
pid_t rank_pid(int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = read_file(e.path() / "cmdline");
    if (cmdline.find(REFTRAIN_BIN) != 0) continue;
    std::string env = read_file(e.path() / "environ");
    std::replace(env.begin(), env.end(), '\0', '\n');
    if (("\n" + env).find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") !=
        std::string::npos) {
      return pid_t(std::stoi(name));
    }
  }
  return -1;
}

// Rank 1 killed after the checkpoint of step 10 of 600 (about 2 s of run left then, 15 under the
// sanitizers; the kill follows the checkpoint within milliseconds): mpirun ends the job, naming
// the rank and the signal, and the last checkpoint resumes (on one process) to the uninterrupted
// run's bytes.
TEST_F(DataParallel, KilledRankEndsTheJobAndTheLastCheckpointResumes) {
  const std::string args = "--preset tiny --steps 600 --save-every 10 --keep 2";
  train(1, 2, "straight", args);
  const std::string dir = dir_.file("killed"), trace = dir_.file("killed.jsonl");
  Background job("train --data " + text_ + " --threads 1 --val-every 4 --grad-accum 1 " + args +
                     " --trace " + trace + " --out " + dir,
                 dir_.file("out.txt"), dir_.file("err.txt"),
                 "env " MPI_ENV REFTRAIN_MPIEXEC " -np 2 --oversubscribe");
  ASSERT_TRUE(wait_for([&] { return fs::exists(fs::path(dir) / checkpoint_file_name(10)); }, 120))
      << read_file(dir_.file("err.txt"));
  const pid_t victim = rank_pid(1);
  ASSERT_GT(victim, 0) << "no rank 1 process";
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const int code = job.wait();
  EXPECT_NE(code, 0);
  const std::string err = read_file(dir_.file("err.txt")) + read_file(dir_.file("out.txt"));
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("signal 9"), std::string::npos) << err;
  const std::vector<std::string> left = files_in(dir);
  ASSERT_FALSE(left.empty());
  EXPECT_LT(left.back(), checkpoint_file_name(600)) << "the run should not have finished";
  const CommandResult r = run_reftrain("train --threads 1 --resume " + dir + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_run("straight", "killed", 600);
}

#endif  // REFTRAIN_MPIEXEC

}  // namespace
}  // namespace reftrain::testing
