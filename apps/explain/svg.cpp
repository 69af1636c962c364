#include "apps/explain/svg.h"

#include <cmath>
#include <cstdio>

namespace reftrain::explain {

std::string fmt1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::abs(v) < 0.05 ? 0.0 : v);
  return buf;
}

std::string fmtf(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

namespace {
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

Svg::Svg(int width, int height, const std::string& title)
    : width_(width), height_(height), title_(title) {}

void Svg::rect(double x, double y, double w, double h, const std::string& fill,
               const std::string& stroke, double stroke_width) {
  body_ += "<rect x=\"" + fmt1(x) + "\" y=\"" + fmt1(y) + "\" width=\"" + fmt1(w) + "\" height=\"" +
           fmt1(h) + "\" fill=\"" + fill + "\" stroke=\"" + stroke + "\" stroke-width=\"" +
           fmt1(stroke_width) + "\"/>\n";
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
               bool dashed) {
  body_ += "<line x1=\"" + fmt1(x1) + "\" y1=\"" + fmt1(y1) + "\" x2=\"" + fmt1(x2) + "\" y2=\"" +
           fmt1(y2) + "\" stroke=\"" + stroke + "\" stroke-width=\"" + fmt1(width) + "\"" +
           (dashed ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
}

void Svg::arrow(double x1, double y1, double x2, double y2, const std::string& stroke,
                double width) {
  line(x1, y1, x2, y2, stroke, width);
  // The head: two 7-pixel strokes 25 degrees either side of the shaft, drawn as a triangle.
  const double len = std::hypot(x2 - x1, y2 - y1);
  if (len == 0) return;
  const double ux = (x2 - x1) / len, uy = (y2 - y1) / len;
  const double c = std::cos(0.44), s = std::sin(0.44), h = 7.0;
  const double ax = x2 - h * (ux * c - uy * s), ay = y2 - h * (uy * c + ux * s);
  const double bx = x2 - h * (ux * c + uy * s), by = y2 - h * (uy * c - ux * s);
  body_ += "<polygon points=\"" + fmt1(x2) + "," + fmt1(y2) + " " + fmt1(ax) + "," + fmt1(ay) +
           " " + fmt1(bx) + "," + fmt1(by) + "\" fill=\"" + stroke + "\"/>\n";
}

void Svg::circle(double cx, double cy, double r, const std::string& fill,
                 const std::string& stroke) {
  body_ += "<circle cx=\"" + fmt1(cx) + "\" cy=\"" + fmt1(cy) + "\" r=\"" + fmt1(r) + "\" fill=\"" +
           fill + "\" stroke=\"" + stroke + "\"/>\n";
}

void Svg::polyline(const std::vector<double>& xs, const std::vector<double>& ys,
                   const std::string& stroke, double width, bool dashed) {
  std::string pts;
  for (size_t i = 0; i < xs.size(); ++i) pts += (i ? " " : "") + fmt1(xs[i]) + "," + fmt1(ys[i]);
  body_ += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + stroke +
           "\" stroke-width=\"" + fmt1(width) + "\"" + (dashed ? " stroke-dasharray=\"5 3\"" : "") +
           "/>\n";
}

void Svg::text(double x, double y, const std::string& t, double size, const std::string& anchor,
               const std::string& fill, bool bold) {
  body_ += "<text x=\"" + fmt1(x) + "\" y=\"" + fmt1(y) + "\" font-size=\"" + fmt1(size) +
           "\" text-anchor=\"" + anchor + "\" fill=\"" + fill + "\"" +
           (bold ? " font-weight=\"bold\"" : "") + ">" + escape(t) + "</text>\n";
}

void Svg::begin_link(const std::string& href) {
  body_ += "<a href=\"" + escape(href) + "\">\n";
}

void Svg::end_link() {
  body_ += "</a>\n";
}

std::string Svg::str() const {
  const std::string w = std::to_string(width_), h = std::to_string(height_);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<title>" + escape(title_) +
         "</title>\n<rect width=\"" + w + "\" height=\"" + h + "\" fill=\"white\"/>\n" + body_ +
         "</svg>\n";
}

}  // namespace reftrain::explain
