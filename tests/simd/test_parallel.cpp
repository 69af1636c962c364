// simd/parallel.h: the split of independent items between threads that the element-wise, row
// and block kernels share. What the kernels' bits rely on (every item exactly once, whatever the
// thread count) and what the split is for (a thread runs its own share from the front; a slow
// thread's leftovers go to the others).
#include <gtest/gtest.h>
#include <omp.h>

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
// thread must then have taken the rest of thread 0's share. Under schedule(static) this waits
// forever (the test gives up after 5 s and fails).
TEST(SimdParallel, ASlowThreadsLeftoversGoToTheOthers) {
  constexpr size_t kItems = 64;
  Log log(kItems);
  std::atomic<size_t> done_by_others{0};
  bool waited_out = false;
  simd::parallel_shares(
      kItems,
      [&](size_t i) {
        if (omp_get_thread_num() != 0) {
          log.record(i);
          done_by_others.fetch_add(1);
          return;
        }
        if (log.order[0].empty()) {  // thread 0's first item: the stall
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          while (done_by_others.load() < kItems - 1 && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::yield();
          }
          waited_out = done_by_others.load() < kItems - 1;
        }
        log.record(i);
      },
      2);
  ASSERT_FALSE(waited_out);
  EXPECT_EQ(log.order[0], std::vector<size_t>{0});  // its front item only
  for (size_t i = 1; i < kItems; ++i) EXPECT_EQ(log.thread[i], 1) << "item " << i;
  for (size_t i = 0; i < kItems; ++i) EXPECT_EQ(log.runs[i].load(), 1);
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
