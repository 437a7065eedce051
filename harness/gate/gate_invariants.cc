// The gate's checks of spec invariants Megatron is known to break (docs/megatron-findings.md) and of the
// gather-design GTP save path, one body each for every target. Each asks a scenario operation of the
// seam (seam/scenarios.h) and judges its typed answer against what the spec wants, never against what a
// model of Megatron predicts: the reference (and its mutants) answer from the model, Megatron by running
// its own code in gloo worlds. A failure is a list of typed violations; a known finding
// (corpus/findings/*.finding) is matched on their kinds and keys.
#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "codec/json_codec.h"
#include "codec/json_scenarios.h"
#include "harness/gate/gate.h"
#include "models/gpt_layer_maps.h"
#include "seam/reference_implementation.h"

namespace ih::gate {
namespace {

constexpr const char* kInvariants = "spec invariants";
constexpr const char* kGather = "gtp-gather";
constexpr std::int64_t kCols = 2;

const std::vector<std::string> kGdpNames = {"z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"};
/// The findings' GDP in_proj: D = 120 rows at TP 1 (d_inner 20, group state 6, heads 4, M = 3).
SplitLayout gdp_review() { return {{20, 20, 20, 20, 6, 6, 6, 6, 4, 4, 4, 4}, kGdpNames}; }
/// D = 24 at TP 1: fewer rows than p * G (all-padding ranks at GTP 4, p 16).
SplitLayout gdp_small() { return {std::vector<std::int64_t>(12, 2), kGdpNames}; }

std::int64_t rows_of(const SplitLayout& layout) {
  std::int64_t d = 0;
  for (std::int64_t s : layout.sections) d += s;
  return d;
}

std::string show(const GtpSide& s) {
  return "{tp " + std::to_string(s.tp) + ", gtp " + std::to_string(s.gtp) + ", p " + std::to_string(s.pad) + "}";
}
std::string show(const OptimizerResumeCase& c) {
  return std::string(to_string(c.module)) + " save " + show(c.save) + " -> load " + show(c.load) +
         " (D = " + std::to_string(rows_of(c.in_proj)) + ")";
}
/// "<kind>: <message>" where the target typed its error, else its message.
std::string show(const Refusal& r) { return (r.kind ? std::string(to_string(*r.kind)) + ": " : "") + r.message; }
/// A violation kind with the refusal's error kind where the target typed it ("load_refused/global_shape_mismatch").
std::string refusal_kind(const std::string& kind, const Refusal& r) {
  return r.kind ? kind + "/" + std::string(to_string(*r.kind)) : kind;
}
std::string show(const std::optional<Shape>& shape) { return shape ? json::dump(json::Json(*shape)) : "null"; }

// --- R1, R2: optimizer state across a GTP change -------------------------------------------------

/// The loaded rows of one tensor that are not where the spec puts them.
struct Misplaced {
  std::string tensor;
  std::int64_t count = 0;
  std::string first;  // the first one, spelt out
};

std::string show(const LoadedRow& row) {
  if (!row.stray.empty()) return "a value no saved row held (" + row.stray + ")";
  return row.saved
             ? "the saved row " + std::to_string(row.saved->row) + " of TP rank " + std::to_string(row.saved->tp_rank)
             : "zeros";
}

/// Every loaded row against the row the spec puts there: TP-local row x of a load rank at TP T2 is the
/// weight's row that TP T1's split puts on some save rank (row_at_tp_size, spec 4.2), the same values
/// (spec 4.7 invariant 6); a row past the real rows is padding, zero.
Result<std::vector<Misplaced>> misplaced_rows(const OptimizerResumeCase& c, const OptimizerResumeAnswer& answer) {
  const std::vector<std::int64_t> sections =
      c.module == ResumeModule::linear ? std::vector<std::int64_t>{rows_of(c.in_proj)} : c.in_proj.sections;
  std::vector<Misplaced> out;
  for (const ResumedRank& rank : answer.ranks) {
    if (rank.tp_rank < 0 || rank.tp_rank >= c.load.tp || rank.first_row < 0)
      return make_error(seam_kind::harness_error, "the answer names TP rank " + std::to_string(rank.tp_rank) +
                                                      " (first row " + std::to_string(rank.first_row) +
                                                      "), which the load world does not have");
    for (const LoadedRows& tensor : rank.tensors) {
      auto m = std::find_if(out.begin(), out.end(), [&](const Misplaced& x) { return x.tensor == tensor.tensor; });
      if (m == out.end()) m = out.insert(out.end(), Misplaced{tensor.tensor, 0, ""});
      for (std::size_t j = 0; j < tensor.rows.size(); ++j) {
        const std::int64_t x = rank.first_row + static_cast<std::int64_t>(j);
        IH_TRY_ASSIGN(want, row_at_tp_size(sections, c.load.tp, TpRow{rank.tp_rank, x}, c.save.tp));
        const LoadedRow expected{want, ""};
        if (tensor.rows[j] == expected) continue;
        if (m->count++ == 0)
          m->first = "rank (t=" + std::to_string(rank.tp_rank) + ", g=" + std::to_string(rank.gtp_rank) + ") row " +
                     std::to_string(j) + " (TP-local row " + std::to_string(x) + ") holds " + show(tensor.rows[j]) +
                     ", expected " + show(expected);
      }
    }
  }
  std::erase_if(out, [](const Misplaced& m) { return m.count == 0; });
  return out;
}

/// Resuming at another layout must load what was saved: the load asks for the exp_avg keys the save
/// wrote (spec 2.6: they are the model entries' keys, which spec 4.7 invariant 1 keeps those of a
/// non-GTP run), and every real row comes back where it belongs, pad rows zero (spec 4.7 invariant 6).
Result<Violations> resume_check(Implementation& target, const std::vector<OptimizerResumeCase>& cases) {
  Violations out;
  for (const OptimizerResumeCase& c : cases) {
    IH_TRY_ASSIGN(answer, target.optimizer_resume(c));
    const std::string where = show(c) + ": ";
    if (answer.saved_keys != answer.requested_keys) {
      std::vector<std::string> unsaved;
      std::set_difference(answer.requested_keys.begin(), answer.requested_keys.end(), answer.saved_keys.begin(),
                          answer.saved_keys.end(), std::back_inserter(unsaved));
      out.push_back({"optimizer_key_mismatch", compact_keys(unsaved.empty() ? answer.requested_keys : unsaved),
                     where + "the load asks for exp_avg " + compact_keys(answer.requested_keys) + ", the save wrote " +
                         compact_keys(answer.saved_keys) +
                         (answer.refused ? "; " + answer.refused->step + " was refused: " + show(*answer.refused)
                                         : std::string())});
      continue;
    }
    if (answer.refused) {
      out.push_back({refusal_kind("load_refused", *answer.refused), answer.key,
                     where + answer.refused->step + " was refused: " + show(*answer.refused)});
      continue;
    }
    IH_TRY_ASSIGN(misplaced, misplaced_rows(c, answer));
    for (const Misplaced& m : misplaced)
      out.push_back({"rows_misplaced", m.tensor,
                     where + std::to_string(m.count) + " loaded " + m.tensor +
                         " rows are not the saved ones (first: " + m.first + ")"});
    if (!answer.unexplained.empty()) out.push_back({"round_trip_broken", answer.key, where + answer.unexplained});
  }
  return out;
}

// --- B: a fresh in_proj under GTP in GPT->Hybrid retargeting ------------------------------------

/// The mixer's in_proj under GTP 2, retargeted with its layer fresh: the value a load hands back must
/// be a local object that fits the (R, C) parameter, and the model must take it (Megatron: a real
/// HybridModel's load_state_dict for Mamba, a copy into the stand-in GDP mixer's parameter).
Result<Violations> fresh_check(Implementation& target) {
  Violations out;
  for (const FreshRetargetCase& c : {FreshRetargetCase{"gdp", {{10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2}, kGdpNames}},
                                     FreshRetargetCase{"mamba", {{4, 4, 2, 2, 1}, {"z", "x", "B", "C", "dt"}}}}) {
    IH_TRY_ASSIGN(answer, target.fresh_retarget(c));
    for (const FreshRetargetRank& r : answer.ranks) {
      const std::string where = c.mixer + " '" + c.pattern + "' tp " + std::to_string(c.tp) + " gtp " +
                                std::to_string(c.gtp) + " p " + std::to_string(c.pad) + " rank " + r.rank + ": ";
      if (r.entry_type != kLocalObjectType) {
        out.push_back({"fresh_not_local", c.mixer,
                       where + "the fresh layer's in_proj became a " + r.entry_type + ", not a local object"});
      } else if (!r.copy_error.empty() || (r.loaded_shape && r.param_shape && *r.loaded_shape != *r.param_shape)) {
        out.push_back({"fresh_value_shape", c.mixer + " " + show(r.loaded_shape) + "->" + show(r.param_shape),
                       where + "a load hands the fresh in_proj back as " + show(r.loaded_shape) +
                           " for the parameter of shape " + show(r.param_shape) +
                           (r.copy_error.empty() ? "" : ": " + r.copy_error)});
      }
    }
  }
  return out;
}

// --- C: the two load orderings with all-padding GTP ranks ---------------------------------------

/// serialization.load and to_state_dict of one tree per rank whose in_proj factory builds a real piece,
/// or one LocalNonpersistentObject on an all-padding rank (D = 6, GTP 4, R = 16: ranks 1-3 hold only
/// padding): both orders must load and agree.
Result<Violations> orders_check(Implementation& target) {
  const AllPaddingCase c;
  IH_TRY_ASSIGN(answer, target.load_orderings(c));
  Violations out;
  for (std::size_t g = 0; g < answer.ranks.size(); ++g) {
    const OrderingsRank& rank = answer.ranks[g];
    const std::string where = "D " + std::to_string(c.rows) + " gtp " + std::to_string(c.gtp) + " R " +
                              std::to_string(c.shard_rows) + " rank g=" + std::to_string(g) + ": ";
    for (const auto* x : {&rank.serialization_load, &rank.to_state_dict}) {
      if (x->refused)
        out.push_back({refusal_kind("order_failed", *x->refused), x->refused->step,
                       where + x->refused->step + " failed: " + show(*x->refused)});
      if (!x->malformed.empty())
        out.push_back({"loaded_malformed", "in_proj", where + "the loaded in_proj.weight has " + x->malformed});
    }
    const OrderedLoad &a = rank.serialization_load, &b = rank.to_state_dict;
    if (!a.refused && !b.refused && (a.rows != b.rows || a.keys != b.keys))
      out.push_back({"orders_disagree", "in_proj",
                     where + "the orderings disagree: serialization.load rows " + json::rows_text(a.rows) + " keys " +
                         json::dump(json::Json(a.keys)) + ", to_state_dict rows " + json::rows_text(b.rows) + " keys " +
                         json::dump(json::Json(b.keys))});
  }
  return out;
}

// --- A: one expert -------------------------------------------------------------------------------

/// A GPT save of the expert _extra_state objects (E = 1 and E = 2), the hybrid request retargeted:
/// every hybrid MoE layer must load its GPT layer's objects (both expert linears' of every expert;
/// Megatron: real models, each object named `<its hybrid key>#<expert>`).
Result<Violations> experts_check(Implementation& target) {
  Violations out;
  for (std::int64_t experts : {1, 2}) {
    const SingleExpertCase c{"*E*E", experts};
    IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.pattern)));
    IH_TRY_ASSIGN(answer, target.single_expert_load(c));
    const std::string where = "'" + c.pattern + "' E = " + std::to_string(experts) + ": ";
    const std::string case_key = "experts=" + std::to_string(experts);
    if (answer.refused) {
      out.push_back({refusal_kind("load_refused", *answer.refused), case_key,
                     where + answer.refused->step + " failed: " + show(*answer.refused)});
      continue;
    }
    if (!answer.loads_objects) {
      for (const ExpertObject& o : answer.objects)
        if (!o.written)
          out.push_back({"object_not_written", o.asked,
                         where + o.key + " asks for " + o.asked + ", which the GPT save did not write"});
      continue;
    }
    std::map<std::string, const ExpertObject*> loaded;
    for (const ExpertObject& o : answer.objects) loaded[o.key] = &o;
    for (const auto& [hybrid, gpt] : maps.mlp_to_gpt)
      for (const char* linear : {"linear_fc1", "linear_fc2"})
        for (std::int64_t e = 0; e < experts; ++e) {
          const std::string key = "decoder.layers." + std::to_string(hybrid) + ".mlp.experts.experts." + linear +
                                  "._extra_state#" + std::to_string(e);
          const auto found = loaded.find(key);
          const std::optional<std::array<std::int64_t, 2>> want = std::array<std::int64_t, 2>{gpt, e};
          if (found != loaded.end() && found->second->loaded == want) continue;
          const std::string got = found == loaded.end() ? "nothing"
                                  : found->second->loaded
                                      ? "GPT layer " + std::to_string((*found->second->loaded)[0]) + "'s expert " +
                                            std::to_string((*found->second->loaded)[1])
                                      : "another object";
          out.push_back({"object_misloaded", key,
                         where + key + " loaded " + got + ", expected GPT layer " + std::to_string(gpt) + "'s expert " +
                             std::to_string(e)});
        }
  }
  return out;
}

