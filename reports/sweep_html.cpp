// sweep.html: one self-contained page (inline CSS and SVG, no scripts, no
// external resources) with the recommendation, four charts and the tables.
#include "reports/sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "reports/svg_chart.hpp"
#include "reports/sweep_text.hpp"
#include "scenarios/metrics.hpp"

namespace leaseproof::report {

namespace {

using svg::escape;

constexpr size_t kTimelineRowsMax = 50;
constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1200px; color: #1a1a1a; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; }
.recommendation { background: #eef6ee; border-left: 5px solid #009E73; padding: 10px 14px; font-size: 15px; }
.recommendation.none { background: #fbeeee; border-left-color: #D55E00; }
table { border-collapse: collapse; margin: 8px 0; font-size: 12.5px; display: block; max-width: 100%; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fff3f0; } tr.invalid td { color: #888; }
code { font-size: 12px; word-break: break-all; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { border: 1px solid #e4e4e4; background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
svg text.title { font-size: 13px; font-weight: 600; } svg text.label { font-size: 12px; }
svg text.caption { font-size: 11.5px; fill: #555; }
svg .grid { stroke: #eee; } svg .frame { fill: none; stroke: #999; }
svg .reference { stroke: #888; stroke-dasharray: 5 4; } svg .highlight { fill: none; stroke: #000; stroke-width: 2; }
svg .overlap { fill: #ff0000; fill-opacity: 0.55; stroke: #b00000; }
.note { color: #555; font-size: 12.5px; }
)";

std::string td(const std::string& text, bool number = false) {
  return fmt::format("<td{}>{}</td>", number ? " class=\"num\"" : "", escape(text));
}

std::string table(const std::vector<std::string>& head, const std::string& body) {
  std::string out = "<table><thead><tr>";
  for (const std::string& name : head) out += "<th>" + escape(name) + "</th>";
  return out + "</tr></thead><tbody>" + body + "</tbody></table>\n";
}

// Series by variant (core/wall, core/counter, liveness/wall, liveness/counter,
// seed), in order of first appearance.
size_t series_index(std::vector<svg::Series>& series, const std::string& name) {
  for (size_t i = 0; i < series.size(); ++i) {
    if (series[i].name == name) return i;
  }
  series.push_back(svg::Series{name, {}, false});
  return series.size() - 1;
}

std::string variant_of(const CellSummary& cell) { return cell.variant.empty() ? "runs" : cell.variant; }

// The axes whose values differ among the cells of one group: what the
// group's point overlays or sums, comma-separated in axis order ("" if none).
std::string varying_axes(const SweepData& data, const std::map<std::string, std::vector<size_t>>& groups) {
  std::string out;
  for (size_t a = 0; a < data.spec.axes.size(); ++a) {
    const bool varies = std::any_of(groups.begin(), groups.end(), [&](const auto& group) {
      return std::any_of(group.second.begin(), group.second.end(),
                         [&](size_t cell) { return data.cells[cell].values[a] != data.cells[group.second.front()].values[a]; });
    });
    if (varies) out += (out.empty() ? "" : ", ") + data.spec.axes[a].name;
  }
  return out;
}

std::string lease_pair_text(double heartbeat_s, double lease_s) {
  return fmt::format("{}s / {}s", svg::tick_text(heartbeat_s), svg::tick_text(lease_s));
}

// Where the recovery chart puts a cell: at its lease / heartbeat ratio, or,
// when two (heartbeat, lease) pairs share a ratio (2.5 s / 10 s, 5 s / 20 s
// and 10 s / 40 s), at its pair on a categorical axis ordered by ratio:
// stacking different configurations on one point would hide which is which.
struct RecoveryAxis {
  std::vector<std::pair<double, double>> pairs;  // (heartbeat, lease), by ratio then heartbeat
  bool categorical = false;

  double x(double heartbeat_s, double lease_s) const {
    if (!categorical) return lease_s / heartbeat_s;
    return static_cast<double>(std::find(pairs.begin(), pairs.end(), std::pair{heartbeat_s, lease_s}) - pairs.begin());
  }
};

RecoveryAxis recovery_axis(const std::vector<const CellSummary*>& cells) {
  RecoveryAxis axis;
  std::set<std::pair<double, double>> pairs;
  for (const CellSummary* s : cells) pairs.insert({*s->heartbeat_s, *s->lease_s});
  axis.pairs.assign(pairs.begin(), pairs.end());
  std::stable_sort(axis.pairs.begin(), axis.pairs.end(),
                   [](const auto& a, const auto& b) { return a.second / a.first < b.second / b.first; });
  for (size_t i = 1; i < axis.pairs.size(); ++i) {
    const double previous = axis.pairs[i - 1].second / axis.pairs[i - 1].first;
    if (std::abs(axis.pairs[i].second / axis.pairs[i].first - previous) < 1e-9) axis.categorical = true;
  }
  return axis;
}

// Crash recovery per cell: judged gaps (p99 and max) in the variant's
// series, excused gaps in a series of their own beside it, so a variant
// whose gaps were excused is never drawn faster than its gaps were.
std::string recovery_chart(const SweepData& data, const SweepSummary& summary) {
  std::vector<const SweepCell*> drawn;
  std::vector<const CellSummary*> figures;
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    const GapStats* crash = s.crash();
    if (!cell.valid() || crash == nullptr || crash->all_gaps() == 0 || !s.heartbeat_s || !s.lease_s) continue;
    drawn.push_back(&cell);
    figures.push_back(&s);
  }
  const RecoveryAxis axis = recovery_axis(figures);
  svg::Chart chart;
  chart.height = axis.categorical ? 420 : 380;
  chart.title = axis.categorical ? "Crash recovery by heartbeat / lease" : "Crash recovery vs lease / heartbeat";
  chart.x_label = axis.categorical ? "heartbeat / lease (ratios collide: one position per pair, by ratio)" : "lease / heartbeat";
  chart.y_label = "crash gap (s)";
  if (axis.categorical) {
    for (const auto& [heartbeat, lease] : axis.pairs) chart.x_categories.push_back(lease_pair_text(heartbeat, lease));
  }
  std::map<std::string, std::vector<size_t>> positions;  // (series, x): the cells drawn there
  for (size_t c = 0; c < drawn.size(); ++c) {
    const CellSummary& s = *figures[c];
    const GapStats& crash = *s.crash();
    const double x = axis.x(*s.heartbeat_s, *s.lease_s);
    positions[fmt::format("{} {}", variant_of(s), x)].push_back(drawn[c]->index);
    const std::string cell = fmt::format("cell {}: {}", drawn[c]->index, cell_label(data.spec, *drawn[c]));
    const std::string all = fmt::format("p99 of all {} gaps, excused included: {} s", crash.all_gaps(),
                                        text::seconds(crash.with_excused_p99_ms));
    if (crash.gaps > 0) {
      const std::string tip = fmt::format("{} ({} judged gaps: p99 {} s, max {} s; {})", cell, crash.gaps,
                                          text::seconds(crash.p99_ms), text::seconds(crash.max_ms), all);
      svg::Series& judged = chart.series[series_index(chart.series, variant_of(s))];
      judged.points.push_back({x, crash.p99_ms / 1000, tip, svg::Marker::dot});
      judged.points.push_back({x, crash.max_ms / 1000, tip, svg::Marker::ring});
    }
    if (crash.excused > 0) {
      const std::string tip = fmt::format("{} ({} excused gaps: p99 {} s, max {} s; {})", cell, crash.excused,
                                          text::seconds(crash.excused_p99_ms), text::seconds(crash.excused_max_ms), all);
      svg::Series& excused = chart.series[series_index(chart.series, variant_of(s) + ": excused gaps")];
      excused.points.push_back({x, crash.excused_p99_ms / 1000, tip, svg::Marker::dot});
      excused.points.push_back({x, crash.excused_max_ms / 1000, tip, svg::Marker::ring});
    }
  }
  chart.caption.push_back("One point per cell: p99 and max over its seeds' gaps; excused gaps (overlapping");
  chart.caption.push_back("another fault) as their own series. Ranking uses the p99 of all gaps.");
  const std::string overlaid = varying_axes(data, positions);
  if (!overlaid.empty()) chart.caption.push_back("Overlaid at one position (not summed): cells differing in " + overlaid + ".");
  chart.references.push_back({false, static_cast<double>(data.spec.recovery_target.ns()) / 1e9,
                              "target " + format_duration(data.spec.recovery_target)});
  chart.notes = {"dot: p99 of the cell", "ring: max of the cell"};
  return svg::render(chart);
}

std::string cost_chart(const SweepData& data, const SweepSummary& summary) {
  svg::Chart chart;
  chart.title = fmt::format("Monthly cost ({}, on demand) vs crash recovery p99", data.spec.prices.front().name);
  chart.caption = {"One point per cell, its seeds together; p99 over every crash gap, excused ones included."};
  chart.x_label = "crash recovery p99, excused gaps included (s)";
  chart.y_label = "$ / month on demand";
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    const GapStats* crash = s.crash();
    if (!cell.valid() || crash == nullptr || crash->all_gaps() == 0) continue;
    const size_t i = series_index(chart.series, variant_of(s));
    chart.series[i].points.push_back(
        {crash->with_excused_p99_ms / 1000, s.total_cost[0].on_demand(),
         fmt::format("cell {}: {} ({}, {} failing seeds)", cell.index, cell_label(data.spec, cell),
                     text::money(s.total_cost[0].on_demand()), s.failing_seeds),
         s.failing_seeds == 0 ? svg::Marker::dot : svg::Marker::cross});
  }
  chart.references.push_back({true, static_cast<double>(data.spec.recovery_target.ns()) / 1e9, "target"});
  chart.notes = {"dot: no violation", "cross: violations", "circle: recommended"};
  if (summary.recommended) {
    const Configuration& best = summary.configurations[*summary.recommended];
    chart.highlight = svg::Point{best.crash_p99_ms.value_or(0) / 1000, best.on_demand_month, "recommended: " + best.label,
                                 svg::Marker::dot};
  }
  return svg::render(chart);
}

// Failing seeds (single ownership) as a share of the seeds run, by the first
// skew or pause axis's value, per variant: the cells of one (variant, value)
// are summed, and the caption names the axes they differ in.
std::string violations_chart(const SweepData& data, const SweepSummary& summary) {
  const auto axis = std::find_if(data.spec.axes.begin(), data.spec.axes.end(),
                                 [](const SweepAxis& a) { return is_stress_axis(a.name); });
  if (axis == data.spec.axes.end()) return "<p class=\"note\">The grid has no skew or pause axis: no violations-vs-skew chart.</p>";
  const size_t a = static_cast<size_t>(axis - data.spec.axes.begin());
  std::map<std::pair<std::string, double>, std::pair<uint64_t, uint64_t>> counts;  // (variant, value) -> failing, seeds
  std::map<std::string, std::vector<size_t>> summed;                               // the cells of each point
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    if (!cell.valid() || s.seeds_run == 0) continue;
    const double value = static_cast<double>(parse_duration(cell.values[a].get<std::string>())->ns()) / 1e9;
    auto& [failing, seeds] = counts[{variant_of(s), value}];
    failing += s.failing("single ownership");
    seeds += s.seeds_run;
    summed[fmt::format("{} {}", variant_of(s), value)].push_back(cell.index);
  }
  svg::Chart chart;
  chart.title = fmt::format("Single-ownership violations vs {}", axis->name);
  const std::string over = varying_axes(data, summed);
  chart.caption = {over.empty() ? std::string{"One point per variant and value: its cell's seeds."}
                                : fmt::format("Per variant and value, failing seeds summed over {}.", over)};
  chart.x_label = axis->name + " (s)";
  chart.y_label = "failing seeds (%)";
  for (const auto& [key, figures] : counts) {
    // Points only: a line between two measured values would claim the
    // values between them, which no cell measured.
    const size_t i = series_index(chart.series, key.first);
    chart.series[i].points.push_back({key.second, 100.0 * static_cast<double>(figures.first) / static_cast<double>(figures.second),
                                      fmt::format("{} at {} s: {} of {} seeds{}", key.first, svg::tick_text(key.second),
                                                  figures.first, figures.second, over.empty() ? "" : ", summed over " + over),
                                      svg::Marker::dot});
  }
  chart.references.push_back({true, static_cast<double>(data.spec.safety_margin.ns()) / 1e9, "safety margin"});
  return svg::render(chart);
}

// --- the ownership timeline --------------------------------------------------

struct Segment {
  double begin = 0;
  double end = 0;
};

// `segment` minus the worker's pauses: when a worker is paused it does not act.
std::vector<Segment> acting(Segment segment, const std::vector<Segment>& pauses) {
  std::vector<Segment> parts{segment};
  for (const Segment& pause : pauses) {
    std::vector<Segment> next;
    for (const Segment& part : parts) {
      if (pause.end <= part.begin || pause.begin >= part.end) {
        next.push_back(part);
        continue;
      }
      if (pause.begin > part.begin) next.push_back({part.begin, pause.begin});
      if (pause.end < part.end) next.push_back({pause.end, part.end});
    }
    parts = std::move(next);
  }
  return parts;
}

// Times two different workers acted as one connection's owner at once.
std::map<std::string, std::vector<Segment>> overlaps(const OwnershipTimeline& timeline) {
  std::map<std::string, std::vector<Segment>> pauses;
  for (const OwnershipTimeline::Fault& fault : timeline.faults) {
    if (fault.kind == "pause") pauses[fault.worker].push_back({fault.at_s, fault.at_s + fault.length_s});
  }
  std::map<std::string, std::vector<const OwnershipTimeline::Interval*>> by_connection;
  for (const auto& interval : timeline.intervals) by_connection[interval.connection].push_back(&interval);
  std::map<std::string, std::vector<Segment>> out;
  for (const auto& [connection, list] : by_connection) {
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size(); ++j) {
        if (list[i]->worker == list[j]->worker) continue;
        const Segment both{std::max(list[i]->begin_s, list[j]->begin_s), std::min(list[i]->end_s, list[j]->end_s)};
        if (both.end <= both.begin) continue;
        for (const Segment& a : acting(both, pauses[list[i]->worker])) {
          for (const Segment& b : acting(a, pauses[list[j]->worker])) out[connection].push_back(b);
        }
      }
    }
  }
  return out;
}

// Connections with an overlap first, then the rest, at most kTimelineRowsMax,
// shown in their natural order.
std::vector<std::string> shown_connections(const OwnershipTimeline& timeline,
                                           const std::map<std::string, std::vector<Segment>>& overlapping) {
  std::vector<std::string> chosen;
  for (const std::string& c : timeline.connections) {
    if (overlapping.contains(c) && chosen.size() < kTimelineRowsMax) chosen.push_back(c);
  }
  for (const std::string& c : timeline.connections) {
    if (!overlapping.contains(c) && chosen.size() < kTimelineRowsMax) chosen.push_back(c);
  }
  std::vector<std::string> ordered;
  for (const std::string& c : timeline.connections) {
    if (std::find(chosen.begin(), chosen.end(), c) != chosen.end()) ordered.push_back(c);
  }
  return ordered;
}

size_t worker_number(const std::string& worker) {
  size_t number = 0;
  for (size_t i = worker.find('-') + 1; i < worker.size() && std::isdigit(static_cast<unsigned char>(worker[i])); ++i) {
    number = number * 10 + static_cast<size_t>(worker[i] - '0');
  }
  return number;
}

// The stretch of simulated time a timeline shows: the whole run, or the
// window around a violation.
struct TimelineFrame {
  double width = 1100;
  double left = 56;
  double right = 16;
  double top = 62;
  double row = 11;
  double begin_s = 0;
  double end_s = 1;
  bool minutes = false;

  double x(double seconds) const { return left + (seconds - begin_s) / (end_s - begin_s) * (width - left - right); }
  // `segment` cut to the window; nullopt when none of it is inside.
  std::optional<Segment> clip(Segment segment) const {
    if (segment.end < begin_s || segment.begin > end_s) return std::nullopt;
    return Segment{std::max(segment.begin, begin_s), std::min(segment.end, end_s)};
  }
};

std::string timeline_axes(const TimelineFrame& f, const std::vector<std::string>& rows, double bottom) {
  std::string out;
  const double unit = f.minutes ? 60 : 1;
  for (const double tick : svg::nice_ticks(f.begin_s / unit, f.end_s / unit, 10)) {
    if (tick * unit < f.begin_s - 1e-9 || tick * unit > f.end_s + 1e-9) continue;
    const double x = f.x(tick * unit);
    out += fmt::format(R"svg(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" class="grid"/>)svg", x, f.top, bottom + 4);
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)svg", x, bottom + 16, svg::tick_text(tick));
  }
  out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" class="label">simulated time ({})</text>)svg",
                     (f.left + f.width - f.right) / 2, bottom + 34, f.minutes ? "min" : "s");
  for (size_t r = 0; r < rows.size(); ++r) {
    out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)svg", f.left - 6,
                       f.top + static_cast<double>(r) * f.row + f.row - 2, escape(rows[r]));
  }
  return out;
}

// Fault labels in two rows above the rows of bars; a label that would
// overlap both rows' last labels is left to the line's tooltip.
std::string timeline_faults(const OwnershipTimeline& t, const TimelineFrame& f, double bottom) {
  constexpr double kLabelWidth = 110;
  std::string out;
  double row_end[2] = {-1e9, -1e9};
  for (const OwnershipTimeline::Fault& fault : t.faults) {
    const std::optional<Segment> shown = f.clip({fault.at_s, fault.at_s + fault.length_s});
    if (!shown) continue;
    const double x = f.x(shown->begin);
    const std::string tip = fmt::format("{} {} at {:.3f} s{}", fault.worker, fault.kind, fault.at_s,
                                        fault.kind == "pause" ? fmt::format(" for {:.3f} s", fault.length_s) : "");
    if (fault.kind == "pause") {
      out += fmt::format(R"svg(<g><title>{}</title><rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="#999" fill-opacity="0.25"/></g>)svg",
                         escape(tip), x, f.top, std::max(1.0, f.x(shown->end) - x), bottom - f.top);
      continue;
    }
    const char* stroke = fault.kind == "crash" ? "#D55E00" : fault.kind == "restart" ? "#009E73" : "#E69F00";
    const int row = x >= row_end[0] ? 0 : x >= row_end[1] ? 1 : -1;
    const double line_top = row < 0 ? f.top - 4 : f.top - 14 - 13 * row;
    out += fmt::format(R"svg(<g><title>{}</title><line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-dasharray="4 3"/>)svg",
                       escape(tip), x, line_top, x, bottom, stroke);
    if (row >= 0) {
      out += fmt::format(R"svg(<text x="{:.1f}" y="{:.1f}">{}</text>)svg", x + 2, line_top - 2,
                         escape(fault.kind + " " + fault.worker));
      row_end[row] = x + kLabelWidth;
    }
    out += "</g>";
  }
  return out;
}

std::string timeline_bars(const OwnershipTimeline& t, const TimelineFrame& f, const std::vector<std::string>& rows,
                          const std::map<std::string, std::vector<Segment>>& overlapping) {
  std::string out;
  auto row_of = [&](const std::string& c) { return std::find(rows.begin(), rows.end(), c) - rows.begin(); };
  for (const OwnershipTimeline::Interval& i : t.intervals) {
    const auto r = row_of(i.connection);
    const std::optional<Segment> shown = f.clip({i.begin_s, i.end_s});
    if (static_cast<size_t>(r) >= rows.size() || !shown) continue;
    out += fmt::format(R"svg(<g><title>{}</title><rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"/></g>)svg",
                       escape(fmt::format("{}: {} epoch {}, {:.3f} s to {:.3f} s ({})", i.connection, i.worker, i.epoch,
                                          i.begin_s, i.end_s, i.reason)),
                       f.x(shown->begin), f.top + static_cast<double>(r) * f.row + 1,
                       std::max(0.5, f.x(shown->end) - f.x(shown->begin)), f.row - 2, svg::color(worker_number(i.worker)));
  }
  for (const auto& [connection, segments] : overlapping) {
    const auto r = row_of(connection);
    if (static_cast<size_t>(r) >= rows.size()) continue;
    for (const Segment& s : segments) {
      const std::optional<Segment> shown = f.clip(s);
      if (!shown) continue;
      out += fmt::format(R"svg(<g><title>{}</title><rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" class="overlap"/></g>)svg",
                         escape(fmt::format("{}: two acting owners from {:.3f} s to {:.3f} s", connection, s.begin, s.end)),
                         f.x(shown->begin) - 1, f.top + static_cast<double>(r) * f.row,
                         std::max(3.0, f.x(shown->end) - f.x(shown->begin) + 2), f.row);
    }
  }
  return out;
}

