// A small SVG writer for the study pages' figures (apps/explain/figures.cpp). Coordinates are
// printed with one decimal, so a figure's bytes are the same on every machine and a test can
// compare the committed file with what the program writes.
#pragma once

#include <string>
#include <vector>

namespace reftrain::explain {

class Svg {
 public:
  Svg(int width, int height, const std::string& title);
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& stroke = "#333", double stroke_width = 1.0);
  void line(double x1, double y1, double x2, double y2, const std::string& stroke = "#333",
            double width = 1.0, bool dashed = false);
  // A line with an arrowhead at (x2, y2).
  void arrow(double x1, double y1, double x2, double y2, const std::string& stroke = "#333",
             double width = 1.2);
  void circle(double cx, double cy, double r, const std::string& fill,
              const std::string& stroke = "none");
  void polyline(const std::vector<double>& xs, const std::vector<double>& ys,
                const std::string& stroke, double width = 1.5, bool dashed = false);
  // anchor: "start", "middle" or "end"; text is escaped.
  void text(double x, double y, const std::string& text, double size = 12,
            const std::string& anchor = "start", const std::string& fill = "#111",
            bool bold = false);
  // Everything drawn between begin_link and end_link is a link to `href` (a relative path).
  void begin_link(const std::string& href);
  void end_link();
  std::string str() const;

 private:
  std::string body_;
  int width_, height_;
  std::string title_;
};

// "12.3": one decimal, and never "-0.0".
std::string fmt1(double v);
// The printf of one double, e.g. fmtf("%.3f", x).
std::string fmtf(const char* format, double v);

}  // namespace reftrain::explain
