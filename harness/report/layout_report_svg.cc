// The SVG renderer of layout_report.h: rows run downwards, one column per TP rank.
#include <algorithm>
#include <sstream>

#include "harness/report/layout_report.h"

namespace ih::report {
namespace {

constexpr double kPlotHeight = 900, kColumnWidth = 260, kLeft = 120, kTop = 60, kMinLabelPx = 11;

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '\'')
      out += "&apos;";
    else
      out += c;
  }
  return out;
}

// Distinct, stable colours per global rank (golden-angle hues).
std::string colour(std::int64_t rank) { return "hsl(" + std::to_string((rank * 137) % 360) + ",65%,68%)"; }

struct Canvas {
  std::ostringstream svg;
  double scale = 1;  // pixels per row
  double y(std::int64_t row) const { return kTop + static_cast<double>(row) * scale; }
  double x(std::int64_t t) const { return kLeft + static_cast<double>(t) * (kColumnWidth + 20); }
  void rect(double x0, double y0, double w, double h, const std::string& fill, const std::string& extra = "") {
    svg << "<rect x='" << x0 << "' y='" << y0 << "' width='" << w << "' height='" << std::max(h, 0.5) << "' fill='"
        << fill << "' " << extra << "/>\n";
  }
  void line(double x0, double y0, double x1, double y1, const std::string& style) {
    svg << "<line x1='" << x0 << "' y1='" << y0 << "' x2='" << x1 << "' y2='" << y1 << "' " << style << "/>\n";
  }
  void text(double x0, double y0, const std::string& s, const std::string& extra = "") {
    svg << "<text x='" << x0 << "' y='" << y0 << "' " << extra << ">" << escape(s) << "</text>\n";
  }
};

void draw_axis(Canvas& c, const LayoutReport& r, std::int64_t total_rows) {
  const auto starts = r.layout.starts();
  const double right = c.x(r.params.tp) - 20;
  for (std::size_t j = 0; j < starts.size(); ++j) {  // chunk (section) boundaries, dashed
    c.line(kLeft - 10, c.y(starts[j]), right, c.y(starts[j]), "stroke='#555' stroke-dasharray='4,3'");
    if (r.layout.sections[j] * c.scale >= kMinLabelPx || j == 0)
      c.text(8, c.y(starts[j]) + 11, r.layout.names[j] + " @" + std::to_string(starts[j]), "font-size='11'");
  }
  if (r.params.gtp > 1)  // GTP shard boundaries, solid
    for (std::int64_t g = 0; g <= r.params.gtp; ++g)
      c.line(kLeft - 14, c.y(g * r.padding.shard_rows), right, c.y(g * r.padding.shard_rows),
             "stroke='#000' stroke-width='1.5'");
  c.line(kLeft - 10, c.y(total_rows), right, c.y(total_rows), "stroke='#000'");
}

void draw_column(Canvas& c, const LayoutReport& r, std::int64_t t) {
  const double x0 = c.x(t);
  c.text(x0, kTop - 10, "TP rank " + std::to_string(t), "font-size='13' font-weight='bold'");
  if (r.padding.pad > 0)  // pad rows: saved by nobody
    c.rect(x0, c.y(r.padding.rows), kColumnWidth, r.padding.pad * c.scale, "url(#pad)", "stroke='#999'");
  for (const ReportPiece& p : r.pieces) {
    if (p.tp_rank != t || !p.main_replica) continue;  // non-main replicas save nothing
    const double h = p.local_shape[0] * c.scale;
    c.rect(x0, c.y(p.tp_local_row), kColumnWidth, h, colour(t * r.params.gtp + p.gtp_rank),
           "stroke='#333' stroke-width='0.5'");
    if (h < kMinLabelPx) continue;
    const std::string name = p.key.substr(r.params.key.size() + 1);
    c.text(x0 + 4, c.y(p.tp_local_row) + std::min(h, 24.0) / 2 + 4,
           "(" + std::to_string(t) + "," + std::to_string(p.gtp_rank) + ") " + name + " " +
               std::to_string(p.local_shape[0]) + " rows @" + std::to_string(p.global_offset[0]),
           "font-size='10'");
  }
}

// The comparison picture: two panels (reference, target), one column per TP rank and a coverage
// column, rows of the in_proj keys stacked in layout order, each piece at its own global offset.
constexpr double kPanelColumn = 150, kCoverColumn = 46, kPanelGap = 60, kAxisLeft = 150;

struct Panel {
  double left = 0;
  std::string title;
  std::string group;  // the SVG group's class: reference-panel or target-panel
};