std::string timeline_legend(const OwnershipTimeline& t, const TimelineFrame& f) {
  std::set<std::string> workers;
  for (const auto& i : t.intervals) workers.insert(i.worker);
  std::vector<std::string> sorted(workers.begin(), workers.end());
  std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) { return worker_number(a) < worker_number(b); });
  std::string out;
  double x = f.left;
  for (const std::string& w : sorted) {
    out += fmt::format(R"svg(<rect x="{:.1f}" y="8" width="10" height="10" fill="{}"/><text x="{:.1f}" y="17">{}</text>)svg", x,
                       svg::color(worker_number(w)), x + 14, escape(w));
    x += 90;
  }
  out += fmt::format(R"svg(<rect x="{:.1f}" y="8" width="10" height="10" class="overlap"/><text x="{:.1f}" y="17">two acting owners</text>)svg",
                     x, x + 14);
  return out;
}

// One timeline view: `rows` over the frame's window; `boxed`, when set, is
// outlined (the zoomed window, on the whole run's view).
std::string timeline_view(const OwnershipTimeline& t, const std::map<std::string, std::vector<Segment>>& overlapping,
                          const std::vector<std::string>& rows, const TimelineFrame& f, const std::string& label,
                          std::optional<Segment> boxed) {
  const double bottom = f.top + static_cast<double>(rows.size()) * f.row;
  const double height = bottom + 42;
  std::string out = fmt::format(R"svg(<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" role="img" aria-label="{2}">)svg",
                                f.width, height, escape(label));
  out += timeline_legend(t, f) + timeline_axes(f, rows, bottom) + timeline_faults(t, f, bottom) +
         timeline_bars(t, f, rows, overlapping);
  if (boxed) {
    out += fmt::format(R"svg(<g><title>{}</title><rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" class="highlight" stroke-dasharray="3 2"/></g>)svg",
                       escape(fmt::format("the zoomed view: {:.3f} s to {:.3f} s", boxed->begin, boxed->end)),
                       f.x(boxed->begin) - 2, f.top - 2, std::max(4.0, f.x(boxed->end) - f.x(boxed->begin) + 4),
                       bottom - f.top + 4);
  }
  return out + "</svg>";
}

