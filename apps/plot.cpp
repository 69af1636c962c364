#include "apps/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <unordered_map>

#include "core/base/error.h"

namespace reftrain {

namespace {

// The page: the plot area's box, with the legend to its right (the page widens for long labels).
constexpr double kHeight = 540;
constexpr double kLeft = 80, kRight = 680, kTop = 60, kBottom = 470;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct Point {
  double step, loss;  // loss NaN = a gap
};

// The lines' `key` values times `scale` (a line without the key: a gap).
std::vector<Point> points(const std::vector<Json>& lines, const char* key, double scale = 1.0) {
  std::vector<Point> out;
  for (const Json& j : lines) {
    const Json v = j.value(key, Json());
    const double loss = v.is_number() ? v.get<double>() * scale : std::nan("");
    out.push_back({j.at("step").get<double>(), std::isfinite(loss) ? loss : std::nan("")});
  }
  return out;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double x) {
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  }
  bool empty() const { return !(lo <= hi); }
};

double largest(const Range& r) {
  return std::max(std::fabs(r.lo), std::fabs(r.hi));
}

// Ticks at 1, 2 or 5 times a power of ten, about `target` of them over [lo, hi] (hi > lo).
std::vector<double> nice_ticks(double lo, double hi, int target, double* step_out) {
  const double raw = hi / target - lo / target;  // hi - lo may overflow (-1e308 to 1e308)
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::ceil(lo / step);
  for (int i = 0; i <= 2 * target + 2; ++i) {  // bounded: never more than ~2·target ticks
    const double t = (first + i) * step;
    if (t > hi + step * 1e-9) break;
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  *step_out = step;
  return ticks;
}

// A tick's value with as many digits as the tick spacing needs: fixed for losses of everyday
// size, scientific for huge or tiny ones (a loss of 1e308 printed "%.0f" is 309 digits; a
// denormal one needs 310 decimals to be told from zero).
std::string tick_label(double value, double step, double largest) {
  const int step_exp = int(std::floor(std::log10(step) + 1e-9));
  const int top_exp = largest > 0 ? int(std::floor(std::log10(largest))) : step_exp;
  char buf[64];
  if (top_exp >= 7 || step_exp <= -6) {
    const int digits = std::clamp(top_exp - step_exp, 0, 16);
    std::snprintf(buf, sizeof buf, "%.*e", digits, value);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, -step_exp), value);
  }
  return buf;
}

