#include "reports/svg_chart.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "reports/markup.hpp"

namespace leaseproof::report::svg {

namespace {

constexpr double kDodge = 6;  // pixels between series drawn side by side
constexpr double kLeft = 70;
constexpr double kRight = 170;  // room for the legend
constexpr double kTop = 34;
constexpr double kCaptionHeight = 16;  // added to the top when a chart has a caption
constexpr double kBottom = 50;
constexpr double kCategoryBottom = 84;  // room for slanted category labels
constexpr size_t kUpright = 5;          // category labels slant beyond this many
constexpr int kTicks = 6;

struct Range {
  double low = 0;
  double high = 1;
};

// Data range, widened to whole ticks; a single value gets a unit around it.
Range axis_range(std::vector<double> values, bool from_zero) {
  if (values.empty()) return {};
  auto [low_it, high_it] = std::minmax_element(values.begin(), values.end());
  double low = *low_it;
  double high = *high_it;
  if (from_zero) low = std::min(low, 0.0);
  if (high - low < 1e-9) {
    const double pad = std::max(std::abs(high) * 0.1, 1.0);
    low -= from_zero && low >= 0 ? 0 : pad;
    high += pad;
  }
  const std::vector<double> ticks = nice_ticks(low, high, kTicks);
  Range range{std::min(low, ticks.front()), std::max(high, ticks.back())};
  if (!from_zero) {  // points on the frame are hard to see: a little room on both sides
    const double pad = (range.high - range.low) * 0.04;
    range.low -= pad;
    range.high += pad;
  }
  return range;
}

struct Frame {
  Range x;
  Range y;
  double width;
  double height;
  double top = kTop;
  double bottom = kBottom;

  double px(double value) const { return kLeft + (value - x.low) / (x.high - x.low) * (width - kLeft - kRight); }
  double py(double value) const { return height - bottom - (value - y.low) / (y.high - y.low) * (height - top - bottom); }
};

// `dodge`: pixels right (or left) of the point's x, so that series whose
// points coincide stay visible side by side.
std::string marker_svg(const Point& point, const Frame& frame, std::string_view fill, double dodge = 0) {
  const double x = frame.px(point.x) + dodge;
  const double y = frame.py(point.y);
  std::string shape;
  switch (point.marker) {
    case Marker::dot: shape = fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"/>)svg", x, y, fill); break;
    case Marker::ring:
      shape = fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="none" stroke="{}" stroke-width="1.5"/>)svg", x, y, fill);
      break;
    case Marker::cross:
      shape = fmt::format(R"svg(<path d="M{:.1f} {:.1f}l8 8m0 -8l-8 8" stroke="{}" stroke-width="2"/>)svg", x - 4, y - 4, fill);
      break;
  }
  return fmt::format("<g><title>{}</title>{}</g>", escape(point.tip), shape);
}

// One tick per category, its label slanted when there are many.
std::string category_ticks_svg(const Chart& chart, const Frame& frame) {
  std::string out;
  const bool slanted = chart.x_categories.size() > kUpright;
  for (size_t i = 0; i < chart.x_categories.size(); ++i) {
    const double x = frame.px(static_cast<double>(i));
    const double y = frame.height - frame.bottom + 16;
    out += fmt::format(R"svg(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" class="grid"/>)svg", x, frame.top,
                       frame.height - frame.bottom);
    out += slanted ? fmt::format(R"svg(<text transform="translate({:.1f} {:.1f}) rotate(-35)" class="tick" text-anchor="end">{}</text>)svg",
                                 x + 4, y - 4, escape(chart.x_categories[i]))
                   : fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="middle">{}</text>)svg", x, y,
                                 escape(chart.x_categories[i]));
  }
  return out;
}

std::string axes_svg(const Chart& chart, const Frame& frame) {
  std::string out = category_ticks_svg(chart, frame);
  for (const double tick : nice_ticks(frame.x.low, frame.x.high, kTicks)) {
    if (!chart.x_categories.empty()) break;
    if (tick < frame.x.low - 1e-9 || tick > frame.x.high + 1e-9) continue;
    const double x = frame.px(tick);
    out += fmt::format(R"svg(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" class="grid"/>)svg", x, frame.top,
                       frame.height - frame.bottom);
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="middle">{}</text>)svg", x,
                       frame.height - frame.bottom + 16, tick_text(tick));
  }
  for (const double tick : nice_ticks(frame.y.low, frame.y.high, kTicks)) {
    if (tick < frame.y.low - 1e-9 || tick > frame.y.high + 1e-9) continue;
    const double y = frame.py(tick);
    out += fmt::format(R"svg(<line x1="{0:.1f}" y1="{2:.1f}" x2="{1:.1f}" y2="{2:.1f}" class="grid"/>)svg", kLeft,
                       frame.width - kRight, y);
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="end">{}</text>)svg", kLeft - 6, y + 4,
                       tick_text(tick));
  }
  out += fmt::format(R"svg(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" class="frame"/>)svg", kLeft, frame.top,
                     frame.width - kLeft - kRight, frame.height - frame.top - frame.bottom);
  out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="label" text-anchor="middle">{}</text>)svg",
                     (kLeft + frame.width - kRight) / 2, frame.height - 12, escape(chart.x_label));
  out += fmt::format(R"svg(<text transform="translate(16 {:.1f}) rotate(-90)" class="label" text-anchor="middle">{}</text>)svg",
                     (frame.top + frame.height - frame.bottom) / 2, escape(chart.y_label));
  return out;
}

