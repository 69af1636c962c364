#include "apps/explain/explain.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "core/base/rng.h"

namespace reftrain::explain {

namespace {
constexpr int kWidth = 80;
}  // namespace

std::string fmt(const char* format, ...) {
  char buf[160];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

std::string num(double v, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, std::abs(v) < 5e-5 ? 0.0 : v);
  return buf;
}

std::string in2(double v) {
  return num(v, v < 0 ? "(%.2f)" : "%.2f");
}

std::string at(const std::string& name, int i, int j) {
  return name + "[" + std::to_string(i) + "][" + std::to_string(j) + "]";
}

Vec matrix_row(const Vec& m, int r, int cols) {
  return Vec(m.begin() + size_t(r) * cols, m.begin() + size_t(r + 1) * cols);
}

double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double max_abs_diff(const Vec& a, const Vec& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

const Matmul& teaching_matmul() {
  static const Matmul naive(MatmulKind::kNaive, 1);
  return naive;
}

void Printer::title(const std::string& text) {
  out_ += text + "\n" + std::string(text.size(), '=') + "\n";
}

void Printer::section(const std::string& text) {
  out_ += "\n" + text + "\n";
}

void Printer::line(const std::string& text) {
  out_ += text + "\n";
}

void Printer::scalar(const std::string& name, double v, const std::string& note) {
  out_ += "  " + name + " =" + num(v) + (note.empty() ? "" : "   " + note) + "\n";
}

void Printer::vec(const std::string& name, const std::vector<double>& v) {
  std::string head = "  " + name + " = [";
  std::string row = head;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = num(v[i]) + (i + 1 < v.size() ? "," : " ]");
    if (row.size() + item.size() > kWidth) {
      out_ += row + "\n";
      row = std::string(head.size(), ' ');
    }
    row += item;
  }
  if (v.empty()) row += " ]";
  out_ += row + "\n";
}

void Printer::mat(const std::string& name, const std::vector<double>& m, int rows, int cols) {
  out_ += "  " + name + " (" + std::to_string(rows) + "x" + std::to_string(cols) + ") =\n";
  for (int r = 0; r < rows; ++r) {
    std::string row = "   ";
    for (int c = 0; c < cols; ++c) {
      const std::string item = num(m[size_t(r) * cols + c]);
      if (row.size() + item.size() > kWidth) {
        out_ += row + "\n";
        row = "   ";
      }
      row += item;
    }
    out_ += row + "\n";
  }
}

void Printer::agrees(const std::string& kernel, const std::vector<double>& mine,
                     const std::vector<double>& theirs) {
  const double diff = max_abs_diff(mine, theirs);
  if (diff < 1e-12) {
    line("  " + kernel + "<double> gives the same numbers (max diff < 1e-12)");
  } else {
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %s<double> differs by %.1e", kernel.c_str(), diff);
    line(buf);
  }
}

double Printer::fd(const std::string& name, double analytic, double numeric) {
  const double err = std::abs(analytic - numeric);
  // Errors below 1e-9 are shown as such: their exact digits depend on libm's last bit.
  char err_text[16];
  if (err < 1e-9) {
    std::snprintf(err_text, sizeof err_text, "< 1e-9");
  } else {
    std::snprintf(err_text, sizeof err_text, "%.1e", err);
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "  %-14s backward %10.6f  finite diff %10.6f  |err| %s\n",
                name.c_str(), analytic, numeric, err_text);
  out_ += buf;
  return err;
}

std::vector<double> Inputs::uniform(size_t n, double lo, double hi) {
  const CounterRng rng(seed_, RngStream::kSample);
  std::vector<double> v(n);
  for (double& x : v) x = std::round((lo + (hi - lo) * rng.uniform(next_++, 7)) * 100.0) / 100.0;
  return v;
}

std::vector<int> Inputs::tokens(size_t n, int vocab) {
  const CounterRng rng(seed_, RngStream::kSample);
  std::vector<int> v(n);
  for (int& t : v) t = int(rng.below(uint64_t(vocab), next_++, 7));
  return v;
}

const std::vector<Explainer>& explainers() {
  static const std::vector<Explainer> all = [] {
    std::vector<Explainer> v;
    add_backprop(v);
    add_embed(v);
    add_norm(v);
    add_linear(v);
    add_rope(v);
    add_attention(v);
    add_activation(v);
    add_loss(v);
    add_cast(v);
    add_bf16(v);
    add_optimizer(v);
    add_tokenizer(v);
    add_determinism(v);
    add_model(v);
    return v;
  }();
  return all;
}

}  // namespace reftrain::explain
