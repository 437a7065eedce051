#include "harness/targets/targets.h"

#include <algorithm>
#include <filesystem>

#include "harness/megatron/adapter_mutants.h"
#include "harness/megatron/adapter_replies.h"
#include "harness/megatron/megatron_implementation.h"
#include "mutants/mutant_implementation.h"

namespace ih {
namespace {

constexpr std::pair<TargetKind, std::string_view> kTargetNames[] = {{TargetKind::reference, "reference"},
                                                                    {TargetKind::megatron, "megatron"}};

}  // namespace

std::string_view to_string(TargetKind kind) {
  for (const auto& [k, name] : kTargetNames)
    if (k == kind) return name;
  return "?";
}

Result<TargetKind> parse_target_kind(std::string_view word) {
  std::string known;
  for (const auto& [kind, name] : kTargetNames) {
    if (name == word) return kind;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  return make_error(ErrorKind::invalid_argument, "unknown target '" + std::string(word) + "' (known: " + known + ")");
}

Result<TargetSpec> target_of(const ReproToken& token) {
  IH_TRY_ASSIGN(kind, parse_target_kind(token.target()));
  Candidate candidate = Candidate::none;
  if (const auto word = token.option("candidate")) {
    IH_TRY_ASSIGN(parsed, parse_candidate(*word));
    candidate = parsed;
  }
  return TargetSpec{kind,      token.option("mutant"), token.option("megatron-path"),
                    candidate, token.option("fix"),    token.option("base-megatron-path")};
}

void add_target_options(ReproToken& token, const TargetSpec& spec) {
  token.options["target"] = std::string(to_string(spec.target));
  if (spec.mutant) token.options["mutant"] = *spec.mutant;
  if (spec.megatron_path) token.options["megatron-path"] = *spec.megatron_path;
  if (spec.candidate != Candidate::none) token.options["candidate"] = std::string(to_string(spec.candidate));
  if (spec.fix) token.options["fix"] = *spec.fix;
}

void add_base_tree(ReproToken& token, const TargetSpec& spec) {
  if (spec.base_megatron_path) token.options["base-megatron-path"] = *spec.base_megatron_path;
}

bool is_cross_version_token(const ReproToken& token) {
  return token.check.rfind(gate_check_name(gate::kRealRoundTripCrossGroup, ""), 0) == 0;
}

namespace {

bool is_megatron_checkout(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(std::filesystem::path(path) / "megatron/core/__init__.py", error);
}

/// Both trees a cross-version token replays across, each a Megatron-LM checkout here.
Status check_cross_version_trees(const TargetSpec& spec) {
  const auto missing = [](const std::string& what) {
    return make_error(ErrorKind::invalid_argument,
                      "a cross-version check's token needs " + what +
                          " (the tree it saves or loads with; tokens printed before the base tree was carried name "
                          "none: re-run the gate with --base-megatron-path)");
  };
  if (!spec.base_megatron_path) return missing("base-megatron-path=DIR, the BASE Megatron-LM tree");
  if (!is_megatron_checkout(*spec.base_megatron_path))
    return missing("base-megatron-path " + *spec.base_megatron_path + " to be a Megatron-LM checkout here");
  if (!spec.megatron_path) return missing("megatron-path=DIR, the NEW Megatron-LM tree");
  if (!is_megatron_checkout(*spec.megatron_path))
    return missing("megatron-path " + *spec.megatron_path + " to be a Megatron-LM checkout here (or --megatron-path)");
  return Ok{};
}

}  // namespace

void add_target_identity(ReproToken& token, const Implementation& target) {
  const auto [version, revision] = target.code_identity();
  if (!version.empty()) token.options["megatron-version"] = version;
  if (!revision.empty()) token.options["megatron-revision"] = revision;
}

Result<TargetSpec> replay_target_of(const ReproToken& token, const std::optional<std::string>& megatron_path,
                                    std::ostream& notes) {
  IH_TRY_ASSIGN(spec, target_of(token));
  if (megatron_path) {
    if (spec.target != TargetKind::megatron)
      return make_error(ErrorKind::invalid_argument,
                        "--megatron-path applies to a token of target megatron only (this one names target " +
                            std::string(to_string(spec.target)) + ")");
    spec.megatron_path = megatron_path;
    IH_TRY_ASSIGN(checked, validated(spec));  // a checkout, named by its absolute path on the target line
    spec = std::move(checked);
  }
  if (is_cross_version_token(token)) {
    IH_TRY_STATUS(check_cross_version_trees(spec));
    return spec;
  }
  if (!megatron_path && spec.megatron_path && !is_megatron_checkout(*spec.megatron_path)) {
    notes << "NOTE: the token's megatron-path " << *spec.megatron_path
          << " is no Megatron-LM checkout here; replaying against the installed package (give --megatron-path DIR "
             "to choose a checkout)\n";
    spec.megatron_path.reset();
  }
  return spec;
}

void warn_if_other_megatron(const ReproToken& token, const Implementation& target, std::ostream& notes) {
  const auto kind = parse_target_kind(token.target());
  if (!kind.ok() || *kind != TargetKind::megatron) return;
  const auto [version, revision] = target.code_identity();
  const auto named_version = token.option("megatron-version");
  const auto named_revision = token.option("megatron-revision");
  const auto describe = [](const std::string& v, const std::string& r) {
    return "megatron-core " + (v.empty() ? std::string("(version not named)") : v) +
           (r.empty() ? std::string(" (no revision)") : " (revision " + r + ")");
  };
  if (!named_version) {
    notes << "NOTE: the token names no Megatron version (a pinned finding or an older token); this replay runs "
          << describe(version, revision) << "\n";
    return;
  }
  if (*named_version == version && named_revision.value_or("") == revision) return;
  notes << "WARNING: the token was printed against " << describe(*named_version, named_revision.value_or(""))
        << "; this replay runs " << describe(version, revision) << ": the verdict may differ\n";
}

namespace {

/// A Megatron mutant the adapter's table names. When the table cannot be read (no venv yet) the adapter's
/// own start says what is missing: the name is refused there too, never planted unknown.
Status check_megatron_mutant(const std::string& mutant, const MegatronOptions& options) {
  const auto names = adapter_mutant_names(options);
  if (!names.ok() || std::find(names->begin(), names->end(), mutant) != names->end()) return Ok{};
  std::string known;
  for (const std::string& name : *names) known += (known.empty() ? "" : ", ") + name;
  return make_error(ErrorKind::invalid_argument,
                    "unknown mutant '" + mutant + "' of the Megatron adapter (known: " + known + ")");
}

}  // namespace

Result<TargetSpec> validated(TargetSpec spec) {
  if (spec.target == TargetKind::reference) {
    if (spec.megatron_path || spec.candidate != Candidate::none || spec.fix)
      return make_error(ErrorKind::invalid_argument,
                        "--megatron-path, --candidate and --fix apply to --target megatron only");
    if (spec.mutant) IH_TRY_STATUS(MutantImplementation::create(*spec.mutant));
    return spec;
  }
  if (spec.mutant) IH_TRY_STATUS(check_megatron_mutant(*spec.mutant, megatron_options(spec)));
  if (spec.fix && !is_known_fix(*spec.fix))
    return make_error(ErrorKind::invalid_argument, "unknown --fix '" + *spec.fix + "' (known: to_state_dict_order)");
  if (spec.megatron_path) {
    if (!is_megatron_checkout(*spec.megatron_path))
      return make_error(ErrorKind::invalid_argument,
                        "--megatron-path " + *spec.megatron_path +
                            " holds no megatron/core/__init__.py (not a Megatron-LM checkout)");
    spec.megatron_path = std::filesystem::absolute(*spec.megatron_path).lexically_normal().string();
  }
  return spec;
}

Result<TargetSpec> validated_target(const std::optional<std::string>& target, std::optional<std::string> mutant,
                                    std::optional<std::string> megatron_path, std::optional<std::string> candidate,
                                    std::optional<std::string> fix) {
  IH_TRY_ASSIGN(kind, parse_target_kind(target.value_or(std::string(to_string(TargetKind::reference)))));
  Candidate design = Candidate::none;
  if (candidate) {
    IH_TRY_ASSIGN(parsed, parse_candidate(*candidate));
    design = parsed;
  }
  return validated(TargetSpec{kind, std::move(mutant), std::move(megatron_path), design, std::move(fix)});
}

MegatronOptions megatron_options(const TargetSpec& spec) {
  return {.megatron_path = spec.megatron_path, .mutant = spec.mutant, .candidate = spec.candidate, .fix = spec.fix};
}

Result<std::unique_ptr<Implementation>> make_target(const TargetSpec& given) {
  IH_TRY_ASSIGN(spec, validated(given));
  if (spec.target == TargetKind::reference) {
    if (!spec.mutant) return std::unique_ptr<Implementation>(std::make_unique<ReferenceImplementation>());
    IH_TRY_ASSIGN(mutant, MutantImplementation::create(*spec.mutant));
    return std::unique_ptr<Implementation>(std::move(mutant));
  }
  IH_TRY_ASSIGN(megatron, MegatronImplementation::start(megatron_options(spec)));
  return std::unique_ptr<Implementation>(std::move(megatron));
}

std::string describe_target(const Implementation& target, const TargetSpec& spec) {
  std::string out = target.name();
  if (spec.megatron_path) out += " at " + *spec.megatron_path;
  return out;
}

Result<std::vector<MegatronMutant>> megatron_mutants_from_json(const json::Json& listing) {
  std::vector<MegatronMutant> out;
  const auto bad = [](const json::Json& row, const std::string& what) {
    return protocol_error("a mutant row " + what, json::dump(row));
  };
  if (!listing.contains("mutants") || !listing["mutants"].is_array()) return bad(listing, "list is missing");
  for (const json::Json& row : listing["mutants"]) {
    if (!row.is_object() || !row.contains("name") || !row["name"].is_string()) return bad(row, "without a name");
    MegatronMutant m{row["name"].get<std::string>(),
                     row.value("description", std::string()),
                     row.value("spec_bug_class", json::Json("-")),
                     "",
                     MutantTier::checks,
                     MutantOf::megatron};
    if (!row.value("applicable", true)) m.not_applicable = row.value("not_applicable", std::string("not applicable"));
    const std::string tier = row.value("tier", std::string("checks")), of = row.value("of", std::string("megatron"));
    if (tier != "checks" && tier != "real") return bad(row, "with an unknown tier '" + tier + "'");
    if (of != "megatron" && of != "candidate") return bad(row, "of an unknown design '" + of + "'");
    m.tier = tier == "real" ? MutantTier::real : MutantTier::checks;
    m.of = of == "candidate" ? MutantOf::candidate : MutantOf::megatron;
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<MegatronMutant>> list_megatron_mutants(const TargetSpec& spec) {
  IH_TRY_ASSIGN(megatron, MegatronImplementation::start(megatron_options(spec)));
  IH_TRY_ASSIGN(listing, megatron->list_mutants());
  return megatron_mutants_from_json(listing);
}

Result<std::unique_ptr<Implementation>> start_megatron_describer(TargetSpec spec,
                                                                 const std::optional<std::string>& python,
                                                                 std::chrono::milliseconds reply_timeout) {
  spec.mutant.reset();
  MegatronOptions options = megatron_options(spec);
  if (python) options.python = *python;
  options.reply_timeout = reply_timeout;
  IH_TRY_ASSIGN(megatron, MegatronImplementation::start(options));
  return std::unique_ptr<Implementation>(std::move(megatron));
}

}  // namespace ih