/// Where each key's rows start on the stacked axis (layout order; keys the layout lacks go last).
std::map<std::string, std::int64_t> key_starts(const LayoutReport& reference,
                                               const std::map<std::string, std::int64_t>& rows, std::int64_t& total) {
  std::map<std::string, std::int64_t> starts;
  total = 0;
  for (const std::string& name : reference.layout.names) {
    const std::string key = reference.params.key + "." + name;
    if (const auto n = rows.find(key); n != rows.end()) starts[key] = total, total += n->second;
  }
  for (const auto& [key, n] : rows)
    if (!starts.count(key)) starts[key] = total, total += n;
  return starts;
}

void draw_panel(Canvas& c, const Panel& panel, const LayoutReport& r, const std::vector<CoverageGap>& gaps,
                const std::map<std::string, std::int64_t>& starts) {
  const double cover_x = panel.left + static_cast<double>(r.params.tp) * kPanelColumn;
  c.svg << "<g class='" << panel.group << "'>\n";
  c.text(panel.left, kTop - 28, panel.title, "font-size='13' font-weight='bold'");
  for (std::int64_t t = 0; t < r.params.tp; ++t)
    c.text(panel.left + static_cast<double>(t) * kPanelColumn, kTop - 10, "TP rank " + std::to_string(t),
           "font-size='11'");
  c.text(cover_x, kTop - 10, "cover", "font-size='11'");
  for (const ReportPiece& p : r.pieces) {
    if (!p.main_replica || p.global_offset.empty() || p.local_shape.empty()) continue;
    const auto start = starts.find(p.key);
    if (start == starts.end()) continue;
    const double x0 = panel.left + static_cast<double>(p.tp_rank) * kPanelColumn, h = p.local_shape[0] * c.scale;
    const double y0 = c.y(start->second + p.global_offset[0]);
    c.rect(x0 + 2, y0, kPanelColumn - 4, h, colour(p.tp_rank * r.params.gtp + p.gtp_rank),
           "stroke='#333' stroke-width='0.5' fill-opacity='0.8'");
    if (h >= kMinLabelPx)
      c.text(x0 + 5, y0 + std::min(h, 24.0) / 2 + 4,
             "(" + std::to_string(p.tp_rank) + "," + std::to_string(p.gtp_rank) + ") " +
                 std::to_string(p.local_shape[0]) + " @" + std::to_string(p.global_offset[0]),
             "font-size='10'");
  }
  for (const CoverageGap& gap : gaps) {
    const auto start = starts.find(gap.key);
    if (start == starts.end()) continue;
    const bool hole = gap.covered_by == 0;
    const double y0 = c.y(start->second + gap.begin), h = (gap.end - gap.begin) * c.scale;
    const std::string cls = hole ? "hole" : "overlap", fill = hole ? "#d00" : "#f80";
    // Across the rank columns (translucent) and solid in the coverage column.
    c.rect(panel.left, y0, cover_x - panel.left, h, fill, "class='" + cls + "-band' fill-opacity='0.25'");
    c.rect(cover_x + 2, y0, kCoverColumn - 4, h, fill,
           "class='" + cls + "' data-key='" + escape(gap.key) + "' data-rows='" + std::to_string(gap.begin) + "-" +
               std::to_string(gap.end) + "'");
    if (h >= kMinLabelPx)
      c.text(cover_x + 4, y0 + std::min(h, 24.0) / 2 + 4, hole ? "hole" : "x" + std::to_string(gap.covered_by),
             "font-size='10'");
  }
  c.svg << "</g>\n";
}

std::string gap_text(const CoverageGap& gap) {
  return (gap.covered_by == 0 ? "hole: " : "overlap: ") + gap.key + " rows " + std::to_string(gap.begin) + "-" +
         std::to_string(gap.end - 1) +
         (gap.covered_by == 0 ? " (no rank saves them)" : " (saved by " + std::to_string(gap.covered_by) + " ranks)");
}

}  // namespace

