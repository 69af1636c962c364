#include "ops/kernel_record.h"

#include <cctype>
#include <stdexcept>

namespace reftrain {

const char* role_name(BindingRole r) {
  switch (r) {
    case BindingRole::kIn:
      return "in";
    case BindingRole::kOut:
      return "out";
    case BindingRole::kInOut:
      return "inout";
    case BindingRole::kScalar:
      return "scalar";
    case BindingRole::kScratch:
      return "scratch";
  }
  return "?";
}

namespace {

// A recursive-descent reading of a shape: dims separated by ',', a dim a product of factors
// (juxtaposed as in "3C", or joined by '·'), a factor a number, a size's name, or ceil(a/b).
class ShapeReader {
 public:
  ShapeReader(const std::string& shape, std::initializer_list<Dim> dims) : s_(shape), dims_(dims) {}

  size_t numel() {
    expect('[');
    size_t n = 1;
    if (peek() == ']') return ++i_, n;
    for (;;) {
      n *= product();
      if (peek() == ']') return ++i_, n;
      expect(',');
    }
  }

 private:
  size_t product() {
    size_t p = factor();
    for (;;) {
      if (s_.compare(i_, 2, "\xC2\xB7") == 0) i_ += 2;  // '·'
      const char c = peek();
      if (!std::isalnum(static_cast<unsigned char>(c))) return p;
      p *= factor();
    }
  }

  size_t factor() {
    if (std::isdigit(static_cast<unsigned char>(peek()))) {
      size_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) v = v * 10 + size_t(s_[i_++] - '0');
      return v;
    }
    const std::string name = word();
    if (name != "ceil") return value_of(name);
    expect('(');
    const size_t a = product();
    expect('/');
    const size_t b = product();
    expect(')');
    return (a + b - 1) / b;
  }

  std::string word() {
    const size_t start = i_;
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_') ++i_;
    if (i_ == start) fail();
    return s_.substr(start, i_ - start);
  }

  size_t value_of(const std::string& name) const {
    for (const Dim& d : dims_) {
      if (name == d.name) return d.value;
    }
    throw std::logic_error("shape " + s_ + ": no size " + name + " given");
  }

  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail();
    ++i_;
  }
  [[noreturn]] void fail() const {
    throw std::logic_error("shape " + s_ + ": cannot read it at character " + std::to_string(i_));
  }

  const std::string& s_;
  std::initializer_list<Dim> dims_;
  size_t i_ = 0;
};

}  // namespace

size_t shape_numel(const std::string& shape, std::initializer_list<Dim> dims) {
  return ShapeReader(shape, dims).numel();
}

}  // namespace reftrain