// --- gtp-gather: the gather design's pieces, merge and parameter entry against the reference -----

struct GatherCase {
  std::string name;
  SplitLayout layout;
  std::int64_t tp = 1, gtp = 1, pad = 0, cols = 2;
};

SplitLayout gdp_layout(std::int64_t d_inner, std::int64_t group_state, std::int64_t nheads, std::int64_t m) {
  SplitLayout out;
  out.sections.push_back(d_inner), out.names.push_back("z");
  for (std::int64_t i = 0; i < m; ++i) out.sections.push_back(d_inner), out.names.push_back("V" + std::to_string(i));
  for (std::int64_t i = 0; i < m; ++i)
    out.sections.push_back(group_state), out.names.push_back("K" + std::to_string(i));
  out.sections.push_back(group_state), out.names.push_back("Q");
  for (std::int64_t i = 0; i < m; ++i) out.sections.push_back(nheads), out.names.push_back("b" + std::to_string(i));
  out.sections.push_back(nheads), out.names.push_back("a");
  return out;
}

/// Review layout (D = 60) at TP2 x GTP2 with p = 16; the same at GTP4 with p = 32 (ranks 2 and 3
/// hold only padding, rows < p*G); no padding (p = 0, D divisible). GTP size 1 is left out: Megatron
/// does not wrap parameters for a one-rank GTP group (no padding, no gather) while the reference
/// pads (docs/megatron-findings.md, finding G1).
std::vector<GatherCase> gather_cases() {
  return {{"review_tp2_g2_p16", gdp_layout(10, 3, 2, 3), 2, 2, 16, 2},
          {"review_tp1_g4_p32_all_padding", gdp_layout(10, 3, 2, 3), 1, 4, 32, 2},
          {"small_tp2_g2_p0", gdp_layout(4, 2, 1, 1), 2, 2, 0, 3}};
}

