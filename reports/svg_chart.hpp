#pragma once
// Small inline SVG charts for the sweep's HTML page: scatter and line charts
// with linear axes and "nice" ticks, and the ownership timeline. No scripts
// and no external resources: the page is one file that renders anywhere.
// Private to reports/.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace leaseproof::report::svg {

std::string escape(std::string_view text);  // for HTML and SVG text and attributes

// A fixed palette (colour-blind friendly), by index, wrapping around.
std::string_view color(size_t index);

enum class Marker { dot, ring, cross };

struct Point {
  double x = 0;
  double y = 0;
  std::string tip;  // shown on hover (an SVG <title>)
  Marker marker = Marker::dot;
};

struct Series {
  std::string name;
  std::vector<Point> points;
  bool connect = false;  // draw a line through the points in x order
};

struct ReferenceLine {
  bool vertical = false;
  double at = 0;
  std::string label;
};

struct Chart {
  std::string title;
  // Lines under the title: what each point aggregates (over which axes and
  // seeds), so that no chart sums or overlays without saying so.
  std::vector<std::string> caption;
  std::string x_label;
  // Set: the x axis is categorical, a point's x is an index into these
  // labels (configurations whose ratio would collide on a numeric axis).
  std::vector<std::string> x_categories;
  std::string y_label;
  std::vector<Series> series;
  std::vector<ReferenceLine> references;
  std::optional<Point> highlight;  // circled (the recommendation)
  std::vector<std::string> notes;  // short lines under the legend (what the markers mean)
  double width = 640;
  double height = 360;
};

// An <svg> element; an empty chart says that it has nothing to show.
std::string render(const Chart& chart);

// Ticks at 1, 2 or 5 x 10^k covering [low, high], about `count` of them.
std::vector<double> nice_ticks(double low, double high, int count);
std::string tick_text(double value);

}  // namespace leaseproof::report::svg