std::string layout_comparison_svg(const LayoutReport& reference, const Result<LayoutReport>& target,
                                  const std::string& target_name) {
  const auto rows = key_rows(reference);
  std::int64_t total = 0;
  const auto starts = key_starts(reference, rows, total);
  const std::vector<CoverageGap> reference_gaps = coverage_gaps(reference, rows);
  const std::vector<CoverageGap> target_gaps = target.ok() ? coverage_gaps(*target, rows) : std::vector<CoverageGap>{};
  Canvas c;
  c.scale = kPlotHeight / static_cast<double>(std::max<std::int64_t>(total, 1));
  const double panel_width = static_cast<double>(reference.params.tp) * kPanelColumn + kCoverColumn;
  const Panel left{kAxisLeft, "reference (expected)", "reference-panel"},
      right{kAxisLeft + panel_width + kPanelGap, "target: " + target_name, "target-panel"};
  const std::size_t listed = std::min<std::size_t>(target_gaps.size(), 12);
  const double width = right.left + panel_width + 20,
               height = kTop + kPlotHeight + 95 + 15 * static_cast<double>(listed);
  c.svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
        << "' font-family='monospace'>\n";
  c.rect(0, 0, width, height, "white");
  const LayoutParams& p = reference.params;
  c.text(8, 18,
         p.key + ": D=" + std::to_string(reference.padding.rows) + " T=" + std::to_string(p.tp) +
             " G=" + std::to_string(p.gtp) + " p=" + std::to_string(p.pad_align) +
             " design=" + (p.gtp == 1 ? "non-GTP" : to_string(p.design)) + "; each piece at its global offset",
         "font-size='13'");
  for (const auto& [key, first] : starts) {  // key (chunk) boundaries across both panels
    c.line(8, c.y(first), width - 20, c.y(first), "stroke='#555' stroke-dasharray='4,3'");
    if (rows.at(key) * c.scale >= kMinLabelPx || first == 0)
      c.text(8, c.y(first) + 11, key.substr(std::min(key.size(), p.key.size() + 1)), "font-size='11'");
  }
  c.line(8, c.y(total), width - 20, c.y(total), "stroke='#000'");
  draw_panel(c, left, reference, reference_gaps, starts);
  if (target.ok()) {
    draw_panel(c, right, *target, target_gaps, starts);
  } else {
    c.svg << "<g class='" << right.group << "'>\n";
    c.text(right.left, kTop + 20, "the target gave no answer: " + target.error().message, "font-size='12' fill='#d00'");
    c.svg << "</g>\n";
  }
  const double legend = kTop + kPlotHeight + 25;
  c.text(8, legend,
         "colour = saving rank (t, g); red = hole (rows no rank saves); orange = overlap (rows two or more ranks save)",
         "font-size='11'");
  const auto holes =
      std::count_if(target_gaps.begin(), target_gaps.end(), [](const CoverageGap& g) { return g.covered_by == 0; });
  c.text(8, legend + 16,
         "target: " + (target.ok()
                           ? std::to_string(holes) + " hole(s), " +
                                 std::to_string(static_cast<std::int64_t>(target_gaps.size()) - holes) + " overlap(s)"
                           : std::string("no answer")),
         "font-size='11' font-weight='bold'");
  for (std::size_t i = 0; i < listed; ++i)
    c.text(8, legend + 32 + 15 * static_cast<double>(i), gap_text(target_gaps[i]), "font-size='11'");
  if (target_gaps.size() > listed)
    c.text(8, legend + 32 + 15 * static_cast<double>(listed),
           "... and " + std::to_string(target_gaps.size() - listed) + " more (all marked above)", "font-size='11'");
  c.svg << "</svg>\n";
  return c.svg.str();
}

std::string layout_report_svg(const LayoutReport& r) {
  Canvas c;
  const std::int64_t total_rows = r.params.gtp == 1 ? r.padding.rows : r.padding.padded_rows;
  c.scale = kPlotHeight / static_cast<double>(std::max<std::int64_t>(total_rows, 1));
  const double width = c.x(r.params.tp) + 20, height = kTop + kPlotHeight + 70;
  c.svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
        << "' font-family='monospace'>\n<defs><pattern id='pad' width='6' height='6' patternUnits='userSpaceOnUse'>"
           "<rect width='6' height='6' fill='#eee'/><path d='M0,6 L6,0' stroke='#aaa'/></pattern></defs>\n";
  c.rect(0, 0, width, height, "white");
  c.text(8, 20,
         r.params.key + ": D=" + std::to_string(r.padding.rows) + " T=" + std::to_string(r.params.tp) +
             " G=" + std::to_string(r.params.gtp) + " p=" + std::to_string(r.params.pad_align) +
             " R=" + std::to_string(r.padding.shard_rows) + " pad=" + std::to_string(r.padding.pad) +
             " design=" + (r.params.gtp == 1 ? "non-GTP" : to_string(r.params.design)),
         "font-size='13'");
  draw_axis(c, r, total_rows);
  for (std::int64_t t = 0; t < r.params.tp; ++t) draw_column(c, r, t);
  const double legend = kTop + kPlotHeight + 25;
  c.text(8, legend, "dashed: chunk (section) starts; solid: GTP shard boundaries; hatched: pad rows (never saved);",
         "font-size='11'");
  c.text(8, legend + 16,
         std::string("colour = saving rank (t, g); integrity: ") +
             (r.integrity.ok() ? "ok" : std::to_string(r.integrity.problems.size()) + " problems"),
         "font-size='11'");
  c.svg << "</svg>\n";
  return c.svg.str();
}

}  // namespace ih::report