GtpFactoryParams params_of(const GatherCase& c, std::int64_t t, std::int64_t g) {
  GtpFactoryParams p;
  p.key = "decoder.layers.0.mixer.in_proj.weight";
  p.layout = c.layout;
  p.tp_size = c.tp, p.tp_rank = t, p.gtp_size = c.gtp, p.gtp_rank = g;
  p.pad_alignment = c.pad, p.cols = c.cols, p.dtype = "bfloat16";
  p.replica_id = ReplicaId::tuple({0, 0, g});  // gather: the GTP-inclusive dp_cp rank (DP = 1)
  const auto padding = gtp_padding_of(p);
  const std::int64_t rows = padding.ok() ? padding->shard_rows : 0;
  p.shard = TensorValue::of_storage(1 + static_cast<std::uint64_t>(t * c.gtp + g), {rows, c.cols}, p.dtype);
  p.gather_storage = (std::uint64_t{1} << 32) + static_cast<std::uint64_t>(t);
  return p;
}

std::string where(const GatherCase& c, std::int64_t t, std::int64_t g) {
  return c.name + " rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + ")";
}

template <class T>
std::string show_answer(const Result<T>& r) {
  if (!r.ok()) return "error " + std::string(to_string(r.error().kind)) + ": " + r.error().message;
  if constexpr (std::is_same_v<T, StateNode>) {
    std::string out;
    visit_leaves(*r, [&](const std::string& path, const Leaf& leaf) {
      out += path + "=" + json::dump(json::leaf_to_json(leaf)) + " ";
    });
    return out;
  } else if constexpr (std::is_same_v<T, TensorValue>) {
    return json::dump(json::leaf_to_json(Leaf(LocalNonpersistent{Payload(*r)}))["value"]);
  } else {
    return json::dump(json::leaf_to_json(Leaf(*r)));
  }
}

