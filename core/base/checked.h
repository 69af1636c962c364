// Size arithmetic on numbers read from a file. A header can claim any value, so a product or sum
// of its fields can wrap around 2^64 and come out small enough to pass a size check. CheckedSize
// carries an "overflowed" flag through + and * instead of wrapping; a reader checks it once at
// the end of the expression.
#pragma once

#include <cstdint>

namespace reftrain {

class CheckedSize {
 public:
  constexpr CheckedSize(uint64_t value = 0) : value_(value) {}  // NOLINT: implicit on purpose

  friend CheckedSize operator+(CheckedSize a, CheckedSize b) {
    CheckedSize r;
    r.overflowed_ =
        a.overflowed_ || b.overflowed_ || __builtin_add_overflow(a.value_, b.value_, &r.value_);
    return r;
  }
  friend CheckedSize operator*(CheckedSize a, CheckedSize b) {
    CheckedSize r;
    r.overflowed_ =
        a.overflowed_ || b.overflowed_ || __builtin_mul_overflow(a.value_, b.value_, &r.value_);
    return r;
  }
  CheckedSize& operator+=(CheckedSize b) { return *this = *this + b; }
  CheckedSize& operator*=(CheckedSize b) { return *this = *this * b; }

  bool overflowed() const { return overflowed_; }
  // The value; meaningless when overflowed() (callers check that first).
  uint64_t value() const { return value_; }
  // True when the exact result is at most `limit` (an overflowed result never is).
  bool fits(uint64_t limit) const { return !overflowed_ && value_ <= limit; }

 private:
  uint64_t value_ = 0;
  bool overflowed_ = false;
};

}  // namespace reftrain