// The run's first stretch of two acting owners (earliest start, then
// connection order): the zoomed view's subject.
std::optional<std::pair<std::string, Segment>> first_violation(const std::map<std::string, std::vector<Segment>>& overlapping) {
  std::optional<std::pair<std::string, Segment>> first;
  for (const auto& [connection, segments] : overlapping) {
    for (const Segment& s : segments) {
      if (!first || s.begin < first->second.begin) first = std::pair{connection, s};
    }
  }
  return first;
}

// The window around a violation: twice its length of context on either
// side (at least kZoomContextMin_s), inside the run. A 2 s violation gets a
// 10 s window, so it spans a fifth of the chart, not a sliver of the run.
Segment zoom_window(Segment violation, double duration_s) {
  constexpr double kZoomContextMin_s = 0.01;
  const double context = std::max(2 * (violation.end - violation.begin), kZoomContextMin_s);
  return {std::max(0.0, violation.begin - context), std::min(duration_s, violation.end + context)};
}

std::string timeline_svg(const OwnershipTimeline& t) {
  const auto overlapping = overlaps(t);
  const std::vector<std::string> rows = shown_connections(t, overlapping);
  TimelineFrame whole;
  whole.end_s = std::max(t.duration_s, 1e-9);
  whole.minutes = t.duration_s >= 300;
  std::string out;
  std::optional<Segment> boxed;
  if (const auto first = first_violation(overlapping)) {
    TimelineFrame zoomed;
    const Segment window = zoom_window(first->second, whole.end_s);
    zoomed.begin_s = window.begin;
    zoomed.end_s = window.end;
    std::vector<std::string> zoomed_rows;  // the connections with two acting owners inside the window
    for (const std::string& c : rows) {
      const auto it = overlapping.find(c);
      if (it != overlapping.end() && std::any_of(it->second.begin(), it->second.end(), [&](const Segment& s) { return zoomed.clip(s).has_value(); })) {
        zoomed_rows.push_back(c);
      }
    }
    out += fmt::format("<p>Zoomed to the first violation: {} had two acting owners from {:.3f} s to {:.3f} s ({:.3f} s); "
                       "the view shows {:.3f} s to {:.3f} s. The whole run follows, the zoomed window boxed.</p>\n",
                       escape(first->first), first->second.begin, first->second.end, first->second.end - first->second.begin,
                       window.begin, window.end);
    out += timeline_view(t, overlapping, zoomed_rows, zoomed, "ownership timeline, zoomed to the first violation", std::nullopt);
    boxed = window;
  }
  out += timeline_view(t, overlapping, rows, whole, "ownership timeline", boxed);
  if (rows.size() < t.connections.size()) {
    out += fmt::format("<p class=\"note\">{} of {} connections shown (those with two acting owners first).</p>", rows.size(),
                       t.connections.size());
  }
  return out;
}

