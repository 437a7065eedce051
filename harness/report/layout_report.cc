#include "harness/report/layout_report.h"

#include <algorithm>
#include <sstream>

#include "models/split_factory.h"
#include "models/text.h"

namespace ih::report {
namespace {

Result<SplitLayout> layout_of(const LayoutParams& p) {
  if (p.family == MixerFamily::mamba)
    return mamba_in_proj_layout({p.d_inner_local, p.group_state_local, p.nheads_local});
  return gdp_in_proj_layout({p.d_inner_local, p.group_state_local, p.nheads_local, p.householder});
}

GtpFactoryParams factory_params(const LayoutReport& r, std::int64_t t, std::int64_t g) {
  GtpFactoryParams f;
  f.key = r.params.key;
  f.layout = r.layout;
  f.tp_size = r.params.tp, f.tp_rank = t, f.gtp_size = r.params.gtp, f.gtp_rank = g;
  f.pad_alignment = r.params.pad_align, f.cols = r.params.cols;
  // DP = 1: the gathered tensor's GTP-inclusive dp_cp rank is g; the shard's replicate rank is 0.
  f.replica_id = ReplicaId::tuple({0, 0, r.params.design == GtpSaveDesign::gather ? g : 0});
  f.shard = TensorValue::of_storage(1, {r.padding.shard_rows, r.params.cols}, "bfloat16");
  f.gather_storage = 2;
  return f;
}

// The entries one (t, g) saves: from `source`'s GTP factory at every G (as the GTP checks build
// them) when given, else the model's GTP factories for G > 1 and the plain split factory for G = 1.
Result<StateNode> build_rank(const LayoutReport& r, std::int64_t t, std::int64_t g, Implementation* source) {
  if (source) return source->gtp_pieces(r.params.design, factory_params(r, t, g));
  if (r.params.gtp == 1) {
    IH_TRY_ASSIGN(orig, tp_row_sharded(r.params.key, r.padding.rows, r.params.cols, r.params.tp, t, {},
                                       TensorValue::of_storage(1, {r.padding.rows, r.params.cols}, "bfloat16")));
    IH_TRY_ASSIGN(factory, make_split_factory(orig, r.layout));
    return factory.build();
  }
  IH_TRY_ASSIGN(factory, make_gtp_factory(r.params.design, factory_params(r, t, g)));
  return factory.build();
}

void add_pieces(LayoutReport& r, std::int64_t t, std::int64_t g, const StateNode& built) {
  const bool in_shard = r.params.gtp > 1 && r.params.design == GtpSaveDesign::shard_split;
  visit_leaves(built, [&](const std::string&, const Leaf& leaf) {
    const auto* st = std::get_if<ShardedTensor>(&leaf);
    if (!st) return;  // the all-padding LNP saves nothing
    const std::int64_t first = st->data && !st->data->blocks.empty() ? st->data->blocks.front().first_row : 0;
    r.pieces.push_back({t, g, st->key, st->global_shape, st->global_offset, st->local_shape, first,
                        in_shard ? g * r.padding.shard_rows + first : first, st->is_main_replica()});
  });
}

Result<LayoutReport> build_report(const LayoutParams& params, Implementation* source) {
  LayoutReport r{params, {}, {}, {}, {}, {}};
  IH_TRY_ASSIGN(layout, layout_of(params));
  r.layout = std::move(layout);
  IH_TRY_STATUS(require_positive(params.tp, "--tp"));
  IH_TRY_STATUS(require_positive(params.gtp, "--gtp"));
  IH_TRY_STATUS(require_positive(params.cols, "--cols"));
  IH_TRY_ASSIGN(rows, r.layout.total_rows());
  const bool split_factory = params.gtp == 1 && !source;  // the non-GTP factory ignores p
  IH_TRY_ASSIGN(padding, split_factory ? gtp_padding(rows, 1, 0) : gtp_padding(rows, params.gtp, params.pad_align));
  r.padding = padding;
  GlobalMetadata meta;
  for (std::int64_t t = 0; t < params.tp; ++t)
    for (std::int64_t g = 0; g < params.gtp; ++g) {
      if (r.padding.all_padding(g)) r.padding_only_ranks.emplace_back(t, g);
      IH_TRY_ASSIGN(built, build_rank(r, t, g, source));
      add_pieces(r, t, g, built);
      meta.add_tree(t * params.gtp + g, built);
    }
  r.integrity = check_integrity(meta);
  return r;
}

}  // namespace

Result<LayoutReport> build_layout_report(const LayoutParams& params) { return build_report(params, nullptr); }

Result<LayoutReport> build_layout_report(const LayoutParams& params, Implementation& source) {
  return build_report(params, &source);
}

std::map<std::string, std::int64_t> key_rows(const LayoutReport& report) {
  std::map<std::string, std::int64_t> rows;
  for (const ReportPiece& p : report.pieces)
    if (p.main_replica && !p.global_shape.empty()) rows.emplace(p.key, p.global_shape[0]);
  return rows;
}

std::vector<CoverageGap> coverage_gaps(const LayoutReport& report, const std::map<std::string, std::int64_t>& rows) {
  std::map<std::string, std::map<std::int64_t, int>> steps;  // key -> row -> change of the cover count
  for (const auto& [key, n] : rows) steps[key][0] += 0, steps[key][n] += 0;
  for (const ReportPiece& p : report.pieces) {
    if (!p.main_replica || p.global_offset.empty() || p.local_shape.empty()) continue;
    steps[p.key][p.global_offset[0]] += 1;
    steps[p.key][p.global_offset[0] + p.local_shape[0]] -= 1;
  }
  std::vector<CoverageGap> gaps;
  for (const auto& [key, changes] : steps) {
    const auto known = rows.find(key);
    const std::int64_t end = known != rows.end() ? known->second : changes.rbegin()->first;
    int covered = 0;
    for (auto it = changes.begin(); it != changes.end(); ++it) {
      covered += it->second;
      const auto next = std::next(it);
      if (next == changes.end()) break;
      const std::int64_t from = std::max<std::int64_t>(it->first, 0), to = std::min(next->first, end);
      if (from >= to || covered == 1) continue;
      if (!gaps.empty() && gaps.back().key == key && gaps.back().end == from && gaps.back().covered_by == covered)
        gaps.back().end = to;
      else
        gaps.push_back({key, from, to, covered});
    }
  }
  return gaps;
}

nlohmann::json layout_report_json(const LayoutReport& r) {
  nlohmann::json pieces = nlohmann::json::array(), padding_only = nlohmann::json::array(),
                 problems = nlohmann::json::array();
  for (const auto& [t, g] : r.padding_only_ranks) padding_only.push_back({t, g});
  for (const ReportPiece& p : r.pieces)
    pieces.push_back({{"tp_rank", p.tp_rank},
                      {"gtp_rank", p.gtp_rank},
                      {"key", p.key},
                      {"global_shape", p.global_shape},
                      {"global_offset", p.global_offset},
                      {"local_shape", p.local_shape},
                      {"shard_row_offset", p.shard_row_offset},
                      {"main_replica", p.main_replica}});
  for (const IntegrityProblem& p : r.integrity.problems) problems.push_back(p.message);
  return {{"pad_align", r.params.pad_align},
          {"pad_align_used", r.params.gtp > 1},
          {"shard_rows", r.padding.shard_rows},
          {"pad_rows", r.padding.pad},
          {"padding_only_ranks", padding_only},
          {"pieces", pieces},
          {"integrity", {{"ok", r.integrity.ok()}, {"problems", problems}}}};
}

std::string layout_report_text(const LayoutReport& r) {
  std::ostringstream out;
  const GtpPadding& p = r.padding;
  // p as given: with G = 1 the non-GTP split factory ignores it, and the table says so.
  out << "D = " << p.rows << ", T = " << r.params.tp << ", G = " << p.gtp_size << ", p = " << r.params.pad_align
      << (r.params.gtp == 1 && r.params.pad_align != 0 ? " (not used with G = 1)" : "") << ": A = " << p.align_block
      << ", pad = " << p.pad << ", D' = " << p.padded_rows << ", R = " << p.shard_rows
      << ", design = " << (r.params.gtp == 1 ? "non-GTP split" : to_string(r.params.design)) << "\n";
  out << "sections:";
  const auto starts = r.layout.starts();
  for (std::size_t j = 0; j < starts.size(); ++j)
    out << " " << r.layout.names[j] << " " << starts[j] << "-" << starts[j] + r.layout.sections[j] - 1;
  out << "\n(t, g)   | real | pad | pieces (`@n` = global row offset; * = not a main replica)\n";
  std::size_t i = 0;
  for (std::int64_t t = 0; t < r.params.tp; ++t)
    for (std::int64_t g = 0; g < r.params.gtp; ++g) {
      const std::int64_t real = r.params.gtp == 1 ? p.rows : p.real_rows(g);
      out << "(" << t << ", " << g << ")   | " << real << " | " << (r.params.gtp == 1 ? 0 : p.shard_rows - real)
          << " | ";
      std::string line;
      for (; i < r.pieces.size() && r.pieces[i].tp_rank == t && r.pieces[i].gtp_rank == g; ++i) {
        const ReportPiece& piece = r.pieces[i];
        line += (line.empty() ? "" : "; ") + piece.key.substr(r.params.key.size() + 1) + " " +
                std::to_string(piece.local_shape[0]) + " @" + std::to_string(piece.global_offset[0]) +
                (piece.main_replica ? "" : "*");
      }
      out << (line.empty() ? "all padding: one LNP, nothing saved" : line) << "\n";
    }
  out << "integrity: " << (r.integrity.ok() ? "ok" : "FAILED") << "\n";
  for (const IntegrityProblem& problem : r.integrity.problems) out << "  " << problem.message << "\n";
  return out.str();
}

}  // namespace ih::report