/// Every rank of every gather case: the target's answer to `ask` shows as the reference's does.
template <class Ask>
Result<std::string> against_reference(const std::string& what, Ask ask) {
  ReferenceImplementation reference;
  for (const GatherCase& c : gather_cases())
    for (std::int64_t t = 0; t < c.tp; ++t)
      for (std::int64_t g = 0; g < c.gtp; ++g) {
        IH_TRY_ASSIGN(asked, ask(reference, params_of(c, t, g)));
        const auto& [want, got] = asked;
        if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
        const std::string want_text = show_answer(want), got_text = show_answer(got);
        if (got_text != want_text)
          return where(c, t, g) + what + "\n      reference: " + want_text + "\n      target:    " + got_text;
      }
  return std::string();
}

/// Every rank: the target's build equals the reference's (keys, boxes, replica ids, data views).
Result<std::string> check_pieces(Implementation& target) {
  return against_reference("", [&](Implementation& reference, const GtpFactoryParams& p) {
    return Result<std::pair<Result<StateNode>, Result<StateNode>>>(
        std::make_pair(reference.gtp_pieces(GtpSaveDesign::gather, p), target.gtp_pieces(GtpSaveDesign::gather, p)));
  });
}

/// Every rank: merging the pieces' data back gives the reference's (R, C) shard: the rank's real
/// rows of the gathered tensor, then zero pad rows.
Result<std::string> check_merge(Implementation& target) {
  return against_reference(" merge",
                           [&](Implementation& reference,
                               GtpFactoryParams p) -> Result<std::pair<Result<TensorValue>, Result<TensorValue>>> {
                             IH_TRY_ASSIGN(built, reference.gtp_pieces(GtpSaveDesign::gather, p));
                             StateList loaded;
                             visit_leaves(built, [&](const std::string&, const Leaf& leaf) {
                               if (const auto* st = std::get_if<ShardedTensor>(&leaf); st && st->data)
                                 loaded.emplace_back(*st->data);
                             });
                             p.shard.reset();  // load preprocessing strips the factory's data
                             return std::make_pair(reference.gtp_merge(GtpSaveDesign::gather, p, StateNode(loaded)),
                                                   target.gtp_merge(GtpSaveDesign::gather, p, StateNode(loaded)));
                           });
}