std::string timeline_section(const SweepData& data, const std::optional<OwnershipTimeline>& timeline) {
  std::string out = "<h2>Ownership timeline</h2>\n";
  if (!timeline) return out + "<p>No run to draw (no valid cell).</p>\n";
  const SweepCell& cell = data.cells[timeline->cell];
  out += fmt::format("<p>Cell {} ({}), seed {}: {}. Each row is a connection; a bar is a worker acting as its owner "
                     "(from lease.open to lease.close or the worker's crash); red marks two acting owners at once. "
                     "Pauses are grey bands; crashes and restarts dashed lines.</p>\n<p><code>{}</code></p>\n",
                     cell.index, escape(cell_label(data.spec, cell)), timeline->seed, escape(timeline->reason),
                     escape(timeline->reproduce));
  if (timeline->intervals.empty()) return out + "<p>This run has no ownership events (not a lease scenario?).</p>\n";
  out += timeline_svg(*timeline);
  if (!timeline->violations.empty()) {
    out += "<details><summary>The run's first violations</summary><ul>";
    for (const std::string& v : timeline->violations) out += "<li><code>" + escape(v) + "</code></li>";
    out += "</ul></details>\n";
  }
  return out;
}

// A cell's first cells: its index and its axis values.
std::string cell_head(const SweepCell& cell) {
  std::string row = td(std::to_string(cell.index), true);
  for (const nlohmann::json& value : cell.values) row += td(axis_value_text(value));
  return row;
}

