// The bf16 matmul family: C (+)= op(A)·op(B) with A and B in bf16 and C in f32, in one fixed
// order, the canonical bf16 product, so that every ISA (AMX, AVX512_BF16, AVX2, AVX-512F, NEON)
// and a WGSL twin give the same bits. The same GEMM serves the three products of a linear layer
// (ops/linear.h's layouts) and the attention's (ops/attention_bf16.h).
//
//   C[i,j] = init, then for each block of 32 k (the last padded with zeros):
//              E = +0; E = fma(A[i,k], B[k,j], E) for the block's even k, ascending
//              O = +0; O = fma(A[i,k], B[k,j], O) for the block's odd k, ascending
//              C = C + (E + O)
//   init = accumulate ? C[i,j] : (bias ? bias[j] : +0)
//   Every FMA and add reads subnormal inputs as zero and flushes subnormal results to ±0 after
//   rounding to nearest even (ops/bf16.h: fma_flush, add_flush); init is flushed likewise.
//
// Why this order: it is what AMX's TDPBF16PS computes per 32-wide block (Intel SDM; the simpler
// order of the Intrinsics Guide does not match the hardware), so AMX runs it at full rate, and
// VDPBF16PS (two FMAs per 32-bit pair, the high half first, flushing built in) reproduces it when
// each pair holds two steps of one chain (simd/dot_bf16.h: the pair packing); plain FMAs under
// FTZ|DAZ reproduce it anywhere. One output is one chain of blocks: the work is split over M×N
// only, never over K, so no thread count changes a bit. ARM's BFDOT/BFMMLA round differently
// (round-to-odd, a fused pair sum): they cannot run it. AArch64's flush decides tininess before
// rounding: an exact result in [2^-126 - 2^-151, 2^-126) becomes 0 there instead of 2^-126.
//
// Paths (Bf16Path): reference (gemm_bf16_reference, ops/bf16.h's scalar dot, one output at a
// time, the teaching version); emulated, dpbf16, amx (MatmulBf16: the operands packed once per
// call into shared panels — AMX reads a row-major A in place when its rows fill whole tiles —
// then tiles of C over the threads, each accumulated in place; on the emulated path a product of
// at most kRowsPathMax rows instead packs each panel of op(B) as it runs over it: run_rows). Tests
// hold all of them bit-identical at any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/bf16.h"
#include "ops/matmul.h"
#include "simd/aligned_buffer.h"