/// Every rank: the GTP parameter's own entry (composite offset t*G + g, padded global shape,
/// allow_shape_mismatch with padding, the writer elected over the GTP-excluded DP group: (0, 0, 0)
/// at DP = 1, a view of the shard).
Result<std::string> check_param_entry(Implementation& target) {
  return against_reference(" parameter entry", [&](Implementation& reference, GtpFactoryParams p) {
    p.replica_id = ReplicaId::tuple({0, 0, 0});
    return Result<std::pair<Result<ShardedTensor>, Result<ShardedTensor>>>(
        std::make_pair(reference.gtp_param_entry(p), target.gtp_param_entry(p)));
  });
}

/// serialization.load with all-padding GTP ranks whose factory built one LNP (spec 3.8, 4.7): every
/// rank gets its real rows then zeros, the LNP's key and the common part back.
Result<std::string> check_all_padding_load(Implementation& target) {
  const AllPaddingCase c;  // D 6, GTP 4, R 16: ranks 1-3 hold only padding
  IH_TRY_ASSIGN(answer, target.all_padding_load(c));
  if (static_cast<std::int64_t>(answer.ranks.size()) != c.gtp)
    return "expected " + std::to_string(c.gtp) + " ranks, got " + std::to_string(answer.ranks.size());
  for (std::int64_t g = 0; g < c.gtp; ++g) {
    const OrderedLoad& r = answer.ranks[static_cast<std::size_t>(g)];
    const std::string rank = "GTP rank " + std::to_string(g) + ": ";
    if (r.refused) return rank + "serialization.load failed: " + show(*r.refused);
    if (!r.malformed.empty()) return rank + "the loaded in_proj.weight has " + r.malformed;
    std::vector<std::optional<std::array<std::int64_t, 2>>> want;
    for (std::int64_t j = 0; j < c.shard_rows; ++j)
      want.push_back(g == 0 && j < c.rows ? std::optional(std::array<std::int64_t, 2>{0, j}) : std::nullopt);
    if (r.rows != want) return rank + "loaded rows " + json::rows_text(r.rows) + ", expected " + json::rows_text(want);
    if (r.keys != std::vector<std::string>{"iteration", "local", "mixer"})
      return rank + "loaded keys " + json::dump(json::Json(r.keys));
  }
  return std::string();
}

}  // namespace