// An invalid cell's row: its first cells, then why, across the other columns.
std::string invalid_row(const std::string& head, int columns, const SweepCell& cell) {
  return fmt::format("<tr class=\"invalid\">{}<td colspan=\"{}\">invalid: {}</td></tr>", head, columns,
                     escape(cell.invalid));
}

// A configuration's first cells: its label, verdict and monthly costs.
std::string configuration_cells(const SweepSummary& summary, size_t i) {
  const Configuration& c = summary.configurations[i];
  return td(c.label + (summary.recommended == i ? " (recommended)" : "")) + td(c.verdict) +
         td(c.seeds_judged > 0 ? text::money(c.on_demand_month) : "-", true) +
         td(c.seeds_judged > 0 ? text::money(c.provisioned_month) : "-", true);
}

// Registry sweeps: per cell, what a broadcast cost against the members it
// had to reach, and how stale presence got, one series per configuration.
std::string registry_charts(const SweepData& data, const SweepSummary& summary) {
  svg::Chart cost;
  cost.title = fmt::format("DynamoDB $ per million broadcasts ({}, on demand) vs room size", data.spec.prices.front().name);
  cost.caption = {"One point per cell, its seeds together; x: the live members a broadcast", "had to reach, on average."};
  cost.x_label = "members per broadcast";
  cost.y_label = "$ per million broadcasts";
  svg::Chart stale;
  stale.title = "Presence staleness p99 vs members per broadcast";
  stale.caption = {"One point per cell: how long after a user's last connection died", "presence still said online (p99: the histogram bucket's upper edge)."};
  stale.x_label = "members per broadcast";
  stale.y_label = "presence staleness p99 (s)";
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    if (!cell.valid() || !s.registry || s.registry->broadcasts == 0) continue;
    const RegistryCell& r = *s.registry;
    std::string configuration;
    for (const Configuration& c : summary.configurations) {
      if (std::find(c.cells.begin(), c.cells.end(), cell.index) != c.cells.end()) configuration = c.label;
    }
    const svg::Marker marker = s.failing_seeds == 0 ? svg::Marker::dot : svg::Marker::cross;
    const std::string tip = fmt::format("cell {}: {} ({} failing seeds)", cell.index, cell_label(data.spec, cell), s.failing_seeds);
    cost.series[series_index(cost.series, configuration)].points.push_back(
        {r.members_per_broadcast(), r.dollars_per_million_broadcasts, tip, marker});
    const std::optional<double> p99 = RegistryCell::p99_ms(r.staleness_presence);
    if (p99 && !std::isinf(*p99)) {
      stale.series[series_index(stale.series, configuration)].points.push_back(
          {r.members_per_broadcast(), *p99 / 1000, tip, marker});
    }
  }
  cost.notes = stale.notes = {"dot: no violation", "cross: violations"};
  return svg::render(cost) + "\n" + svg::render(stale);
}

