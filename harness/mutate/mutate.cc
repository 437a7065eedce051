#include "harness/mutate/mutate.h"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "models/text.h"
#include "seam/error_kinds.h"

namespace ih::mutate {

namespace fs = std::filesystem;

const std::vector<std::string>& checkpoint_path_globs() {
  static const std::vector<std::string> globs = {
      // mapping, serialization, validation, exchange_utils, the GPT->hybrid retarget (gpt_checkpoint_interop),
      // dict_utils and utils (what a load walks), optimizer (the Float16 optimizer's state sharding)
      "megatron/core/dist_checkpointing/*.py",
      "megatron/core/dist_checkpointing/strategies/torch.py",
      "megatron/core/dist_checkpointing/strategies/fully_parallel.py",
      "megatron/core/models/gpt/gpt_model.py",
      "megatron/core/models/hybrid/*.py",
      "megatron/core/models/common/language_module/language_module.py",
      "megatron/core/ssm/mamba_mixer.py",
      "megatron/core/ssm/gated_delta_product.py",
      "megatron/core/ssm/utils.py",          // the split factory of the Mamba and GDP in_proj
      "megatron/core/transformer/mlp.py",    // the SwiGLU fc1 factory
      "megatron/core/transformer/utils.py",  // the default sharded_state_dict of every linear and norm
      "megatron/core/transformer/moe/experts.py",
      "megatron/core/tensor_parallel/generalized_tensor_parallelism.py",
      "megatron/core/optimizer/distrib_optimizer.py",
      "megatron/core/optimizer/optimizer.py",
      "megatron/training/checkpointing.py",
  };
  return globs;
}

bool glob_matches(const std::string& glob, const std::string& path) {
  return fnmatch(glob.c_str(), path.c_str(), FNM_PATHNAME) == 0;
}

FileLines lines_to_mutate(const coverage::LineContexts& coverage, const std::vector<std::string>& globs,
                          const std::optional<FileLines>& changed) {
  FileLines out;
  for (const auto& [file, lines] : coverage) {
    if (std::none_of(globs.begin(), globs.end(), [&](const std::string& g) { return glob_matches(g, file); })) continue;
    const auto change = changed ? changed->find(file) : FileLines::const_iterator{};
    if (changed && change == changed->end()) continue;
    for (const auto& [line, checks] : lines) {
      if (changed && !change->second.count(line)) continue;
      if (!checks_reaching(coverage, file, line).empty()) out[file].insert(line);
    }
  }
  return out;
}

std::set<std::string> checks_reaching(const coverage::LineContexts& coverage, const std::string& file,
                                      std::int64_t line) {
  const auto lines = coverage.find(file);
  if (lines == coverage.end()) return {};
  const auto here = lines->second.find(line);
  if (here == lines->second.end()) return {};
  if (!here->second.empty()) return here->second;
  std::set<std::string> any;
  for (const auto& [unused, checks] : lines->second) any.insert(checks.begin(), checks.end());
  return any;
}

Status build_overlay(const fs::path& tree, const fs::path& overlay, const std::string& relative,
                     const std::string& text) {
  std::error_code ec;
  if (fs::exists(overlay, ec))
    return make_error(seam_kind::harness_error, "overlay " + overlay.string() + " exists already");
  const fs::path file(relative);
  fs::path source_dir = tree, mirror_dir = overlay;
  fs::create_directories(overlay, ec);
  for (auto part = file.begin(); !ec && part != file.end(); ++part) {
    const bool leaf = std::next(part) == file.end();
    for (const fs::directory_entry& entry : fs::directory_iterator(source_dir, ec)) {
      const fs::path name = entry.path().filename();
      if (name == *part || name == "__pycache__") continue;
      fs::create_symlink(fs::absolute(entry.path()), mirror_dir / name, ec);
      if (ec) break;
    }
    if (ec || leaf) break;
    source_dir /= *part, mirror_dir /= *part;
    fs::create_directory(mirror_dir, ec);
  }
  if (ec) return make_error(seam_kind::harness_error, "overlay " + overlay.string() + ": " + ec.message());
  std::ofstream out(overlay / file);
  out << text;
  out.close();
  if (!out) return make_error(seam_kind::harness_error, "overlay: cannot write " + (overlay / file).string());
  return Ok{};
}

Result<GateVerdicts> verdicts_of_gate_json(const std::string& text) {
  IH_TRY_ASSIGN(report, json::parse(text));
  if (!report.is_object() || !report.contains("checks") || !report["checks"].is_array())
    return make_error(ErrorKind::invalid_argument, "the gate's JSON report has no checks list");
  GateVerdicts out;
  for (const auto& check : report["checks"]) {
    const std::string name = check.value("name", std::string());
    const auto outcome = parse_outcome(check.value("outcome", std::string()));
    if (!outcome.ok()) return outcome.error().with_context("the gate's JSON report, check " + name);
    out[name] = {*outcome, check.value("detail", std::string()), check.value("seconds", 0.0)};
  }
  return out;
}

std::string to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::killed: return "killed";
    case Outcome::survived: return "survived";
    case Outcome::timeout: return "timeout";
    case Outcome::incompetent: return "incompetent";
    case Outcome::equivalent: return "equivalent";
  }
  return "?";
}