namespace reftrain {

// What a caller knows about where a product's zeros are (the attention's causal mask), so that
// a fast path can skip work without changing a stored bit; the reference computes everything.
// Skipping a whole block of K whose A terms are all +0 is exact when B is finite: each FMA of the
// block gives +0, E + O = +0, and C + (+0) is C, except that −0 becomes +0, which the fast paths
// apply instead (an Inf or NaN in B would have made the block's sum NaN).
enum class Bf16Causal {
  kNone,
  kLowerOutput,  // only C[i,j] with j ≤ i is wanted: C above the diagonal is left unspecified
  kLowerA,       // A(i,k) = +0 for k > i, and B holds no Inf or NaN
  kUpperA,       // A(i,k) = +0 for k < i, and B holds no Inf or NaN
};

// One product; A(i,p) = a[i·lda + p] (kNo) or a[p·lda + i] (kYes), B(p,j) = b[p·ldb + j] (kNo)
// or b[j·ldb + p] (kYes), as in ops/matmul.h.
struct GemmBf16 {
  int M = 0, N = 0, K = 0;
  const bf16* a = nullptr;
  Trans ta = Trans::kNo;
  size_t lda = 0;
  const bf16* b = nullptr;
  Trans tb = Trans::kNo;
  size_t ldb = 0;
  float* c = nullptr;
  size_t ldc = 0;
  bool accumulate = false;
  const float* bias = nullptr;  // [N], the initial value when not accumulating; may be null
  Bf16Causal causal = Bf16Causal::kNone;
};

enum class Bf16Path { kReference, kEmulated, kDpbf16, kAmx };
const char* bf16_path_name(Bf16Path p);
// Whether this build and CPU run the path (amx: compiled in and granted by the kernel).
bool bf16_path_available(Bf16Path p);
// The fastest available: amx; dpbf16 where it multiplies faster than the FMAs the emulation runs
// (simd/dot_bf16.h, dpbf16_outruns_fma); else emulated.
Bf16Path bf16_best_path();

// The reference: every output on its own, dot_bf16_canonical, parallel over rows of C.
void gemm_bf16_reference(const GemmBf16& g, int threads);

// On the emulated path, products of at most this many rows (decoding's) take a path of their
// own: each panel of op(B) packed as it is used (MatmulBf16::run_rows). On a Zen 4 it ran one or
// two rows 1.3-3.5× faster than the general path at 1 and 2 threads, but three or four no faster
// at 2 threads. VDPBF16PS's general path, which does not widen, was as fast as it on one row at 2
// threads, so that path takes the few-rows path only for an op(B) it keeps packed
// (keep_weights), where no packing is left: with that, baby's bf16 decoding ran 1.6× (1 thread)
// and 2.0× (2 threads) as many tokens a second on a Zen 4 (bench/RESULTS.md). AMX does the same
// for the same reason (its general path packs op(B) at every call too); not yet measured there.
constexpr int kRowsPathMax = 2;

// A fast path with its workspace (the packed panels), which grows to the largest product run
// and is reused; threads ≤ 0 means omp_get_max_threads(), and no more than that is used.
// kReference runs the reference.
class MatmulBf16 {
 public:
  explicit MatmulBf16(Bf16Path path = bf16_best_path(), int threads = 0);
  Bf16Path path() const { return path_; }
  int threads() const { return threads_; }
  void run(const GemmBf16& g);
  // One engine of the same path per thread of this one, each running its products on one thread
  // (work spread over the threads one small product each: the attention's heads). Made at the
  // first call and kept, with their workspaces, so that later calls allocate nothing.
  std::vector<MatmulBf16>& single_thread_engines();
  // Decoding runs every weight over one row per token, and the weights do not change between
  // tokens. With keep_weights on, the few-rows path keeps each op(B) it packs (keyed by its
  // address, stride and layout) and, at the next product with that B, reads the kept panels
  // instead of packing it again: the caller promises that B's bits have not changed. A kept B may
  // have grown (a KV cache's keys by rows of op(B), its values by k): then the caller promises
  // that the part packed before has not changed, and only the new part is packed. forget_weights()
  // drops what is kept (the memory stays for the next), and must be called whenever the bits may
  // have changed.
  void keep_weights(bool on) { keep_ = on; }
  void forget_weights();
  // Bytes an engine of `path` with keep_weights on keeps for an op(B) of N × K (a weight, or a
  // KV cache's keys or values at their full length): its panels, padded; 0 on the reference.
  static size_t kept_weight_bytes(Bf16Path path, int N, int K);
  // Bytes this engine keeps now (valid or not: the memory stays).
  size_t kept_bytes() const;
  // The elements each workspace buffer grows to for one product of g's shape (its pointers are
  // not read) on an engine of `path` with `threads` threads (as the constructor clamps them) and
  // keep_weights `keep`. A buffer keeps its largest, so an engine's workspace is, buffer by
  // buffer, the largest over the products it runs (grow): what estimate_memory counts.
  struct Workspace {
    size_t pa = 0, pb = 0, fa = 0, fb = 0, tiles = 0, inits = 0;
    void grow(const Workspace& w);
    size_t bytes() const;
  };
  static Workspace workspace(Bf16Path path, int threads, bool keep, const GemmBf16& g);
  // Bytes of the workspace this engine and its single-thread engines hold now (not what it keeps).
  size_t workspace_bytes() const;

 private:
  enum class Route { kReference, kRows, kPairs, kAmx };
  static Route route(Bf16Path path, bool keep, const GemmBf16& g);
  void reserve_workspace(const GemmBf16& g);
  void run_rows(const GemmBf16& g);
  void run_pairs(const GemmBf16& g);
  void run_amx(const GemmBf16& g);
  void pack_pairs(const GemmBf16& g, int kb, size_t arow, size_t bpanel);
  void widen_pairs(const GemmBf16& g, int kb, size_t arow, size_t bpanel);
  const bf16* pack_amx(const GemmBf16& g, int kb, size_t panel, bool in_place, size_t lda);
  const uint32_t* kept_panels(const GemmBf16& g, int kb, size_t bpanel, int panels);
  // keep_weights: one op(B) in run_rows's panels (its N and K when packed), valid until
  // forget_weights()
  struct KeptB {
    const bf16* b;
    int N, K;
    size_t ldb;
    Trans tb;
    bool valid;
    AlignedBuffer<uint32_t> words;
  };
  Bf16Path path_;
  int threads_;
  AlignedBuffer<uint32_t> pa_, pb_;  // packed A and B (AMX: bf16 pairs in the words)
  AlignedBuffer<float> fa_, fb_;     // the emulated path: pa_ and pb_ widened to f32
  AlignedBuffer<float> tiles_;       // per-thread C tiles
  AlignedBuffer<float> inits_;       // a product's inits as one row, when every row's are equal
  std::vector<MatmulBf16> singles_;  // single_thread_engines()
  bool keep_ = false;
  std::vector<KeptB> kept_;
};

}  // namespace reftrain