// The length of the well-formed UTF-8 sequence at s[i] (overlong forms, surrogates and code
// points past U+10FFFF are not), 0 when there is none.
size_t utf8_length(const std::string& s, size_t i) {
  const auto byte = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0; };
  const unsigned c = byte(i);
  const auto cont = [&](size_t k) { return (byte(i + k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned c1 = byte(i + 1);
    const bool ok = (c == 0xE0 ? c1 >= 0xA0 : true) && (c == 0xED ? c1 < 0xA0 : true);
    return ok && cont(1) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned c1 = byte(i + 1);
    const bool ok = (c == 0xF0 ? c1 >= 0x90 : true) && (c == 0xF4 ? c1 < 0x90 : true);
    return ok && cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

// Text for XML 1.0, which is UTF-8 here: the five special characters escaped, control characters
// and U+FFFE/U+FFFF (not allowed in XML) shown as '?', and a byte that starts no well-formed
// UTF-8 sequence (a Latin-1 title or file name) as U+FFFD, so the file always parses.
std::string xml_escape(const std::string& s) {
  static const std::unordered_map<char, const char*> kEntities = {
      {'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&apos;"}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length(s, i);
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else if ((c < 0x20 && c != '\t') || s.compare(i, n, "\xEF\xBF\xBE") == 0 ||
               s.compare(i, n, "\xEF\xBF\xBF") == 0) {
      out += '?';
      i += n;
    } else if (n == 1 && kEntities.count(s[i])) {
      out += kEntities.at(s[i++]);
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

// Where v lies in [r.lo, r.hi], 0 to 1; halved first when the span overflows a double.
double fraction(double v, Range r) {
  const double span = r.hi - r.lo;
  if (std::isfinite(span)) return (v - r.lo) / span;
  return (v / 2 - r.lo / 2) / (r.hi / 2 - r.lo / 2);
}

class Canvas {
 public:
  Canvas(Range x, Range y, double width) : x_(x), y_(y), width_(width) {}
  double px(double step) const { return kLeft + fraction(step, x_) * (kRight - kLeft); }
  double py(double loss) const { return kBottom - fraction(loss, y_) * (kBottom - kTop); }
  // Polylines through the finite points, broken at gaps; dots on each point when `dots`.
  std::string series(const std::vector<Point>& pts, const char* color, double width, double opacity,
                     bool dots) const {
    std::string out, line;
    auto flush = [&] {
      if (!line.empty()) {
        out += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\"" +
               fmt(" stroke-width=\"%.1f\" stroke-opacity=\"%.2f\"", width, opacity) +
               " stroke-linejoin=\"round\" points=\"" + line + "\"/>\n";
      }
      line.clear();
    };
    for (const Point& p : pts) {
      if (std::isnan(p.loss)) {
        flush();
        continue;
      }
      line += (line.empty() ? "" : " ") + fmt("%.2f,%.2f", px(p.step), py(p.loss));
      if (dots) {
        out += "<circle cx=\"" + fmt("%.2f", px(p.step)) + "\" cy=\"" + fmt("%.2f", py(p.loss)) +
               "\" r=\"3\" fill=\"" + color + "\"/>\n";
      }
    }
    flush();
    return out;
  }
  std::string axes(const std::string& title, const char* y_label) const {
    std::string s = "<rect x=\"0\" y=\"0\" width=\"" + fmt("%.0f", width_) + "\" height=\"" +
                    fmt("%.0f", kHeight) + "\" fill=\"white\"/>\n";
    double step = 0;
    for (double t : nice_ticks(x_.lo, x_.hi, 8, &step)) {
      const double x = px(t);
      s += fmt("<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"#e6e6e6\"/>\n", x,
               kTop, x, kBottom);
      s += fmt("<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"black\"/>\n", x,
               kBottom, x, kBottom + 5);
      s += fmt("<text x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\">", x, kBottom + 20) +
           tick_label(t, step, largest(x_)) + "</text>\n";
    }
    for (double t : nice_ticks(y_.lo, y_.hi, 6, &step)) {
      const double y = py(t);
      s += fmt("<line x1=\"%.0f\" y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" stroke=\"#e6e6e6\"/>\n",
               kLeft, y, kRight, y);
      s += fmt("<line x1=\"%.0f\" y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" stroke=\"black\"/>\n",
               kLeft - 5, y, kLeft, y);
      s += fmt("<text x=\"%.0f\" y=\"%.2f\" text-anchor=\"end\">", kLeft - 8, y + 4) +
           tick_label(t, step, largest(y_)) + "</text>\n";
    }
    s +=
        fmt("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"black\"/>\n",
            kLeft, kTop, kRight - kLeft, kBottom - kTop);
    s += fmt("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n",
             (kLeft + kRight) / 2, kBottom + 45);
    s += fmt("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 %.0f "
             "%.0f)\">",
             kLeft - 55, (kTop + kBottom) / 2, kLeft - 55, (kTop + kBottom) / 2) +
         y_label + "</text>\n";
    s += fmt("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"18\" "
             "font-weight=\"bold\">",
             (kLeft + kRight) / 2, kTop - 25) +
         xml_escape(title) + "</text>\n";
    return s;
  }

 private:
  Range x_, y_;
  double width_;
};

std::string legend_entry(int row, const std::string& label, const char* color, bool val) {
  const double y = kTop + 10 + 22 * row;
  std::string s =
      fmt("<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" ", kRight + 20, y, kRight + 48,
          y) +
      "stroke=\"" + color + "\"" +
      fmt(" stroke-width=\"%.1f\" stroke-opacity=\"%.2f\"/>\n", val ? 2.2 : 1.2, val ? 1.0 : 0.6);
  if (val) {
    s += fmt("<circle cx=\"%.0f\" cy=\"%.0f\" r=\"3\" ", kRight + 34, y) + "fill=\"" + color +
         "\"/>\n";
  }
  s += fmt("<text x=\"%.0f\" y=\"%.0f\">", kRight + 56, y + 4) + xml_escape(label) +
       (val ? " val" : " train") + "</text>\n";
  return s;
}

}  // namespace

namespace {

// Bits per byte of the training split per nat per token: 1 / ln 2 · tokens / bytes, from the
// run line (NaN when it does not hold the split's bytes: a trace of llm.c ids, or an older one).
double train_bits_per_nat(const Json& run) {
  const Json data = run.is_object() ? run.value("data", Json()) : Json();
  const Json tokens = data.is_object() ? data.value("train_tokens", Json()) : Json();
  const Json bytes = data.is_object() ? data.value("train_bytes", Json()) : Json();
  if (!tokens.is_number() || !bytes.is_number() || bytes.get<double>() <= 0) return std::nan("");
  return tokens.get<double>() / bytes.get<double>() / std::log(2.0);
}

}  // namespace

std::string loss_plot_svg(const std::vector<PlotRun>& runs, const std::string& title,
                          PlotAxis axis) {
  Range x, y;
  x.add(0.0);
  std::vector<std::vector<Point>> train, val;
  const bool bpb = axis == PlotAxis::kBitsPerByte;
  for (const PlotRun& r : runs) {
    train.push_back(points(r.trace->steps, "loss", bpb ? train_bits_per_nat(r.trace->run) : 1.0));
    val.push_back(points(r.trace->vals, bpb ? "val_bpb" : "val_loss"));
    for (const auto* pts : {&train.back(), &val.back()}) {
      for (const Point& p : *pts) x.add(p.step), y.add(p.loss);
    }
  }
  if (y.empty() && bpb) {
    throw input_error(
        "nothing to plot: the traces hold no bits per byte (traces of llm.c ids, "
        "or written before reftrain recorded them); plot --y loss");
  }
  if (y.empty()) throw input_error("nothing to plot: the traces hold no finite loss");
  if (x.hi <= x.lo) x.hi = x.lo + 1;
  // A flat curve gets a band around it wide enough to stay distinct in double.
  const double pad =
      y.hi > y.lo ? 0.05 * y.hi - 0.05 * y.lo : std::max(0.5, 0.05 * std::fabs(y.hi));
  const double max = std::numeric_limits<double>::max();
  y.lo = std::max(-max, y.lo - pad), y.hi = std::min(max, y.hi + pad);
  size_t longest = 0;
  for (const PlotRun& r : runs) longest = std::max(longest, r.label.size());
  const double width = kRight + std::max(220.0, 100.0 + 7.0 * double(longest));
  const Canvas canvas(x, y, width);
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" +
                    fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                        "viewBox=\"0 0 %.0f %.0f\" ",
                        width, kHeight, width, kHeight) +
                    "font-family=\"sans-serif\" font-size=\"12\">\n" +
                    canvas.axes(title, bpb ? "bits per byte" : "loss");
  // The legend lists the series that have points (a replay's trace may have no validation),
  // run by run: train, then val.
  std::vector<int> legend_row(2 * runs.size(), -1);
  for (size_t k = 0, row = 0; k < legend_row.size(); ++k) {
    if (!(k % 2 ? val[k / 2] : train[k / 2]).empty()) legend_row[k] = int(row++);
  }
  // Every run's training line first, then the validation lines on top of them.
  for (const bool is_val : {false, true}) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
      const std::vector<Point>& pts = is_val ? val[i] : train[i];
      svg += "<g class=\"series\" data-run=\"" + xml_escape(runs[i].label) + "\" data-kind=\"" +
             (is_val ? "val" : "train") + "\" data-points=\"" + std::to_string(pts.size()) +
             "\">\n" + canvas.series(pts, color, is_val ? 2.2 : 1.2, is_val ? 1.0 : 0.6, is_val) +
             "</g>\n";
      const int row = legend_row[2 * i + is_val];
      if (row >= 0) svg += legend_entry(row, runs[i].label, color, is_val);
    }
  }
  return svg + "</svg>\n";
}

std::string trace_label(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

}  // namespace reftrain