namespace {

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; !from.empty() && (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
  return text;
}

/// Whether the mutant's verdict of a check is a failure the clean tree did not show.
bool fails_differently(const CheckVerdict& clean, const CheckVerdict& mutant, const std::string& overlay,
                       const std::string& tree) {
  using G = GateOutcome;
  const bool failed = mutant.outcome == G::failed || mutant.outcome == G::known_finding;
  if (!failed) return false;
  if (clean.outcome == G::passed) return true;
  if (clean.outcome == G::known_finding) return mutant.outcome == G::failed;  // the pin no longer matches
  if (clean.outcome == G::failed) return replaced(mutant.detail, overlay, tree) != clean.detail;
  return false;  // no clean verdict to compare with
}

}  // namespace

bool gave_verdict(GateOutcome outcome) {
  return outcome == GateOutcome::passed || outcome == GateOutcome::failed || outcome == GateOutcome::known_finding;
}

Judgement judge(const GateVerdicts& clean, const MutantRun& run, const std::string& overlay, const std::string& tree) {
  Judgement j;
  if (run.timed_out) return {Outcome::timeout, {}, "the mutant's gate ran past its deadline"};
  if (!run.verdicts) return {Outcome::incompetent, {}, run.why};
  for (const auto& [name, verdict] : *run.verdicts)  // a module that no longer imports is no kill (issue 32)
    if (verdict.outcome == GateOutcome::failed && verdict.detail.find(kDoesNotImport) != std::string::npos)
      return {Outcome::incompetent, {}, name + ": " + verdict.detail.substr(0, verdict.detail.find('\n'))};
  std::string timed_out, no_verdict, no_clean_verdict;
  bool judged = false;  // some check had a verdict on the clean tree to compare with
  for (const auto& [name, clean_verdict] : clean) {
    if (gave_verdict(clean_verdict.outcome))
      judged = true;
    else if (no_clean_verdict.empty())
      no_clean_verdict = name + ": " + std::string(to_string(clean_verdict.outcome)) + " on the clean tree";
    const auto found = run.verdicts->find(name);
    if (found == run.verdicts->end()) {
      no_verdict = name + ": missing from the mutant's report";
      continue;
    }
    const CheckVerdict& mutant = found->second;
    if (fails_differently(clean_verdict, mutant, overlay, tree)) j.killed_by.push_back(name);
    if (mutant.outcome == GateOutcome::timeout) timed_out = name;
    if (!gave_verdict(mutant.outcome) && gave_verdict(clean_verdict.outcome))
      no_verdict = name + ": " + std::string(to_string(mutant.outcome));
  }
  if (!j.killed_by.empty())
    j.outcome = Outcome::killed;
  else if (!timed_out.empty())
    j = {Outcome::timeout, {}, timed_out + " timed out"};
  else if (!no_verdict.empty())
    j = {Outcome::incompetent, {}, no_verdict};
  else if (!judged)  // a check that gave the clean tree no verdict cannot tell the mutant's apart: never a survival
    j = {Outcome::incompetent, {}, no_clean_verdict.empty() ? "no check judges it" : no_clean_verdict};
  return j;
}

std::string judge_fingerprint(const fs::path& programs, const fs::path& adapter) {
  std::ostringstream out;
  const auto stamp = [&out](const fs::directory_entry& entry) {
    std::error_code ec;
    if (!entry.is_regular_file(ec)) return;
    const auto size = entry.file_size(ec);
    out << entry.path().string() << ' ' << size << ' ' << entry.last_write_time(ec).time_since_epoch().count() << '\n';
  };
  std::vector<fs::directory_entry> entries;  // sorted: a folder lists its files in no fixed order
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(programs, ec)) entries.push_back(entry);
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(adapter, ec))
    if (entry.path().extension() == ".py") entries.push_back(entry);
  std::sort(entries.begin(), entries.end());
  for (const fs::directory_entry& entry : entries) stamp(entry);
  return out.str();
}

Result<std::vector<Equivalent>> load_equivalents(const fs::path& folder) {
  std::vector<Equivalent> out;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return out;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    if (entry.path().extension() != ".equivalent") continue;
    std::ifstream in(entry.path());
    std::map<std::string, std::string> fields;
    for (std::string text; std::getline(in, text);)
      if (const auto colon = text.find(':'); colon != std::string::npos && text[0] != '#')
        fields[text.substr(0, colon)] = text.substr(text.find_first_not_of(' ', colon + 1) == std::string::npos
                                                        ? text.size()
                                                        : text.find_first_not_of(' ', colon + 1));
    for (const char* key : {"file", "line", "operator", "diff-sha256", "reason"})
      if (fields[key].empty())
        return make_error(ErrorKind::invalid_argument, entry.path().string() + ": no '" + key + ":' line");
    Equivalent e{fields["file"], fields["operator"], fields["diff-sha256"], fields["reason"], entry.path().string()};
    try {
      e.line = std::stoll(fields["line"]);
    } catch (const std::exception&) {
      return make_error(ErrorKind::invalid_argument, entry.path().string() + ": line is not a number");
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace ih::mutate