std::string registry_configurations_table(const SweepSummary& summary) {
  const double last = scenarios::histogram_edges_ms().back();
  std::string body;
  for (size_t i = 0; i < summary.configurations.size(); ++i) {
    const Configuration& c = summary.configurations[i];
    body += fmt::format("<tr{}>{}{}{}</tr>", c.qualifies ? "" : " class=\"bad\"", configuration_cells(summary, i),
                        td(text::staleness(c.staleness_broadcast_p99_ms, last), true),
                        td(text::staleness(c.staleness_presence_p99_ms, last), true));
  }
  return table({"configuration", "verdict", "$/month on demand", "$/month provisioned", "worst broadcast staleness p99 (s)",
                "worst presence staleness p99 (s)"},
               body);
}

std::string registry_cells_table(const SweepData& data, const SweepSummary& summary) {
  const double last = scenarios::histogram_edges_ms().back();
  std::vector<std::string> head{"cell"};
  for (const SweepAxis& axis : data.spec.axes) head.push_back(axis.name);
  for (const char* name : {"seeds", "failing seeds", "broadcasts", "members per broadcast", "delivered / expected",
                           "left out", "refused by the gateway", "connection-hours", "broadcast staleness p99 (s)",
                           "presence staleness p99 (s)", "$ per million broadcasts", "$ per thousand connection-hours"}) {
    head.emplace_back(name);
  }
  std::string body;
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    std::string row = cell_head(cell);
    if (!cell.valid() || !s.registry) {
      body += invalid_row(row, 12, cell);
      continue;
    }
    const RegistryCell& r = *s.registry;
    row += td(std::to_string(s.seeds_run), true) +
           td(s.failing_seeds == 0 ? "0" : fmt::format("{} ({})", s.failing_seeds, text::kinds(s))) +
           td(std::to_string(r.broadcasts), true) + td(fmt::format("{:.1f}", r.members_per_broadcast()), true) +
           td(fmt::format("{} / {}", r.delivered, r.expected_deliveries), true) +
           td(std::to_string(r.misses_not_in_answer), true) + td(std::to_string(r.misses_gateway), true) +
           td(fmt::format("{:.1f}", r.connection_hours), true) +
           td(text::staleness(RegistryCell::p99_ms(r.staleness_broadcast), last), true) +
           td(text::staleness(RegistryCell::p99_ms(r.staleness_presence), last), true) +
           td(fmt::format("${:.4f}", r.dollars_per_million_broadcasts), true) +
           td(fmt::format("${:.4f}", r.dollars_per_thousand_connection_hours), true);
    body += fmt::format("<tr{}>{}</tr>", s.failing_seeds > 0 ? " class=\"bad\"" : "", row);
  }
  return table(head, body);
}

