// Aligned, zero-initialised storage: the mega-buffers and the activation arena. Allocated once,
// before training; nothing inside a step allocates.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace reftrain {

constexpr size_t kAlignBytes = 64;
constexpr size_t kAlignFloats = kAlignBytes / sizeof(float);

// Rounds n floats up to a whole number of 64-byte lines.
constexpr size_t align_floats(size_t n) {
  return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) : n_(n) {
    if (n == 0) return;
    const size_t bytes = (n * sizeof(T) + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    data_ = static_cast<T*>(std::aligned_alloc(kAlignBytes, bytes));
    if (!data_) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), n_(o.n_) {
    o.data_ = nullptr, o.n_ = 0;
  }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  void zero() {
    if (n_) std::memset(static_cast<void*>(data_), 0, n_ * sizeof(T));
  }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
};

// Hands out 64-byte-aligned slices of one arena; with a null base it only counts, so the same
// code both sizes the arena and carves it.
class ArenaCarver {
 public:
  explicit ArenaCarver(float* base) : base_(base) {}
  float* take(size_t n) {
    float* p = base_ ? base_ + used_ : nullptr;
    used_ += align_floats(n);
    return p;
  }
  size_t used() const { return used_; }

 private:
  float* base_;
  size_t used_ = 0;
};

}  // namespace reftrain
