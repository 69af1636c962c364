// simd/parallel.h: the split of independent items between threads that the element-wise, row
// and block kernels share. What the kernels' bits rely on (every item exactly once, whatever the
// thread count) and what the split is for (a thread runs its own share from the front; a slow
// thread's leftovers go to the others).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "simd/parallel.h"

namespace reftrain {
namespace {

// Which thread ran each item, and in which order each thread ran its items.
struct Log {
  explicit Log(size_t items) : runs(items), thread(items, -1), order(omp_get_max_threads() + 8) {}
  std::vector<std::atomic<int>> runs;
  std::vector<int> thread;
  std::vector<std::vector<size_t>> order;  // per thread
  void record(size_t i) {
    const int t = omp_get_thread_num();
    runs[i].fetch_add(1);
    thread[i] = t;
    order[size_t(t)].push_back(i);
  }
};

// Teams of at most 3 threads: a team larger than any other in the suite (8 was tried) makes
// clang's libomp keep thread records that LeakSanitizer reports as leaks in the sanitize build.
TEST(SimdParallel, EveryItemRunsOnceForAnyThreadCount) {
  for (const size_t items : {0, 1, 2, 5, 64, 1000, 4097}) {
    for (const int threads : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(items) + " items, " + std::to_string(threads) + " threads");
      Log log(items);
      simd::parallel_shares(
          items, [&](size_t i) { log.record(i); }, threads);
      for (size_t i = 0; i < items; ++i) ASSERT_EQ(log.runs[i].load(), 1) << "item " << i;
    }
  }
}

// A thread takes its own share from the front, in order: the items it ran from its share are
// the share's first items, ascending (a thief only ever shortens a share from its back).
TEST(SimdParallel, EachThreadRunsItsShareFromTheFront) {
  constexpr size_t kItems = 1000;
  constexpr int kThreads = 3;
  Log log(kItems);
  simd::parallel_shares(
      kItems, [&](size_t i) { log.record(i); }, kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const size_t begin = kItems * t / kThreads, end = kItems * (t + 1) / kThreads;
    size_t next = begin;
    for (const size_t i : log.order[size_t(t)]) {
      if (i >= begin && i < end) {
        EXPECT_EQ(i, next++) << "thread " << t;
      }
    }
  }
}

// Thread 0 stalls on its first item until the other thread has run everything else: the other
// thread must then have taken the rest of thread 0's share. Thread 1 holds its own first item
// until thread 0 has taken item 0 (otherwise, when thread 0 starts late, thread 1 may take its
// whole share, item 0 included, before it runs anything). Under schedule(static) thread 0's
// stall waits forever (the test gives up after 5 s and fails).
TEST(SimdParallel, ASlowThreadsLeftoversGoToTheOthers) {
  constexpr size_t kItems = 64;
  Log log(kItems);
  std::atomic<size_t> done_by_others{0};
  std::atomic<bool> thread0_started{false};
  bool waited_out = false;
  const auto wait_until = [](const auto& ready) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!ready() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    return ready();
  };
  simd::parallel_shares(
      kItems,
      [&](size_t i) {
        if (omp_get_thread_num() != 0) {
          if (log.order[1].empty()) wait_until([&] { return thread0_started.load(); });
          log.record(i);
          done_by_others.fetch_add(1);
          return;
        }
        if (log.order[0].empty()) {  // thread 0's first item: the stall
          thread0_started = true;
          waited_out = !wait_until([&] { return done_by_others.load() == kItems - 1; });
        }
        log.record(i);
      },
      2);
  ASSERT_FALSE(waited_out);
  EXPECT_EQ(log.order[0], std::vector<size_t>{0});  // its front item only
  for (size_t i = 1; i < kItems; ++i) EXPECT_EQ(log.thread[i], 1) << "item " << i;
  for (size_t i = 0; i < kItems; ++i) EXPECT_EQ(log.runs[i].load(), 1);
}

// parallel_blocks hands out the fixed blocks [b·block, min(n, (b + 1)·block)): each once, the
// same blocks for any thread count, the last one short.
TEST(SimdParallel, BlocksAreFixedByLengthAndBlockSize) {
  for (const size_t n : {0, 1, 15, 16, 17, 4097}) {
    for (const int threads : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(n) + " elements, " + std::to_string(threads) + " threads");
      constexpr size_t kBlock = 16;
      std::vector<std::atomic<int>> seen(n);
      std::atomic<size_t> blocks{0};
      simd::parallel_blocks(
          n, kBlock,
          [&](size_t begin, size_t end) {
            EXPECT_EQ(begin % kBlock, 0u);
            EXPECT_EQ(end, std::min(n, begin + kBlock));
            for (size_t i = begin; i < end; ++i) seen[i].fetch_add(1);
            blocks.fetch_add(1);
          },
          threads);
      EXPECT_EQ(blocks.load(), (n + kBlock - 1) / kBlock);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << "element " << i;
    }
  }
}

// Inside a parallel region (a kernel called by a thread of another team) the items run on the
// calling thread, in order.
TEST(SimdParallel, NestedCallsRunInTheCallingThread) {
  std::vector<size_t> seen;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    simd::parallel_shares(
        10, [&](size_t i) { seen.push_back(i); }, 4);
  }
  ASSERT_EQ(seen.size(), 10u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
}

}  // namespace
}  // namespace reftrain