// --- tables --------------------------------------------------------------------

std::string unsafe_table(const SweepSummary& summary) {
  if (summary.unsafe.empty()) return "<p>The grid has no skew or pause axis.</p>\n";
  std::string body;
  for (const UnsafeValue& u : summary.unsafe) {
    body += fmt::format("<tr{}>{}{}{}{}{}{}</tr>", u.minimal_unsafe ? " class=\"bad\"" : "", td(u.axis), td(u.others),
                        td(u.ran ? u.minimal_unsafe.value_or("none") : "not run (invalid cells)"),
                        td(u.minimal_unsafe ? fmt::format("{} of {}", u.failing_seeds, u.seeds) : "-", true),
                        td(u.largest_tried), td(u.analytic));
  }
  return table({"axis", "other axes", "smallest unsafe value", "failing seeds there", "largest tried", "analytic margin"}, body);
}

std::string configurations_table(const SweepSummary& summary) {
  std::string body;
  for (size_t i = 0; i < summary.configurations.size(); ++i) {
    const Configuration& c = summary.configurations[i];
    body += fmt::format("<tr{}>{}{}</tr>", c.qualifies ? "" : " class=\"bad\"", configuration_cells(summary, i),
                        td(c.crash_p99_ms ? text::seconds(*c.crash_p99_ms) : "-", true));
  }
  return table({"configuration", "verdict", "$/month on demand", "$/month provisioned", "worst crash p99 (s)"}, body);
}

std::string cells_table(const SweepData& data, const SweepSummary& summary) {
  std::vector<std::string> head{"cell"};
  for (const SweepAxis& axis : data.spec.axes) head.push_back(axis.name);
  for (const char* name : {"seeds", "failing seeds", "crash p50 / p99 / max (s)", "bound (s)", "handover p50 / p99 / max (s)",
                           "WCU/s", "RCU/s", "$/month on demand", "$/month provisioned"}) {
    head.emplace_back(name);
  }
  std::string body;
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    std::string row = cell_head(cell);
    if (!cell.valid()) {
      body += invalid_row(row, 9, cell);
      continue;
    }
    const Rates rates = text::total_rates(s);
    row += td(std::to_string(s.seeds_run), true) +
           td(s.failing_seeds == 0 ? "0" : fmt::format("{} ({})", s.failing_seeds, text::kinds(s))) +
           td(text::gap_triple(s, "crash")) + td(text::bound(s, "crash"), true) + td(text::gap_triple(s, "graceful")) +
           td(text::rate(rates.wcu_per_s), true) + td(text::rate(rates.rcu_per_s), true) +
           td(text::money(s.total_cost[0].on_demand()), true) + td(text::money(s.total_cost[0].provisioned()), true);
    body += fmt::format("<tr{}>{}</tr>", s.failing_seeds > 0 ? " class=\"bad\"" : "", row);
  }
  return table(head, body);
}

std::string capacity_table(const SweepData& data, const SweepSummary& summary) {
  std::vector<std::string> head{"cell", "table / GSI", "WCU/s", "RCU/s"};
  for (const Prices& p : data.spec.prices) {
    head.push_back(p.name + " on demand");
    head.push_back(p.name + " provisioned");
  }
  head.emplace_back("share");
  std::string body;
  for (const SweepCell& cell : data.cells) {
    const CellSummary& s = summary.cells[cell.index];
    for (const CapacityUse& use : s.capacity) {
      std::string row = td(std::to_string(cell.index), true) + td(use.name()) + td(text::rate(use.rates.wcu_per_s), true) +
                        td(text::rate(use.rates.rcu_per_s), true);
      for (const MonthlyCost& cost : use.cost) row += td(text::money(cost.on_demand()), true) + td(text::money(cost.provisioned()), true);
      const double total = s.total_cost[0].on_demand();
      row += td(total > 0 ? fmt::format("{:.0f}%", 100 * use.cost[0].on_demand() / total) : "-", true);
      body += "<tr>" + row + "</tr>";
    }
  }
  return table(head, body);
}

std::string cost_check(const SweepSpec& spec) {
  std::string out = "<p>Cost model check: 100 WCU/s (the articles' 500 connections &times; one write per 5 s) costs";
  for (size_t p = 0; p < spec.prices.size(); ++p) {
    const MonthlyCost cost = monthly_cost(Rates{100, 0}, spec.prices[p]);
    out += fmt::format("{} {} on demand and {} provisioned with the <b>{}</b> prices", p == 0 ? "" : ";",
                       text::money(cost.on_demand()), text::money(cost.provisioned()), escape(spec.prices[p].name));
  }
  return out + ".</p>\n";
}