std::vector<Check> spec_invariant_checks() {
  const SplitLayout gdp = gdp_review();
  const auto resume = [](std::vector<OptimizerResumeCase> cases) {
    return [cases = std::move(cases)](Implementation& target) { return resume_check(target, cases); };
  };
  // A plain GTP linear of 120 rows at TP 1 (60 per TP rank at TP 2: padded at p 32).
  const SplitLayout linear{{120}, {"weight"}};
  const ResumeModule plain = ResumeModule::linear;
  return {
      // R1: a run that drops GTP, and one that adopts it, with optimizer state.
      Check::typed(kInvariants, "optimizer_resume_gtp_to_no_gtp",
                   resume({{gdp, kCols, {1, 2, 16}, {1, 1, 16}}, {gdp, kCols, {2, 2, 16}, {1, 1, 16}}})),
      Check::typed(kInvariants, "optimizer_resume_no_gtp_to_gtp", resume({{gdp, kCols, {1, 1, 16}, {1, 2, 16}}})),
      // R2: at TP 2 a GTP change, at a fixed GTP size a TP change; the plain GTP linear's weight too.
      Check::typed(kInvariants, "optimizer_resume_tp2_gtp_change", resume({{gdp, kCols, {2, 2, 32}, {2, 4, 32}}})),
      Check::typed(kInvariants, "optimizer_resume_tp_change", resume({{gdp, kCols, {2, 2, 16}, {1, 2, 16}}})),
      Check::typed(kInvariants, "gtp_linear_resume_tp2_gtp_change",
                   resume({{linear, kCols, {2, 2, 32}, {2, 4, 32}, plain}})),
      // The control: GTP on both sides at TP 1, padding and GTP size changing, rows < p * G.
      Check::typed(kInvariants, "optimizer_resume_tp1_gtp_change",
                   resume({{gdp, kCols, {1, 2, 16}, {1, 4, 16}},
                           {gdp, kCols, {1, 4, 32}, {1, 2, 16}},
                           {gdp_small(), kCols, {1, 2, 16}, {1, 4, 16}}})),
      Check::typed(kInvariants, "fresh_in_proj_fits_parameter", fresh_check),
      Check::typed(kInvariants, "load_orders_agree_all_padding", orders_check),
      Check::typed(kInvariants, "single_expert_objects_load", experts_check),
  };
}

std::vector<Check> gtp_gather_checks() {
  return {Check::simple(kGather, "gather_pieces", check_pieces), Check::simple(kGather, "gather_merge", check_merge),
          Check::simple(kGather, "gather_param_entry", check_param_entry),
          Check::simple(kGather, "all_padding_load", check_all_padding_load)};
}

}  // namespace ih::gate