std::string references_svg(const Chart& chart, const Frame& frame) {
  std::string out;
  for (const ReferenceLine& line : chart.references) {
    if (line.vertical) {
      const double x = frame.px(line.at);
      out += fmt::format(R"svg(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" class="reference"/>)svg", x,
                         frame.top, frame.height - frame.bottom);
      // Near the right edge the label goes to the left of its line (the legend is on the right).
      const bool left = x > kLeft + 0.7 * (frame.width - kLeft - kRight);
      out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="tick" text-anchor="{}">{}</text>)svg",
                         left ? x - 3 : x + 3, frame.top + 12, left ? "end" : "start", escape(line.label));
    } else {
      const double y = frame.py(line.at);
      out += fmt::format(R"svg(<line x1="{0:.1f}" y1="{2:.1f}" x2="{1:.1f}" y2="{2:.1f}" class="reference"/>)svg", kLeft,
                         frame.width - kRight, y);
      out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="tick">{}</text>)svg", kLeft + 4, y - 4, escape(line.label));
    }
  }
  return out;
}

std::string series_svg(const Chart& chart, const Frame& frame) {
  std::string out;
  const double middle = (static_cast<double>(chart.series.size()) - 1) / 2;
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const Series& series = chart.series[s];
    // Series side by side, kDodge pixels apart: where two have the same
    // point, neither hides the other (the tip gives the exact value).
    const double dodge = (static_cast<double>(s) - middle) * kDodge;
    if (series.connect && series.points.size() > 1) {
      std::vector<Point> sorted = series.points;
      std::stable_sort(sorted.begin(), sorted.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
      std::string path;
      for (const Point& p : sorted) {
        path += fmt::format("{}{:.1f} {:.1f}", path.empty() ? "M" : " L", frame.px(p.x) + dodge, frame.py(p.y));
      }
      out += fmt::format(R"svg(<path d="{}" fill="none" stroke="{}" stroke-width="2"/>)svg", path, color(s));
    }
    for (const Point& point : series.points) out += marker_svg(point, frame, color(s), dodge);
  }
  if (chart.highlight) {
    out += fmt::format(R"svg(<g><title>{}</title><circle cx="{:.1f}" cy="{:.1f}" r="11" class="highlight"/></g>)svg",
                       escape(chart.highlight->tip), frame.px(chart.highlight->x), frame.py(chart.highlight->y));
  }
  return out;
}

std::string legend_svg(const Chart& chart, const Frame& frame) {
  std::string out;
  double y = frame.top + 8;
  const double x = frame.width - kRight + 14;
  for (size_t s = 0; s < chart.series.size(); ++s) {
    out += fmt::format(R"svg(<rect x="{:.1f}" y="{:.1f}" width="10" height="10" fill="{}"/>)svg", x, y - 9, color(s));
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="tick">{}</text>)svg", x + 15, y, escape(chart.series[s].name));
    y += 16;
  }
  std::vector<std::string> notes = chart.notes;
  if (chart.series.size() > 1) notes.push_back(fmt::format("series drawn {:.0f} px apart", kDodge));
  for (const std::string& note : notes) {
    y += 4;
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="tick">{}</text>)svg", x, y, escape(note));
    y += 14;
  }
  return out;
}

}  // namespace

std::string escape(std::string_view text) { return escape_markup(text); }

std::string_view color(size_t index) {
  // Okabe-Ito, without yellow (poor contrast on white).
  static constexpr std::array<std::string_view, 7> kPalette{"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                            "#E69F00", "#56B4E9", "#000000"};
  return kPalette[index % kPalette.size()];
}

std::vector<double> nice_ticks(double low, double high, int count) {
  if (!(high > low)) return {low};
  const double raw = (high - low) / std::max(1, count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double residual = raw / magnitude;
  const double step = magnitude * (residual <= 1 ? 1 : residual <= 2 ? 2 : residual <= 5 ? 5 : 10);
  const long long first = static_cast<long long>(std::floor(low / step + 1e-9));
  const long long last = static_cast<long long>(std::ceil(high / step - 1e-9));
  std::vector<double> ticks;
  for (long long i = first; i <= last; ++i) ticks.push_back(static_cast<double>(i) * step);
  return ticks;
}

std::string tick_text(double value) {
  if (std::abs(value) < 1e-12) return "0";
  return fmt::format("{:.6g}", value);
}

std::string render(const Chart& chart) {
  std::vector<double> xs;
  std::vector<double> ys;
  for (const Series& series : chart.series) {
    for (const Point& point : series.points) {
      xs.push_back(point.x);
      ys.push_back(point.y);
    }
  }
  std::string out = fmt::format(R"svg(<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" role="img" aria-label="{2}">)svg",
                                chart.width, chart.height, escape(chart.title));
  out += fmt::format(R"svg(<text x="{:.1f}" y="20" class="title">{}</text>)svg", kLeft, escape(chart.title));
  for (size_t i = 0; i < chart.caption.size(); ++i) {
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="caption">{}</text>)svg", kLeft,
                       36 + kCaptionHeight * static_cast<double>(i), escape(chart.caption[i]));
  }
  if (xs.empty()) {
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" class="label">nothing to show</text></svg>)svg", kLeft,
                       chart.height / 2);
    return out;
  }
  for (const ReferenceLine& line : chart.references) (line.vertical ? xs : ys).push_back(line.at);
  Frame frame{axis_range(xs, false), axis_range(ys, true), chart.width, chart.height};
  frame.top = kTop + kCaptionHeight * static_cast<double>(chart.caption.size());
  if (!chart.x_categories.empty()) {
    frame.x = Range{-0.5, static_cast<double>(chart.x_categories.size()) - 0.5};
    if (chart.x_categories.size() > kUpright) frame.bottom = kCategoryBottom;
  }
  out += axes_svg(chart, frame) + references_svg(chart, frame) + series_svg(chart, frame) + legend_svg(chart, frame);
  return out + "</svg>";
}

}  // namespace leaseproof::report::svg
