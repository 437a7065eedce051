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

}  // namespace

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
