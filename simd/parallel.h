// How the kernels whose items are independent (element blocks, rows) split them between OpenMP
// threads: every thread owns a fixed share, the same for every kernel of a step, and runs it
// from its front, so the rows a thread wrote in one kernel are the rows it reads in the next
// (they are still in its cache). A thread that finishes its share then takes items from the
// back of the others' shares: when another program slows one core, its thread's leftover items
// go to whoever is free instead of holding the kernel's end (schedule(static) waits for them;
// schedule(dynamic) gives up the locality on a quiet machine). Which thread runs an item changes
// none of its bits, so bodies must not depend on it.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace reftrain::simd {

namespace parallel_detail {

// One thread's share [front, back) of the items, both ends in one word so that the owner
// (taking the front) and a thief (taking the back) agree on every item with one compare-exchange.
struct alignas(64) Share {
  std::atomic<uint64_t> ends{0};

  static uint64_t pack(uint32_t front, uint32_t back) { return uint64_t(back) << 32 | front; }
  void reset(size_t front, size_t back) { ends.store(pack(uint32_t(front), uint32_t(back))); }
  // The front item into *item, or false when the share is empty.
  bool take_front(size_t* item) {
    uint64_t e = ends.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t front = uint32_t(e), back = uint32_t(e >> 32);
      if (front >= back) return false;
      if (ends.compare_exchange_weak(e, pack(front + 1, back))) return *item = front, true;
    }
  }
  bool take_back(size_t* item) {
    uint64_t e = ends.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t front = uint32_t(e), back = uint32_t(e >> 32);
      if (front >= back) return false;
      if (ends.compare_exchange_weak(e, pack(front, back - 1))) return *item = back - 1, true;
    }
  }
};

// The calling thread's shares, grown once to the largest team it has started.
inline Share* shares_for(int threads) {
  thread_local std::unique_ptr<Share[]> shares;
  thread_local int capacity = 0;
  if (capacity < threads) shares = std::make_unique<Share[]>(size_t(threads)), capacity = threads;
  return shares.get();
}

}  // namespace parallel_detail

// body(i) once for every i in [0, items) (items < 2^32), on up to `threads` threads (≤ 0: every
// OpenMP thread): thread t's share is items·t/threads .. items·(t + 1)/threads.
template <typename Body>
void parallel_shares(size_t items, Body&& body, int threads = 0) {
  if (threads <= 0) threads = omp_get_max_threads();
  threads = int(std::min<size_t>(size_t(threads), items));
  if (threads <= 1 || omp_in_parallel()) {
    for (size_t i = 0; i < items; ++i) body(i);
    return;
  }
  parallel_detail::Share* shares = parallel_detail::shares_for(threads);
  for (int t = 0; t < threads; ++t) {
    shares[t].reset(items * size_t(t) / size_t(threads), items * size_t(t + 1) / size_t(threads));
  }
  // A team smaller than asked for leaves shares nobody owns: the others take them as leftovers.
#pragma omp parallel num_threads(threads)
  {
    const int me = omp_get_thread_num();
    size_t i;
    while (shares[me].take_front(&i)) body(i);
    for (int k = 1; k < threads; ++k) {
      while (shares[(me + k) % threads].take_back(&i)) body(i);
    }
  }
}

// body(begin, end) once for every block [b·block, min(n, (b + 1)·block)) of [0, n), the blocks
// split by parallel_shares. The blocks are fixed by n and block alone, so a body whose result
// depends only on its own block's elements gives the same bits at any thread count.
template <typename Body>
void parallel_blocks(size_t n, size_t block, Body&& body, int threads = 0) {
  parallel_shares((n + block - 1) / block,
                  [&](size_t b) {
                    const size_t begin = b * block;
                    body(begin, std::min(n, begin + block));
                  },
                  threads);
}

}  // namespace reftrain::simd