std::string reproduce_list(const SweepData& data, const SweepSummary& summary) {
  std::string items;
  for (const SweepCell& cell : data.cells) {
    for (const auto& [kind, k] : summary.cells[cell.index].kinds) {
      items += fmt::format("<li>cell {} ({}), {}: {} of {} seeds; lowest seed {}<br><code>{}</code></li>", cell.index,
                           escape(cell_label(data.spec, cell)), escape(kind), k.failing_seeds,
                           summary.cells[cell.index].seeds_run, k.lowest_seed, escape(k.reproduce));
    }
  }
  return items.empty() ? "<p>No seed failed.</p>\n" : "<details open><summary>Lowest failing seed per cell and property</summary><ul>" + items + "</ul></details>\n";
}

std::string intro(const SweepData& data, const SweepSummary& summary) {
  const SweepSpec& spec = data.spec;
  uint64_t runs = 0;
  for (const CellSummary& cell : summary.cells) runs += cell.seeds_run;
  std::string prices;
  for (const Prices& p : spec.prices) prices += fmt::format("<li>Prices <b>{}</b>: {}.</li>", escape(p.name), escape(p.source));
  if (summary.registry) {
    return fmt::format(
        "<p>Scenario <code>{}</code>, {} simulated per run, {} seeds per cell, {} cells, {} runs. Axes: {}. Base parameters: "
        "<code>{}</code>.</p><ul><li>A registry sweep: the configuration axes are room_shards, ttl, algorithm and "
        "flaws; the others describe the workload, and a configuration must run with zero violations at each of their "
        "values.</li>{}<li>Monthly costs: the runs' average consumed capacity, {}.</li></ul>\n",
        escape(spec.scenario), format_duration(spec.duration), spec.seeds, data.cells.size(), runs,
        escape(text::axes_summary(spec)), escape(spec.base.dump()), prices, escape(text::fleet_text(spec)));
  }
  return fmt::format(
      "<p>Scenario <code>{}</code>, {} simulated per run, {} seeds per cell, {} cells, {} runs. Axes: {}. Base parameters: "
      "<code>{}</code>.</p><ul><li>Recovery target: crash p99 &le; {}; safety margin {} (every skew and pause value "
      "up to it must be safe).</li>{}<li>Monthly costs: the runs' average consumed capacity, {}.</li></ul>\n",
      escape(spec.scenario), format_duration(spec.duration), spec.seeds, data.cells.size(), runs,
      escape(text::axes_summary(spec)), escape(spec.base.dump()), format_duration(spec.recovery_target),
      format_duration(spec.safety_margin), prices, escape(text::fleet_text(spec)));
}

}  // namespace

std::string render_html(const SweepData& data, const SweepSummary& summary, const std::optional<OwnershipTimeline>& timeline) {
  const std::string title = "Sweep: " + (data.spec.title.empty() ? data.spec.scenario : data.spec.title);
  std::string page = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" "
      "content=\"width=device-width, initial-scale=1\">\n<title>{0}</title>\n<style>{1}</style>\n</head>\n<body>\n<h1>{0}</h1>\n",
      escape(title), kStyle);
  page += intro(data, summary);
  page += fmt::format("<h2>Recommendation</h2>\n<p class=\"recommendation{}\" id=\"recommendation\">{}</p>\n",
                      summary.recommended ? "" : " none", escape(summary.recommendation));
  if (summary.registry) {
    page += "<h2>Charts</h2>\n<div class=\"charts\">\n" + registry_charts(data, summary) + "\n</div>\n";
    page += "<h2>Configurations</h2>\n" + registry_configurations_table(summary);
    page += "<h2>Registry cells</h2>\n<p class=\"note\">Summed over each cell's seeds; the definitions are in sweep.md "
            "and docs/reports.md.</p>\n" + registry_cells_table(data, summary);
    page += "<h2>DynamoDB capacity and cost by table and GSI</h2>\n" + cost_check(data.spec) +
            "<details><summary>Every cell, base table and GSI apart</summary>\n" + capacity_table(data, summary) +
            "</details>\n";
    page += "<h2>Reproduce</h2>\n" + reproduce_list(data, summary);
    return page + "</body>\n</html>\n";
  }
  page += "<h2>Charts</h2>\n<div class=\"charts\">\n" + recovery_chart(data, summary) + "\n" + cost_chart(data, summary) +
          "\n" + violations_chart(data, summary) + "\n</div>\n";
  page += "<h2>Smallest unsafe skew and pause values</h2>\n" + unsafe_table(summary);
  page += timeline_section(data, timeline);
  page += "<h2>Configurations</h2>\n" + configurations_table(summary);
  page += "<h2>Cells</h2>\n" + cells_table(data, summary);
  page += "<h2>DynamoDB capacity and cost by table and GSI</h2>\n" + cost_check(data.spec) +
          "<details><summary>Every cell, base table and GSI apart</summary>\n" + capacity_table(data, summary) + "</details>\n";
  page += "<h2>Reproduce</h2>\n" + reproduce_list(data, summary);
  return page + "</body>\n</html>\n";
}

}  // namespace leaseproof::report
