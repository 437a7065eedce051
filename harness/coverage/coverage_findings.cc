#include "harness/coverage/coverage_findings.h"

#include <fnmatch.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "models/text.h"

namespace ih::coverage {

const std::vector<CheckpointPathRule>& checkpoint_path_table() {
  static const std::vector<CheckpointPathRule> table = {
      {"megatron/core/dist_checkpointing/*", "*"},
      {"megatron/training/checkpointing.py", "*"},
      {"megatron/core/models/*", "*sharded_state_dict*"},
      {"megatron/core/models/*", "*load_state_dict*"},
      {"megatron/core/transformer/*", "*sharded_state_dict*"},
      {"megatron/core/transformer/*", "*load_state_dict*"},
      {"megatron/core/ssm/*", "*sharded_state_dict*"},
      {"megatron/core/tensor_parallel/*", "*sharded_state_dict*"},
      {"megatron/core/optimizer/*", "*load_parameter_state*"},
      {"megatron/core/optimizer/*", "*state_dict*"},
      {"megatron/core/distributed/*", "*sharded_state_dict*"},
  };
  return table;
}

bool on_checkpoint_path(const std::string& file, const std::string& function) {
  if (function.empty()) return false;
  for (const CheckpointPathRule& rule : checkpoint_path_table())
    if (fnmatch(rule.file_glob, file.c_str(), 0) == 0 && fnmatch(rule.function_glob, function.c_str(), 0) == 0)
      return true;
  return false;
}

CheckpointPathCoverage checkpoint_path_coverage(const CoverageFiles& files) {
  CheckpointPathCoverage out;
  for (const auto& [file, coverage] : files) {
    FileShare share{file};
    for (const FunctionLines& f : coverage.functions) {
      if (!on_checkpoint_path(file, f.name)) continue;
      const auto statements = static_cast<std::int64_t>(f.executed.size() + f.missing.size());
      ++share.functions;
      share.statements += statements;
      share.statements_run += static_cast<std::int64_t>(f.executed.size());
      if (!f.executed.empty())
        ++share.functions_run;
      else if (statements > 0)
        out.never_run.push_back({file, f.name, f.start_line, statements});
    }
    if (share.functions) out.files.push_back(share);
  }
  return out;
}

ChangedLines new_lines_of_diff(std::string_view diff, const std::string& new_root) {
  ChangedLines out;
  const std::filesystem::path root = std::filesystem::path(new_root).lexically_normal();
  std::string file;  // the new side's file of the hunks that follow ("" when outside new_root or deleted)
  for (std::string_view line : split_views(diff, '\n')) {
    if (line.substr(0, 4) == "+++ ") {
      std::string_view name = line.substr(4);
      file.clear();
      if (name == "/dev/null" || name.substr(0, 2) != "b/") continue;
      const std::filesystem::path rel =
          (std::filesystem::path("/") / std::string(name.substr(2))).lexically_normal().lexically_relative(root);
      if (!rel.empty() && *rel.begin() != "..") file = rel.string();
      continue;
    }
    if (file.empty() || line.substr(0, 3) != "@@ ") continue;
    // "@@ -a[,b] +c[,d] @@": the new side's lines c .. c+d-1 (d defaults to 1; 0 is a pure deletion).
    const std::size_t plus = line.find(" +");
    if (plus == std::string_view::npos) continue;
    const std::size_t end = line.find(' ', plus + 2);
    const std::string range(
        line.substr(plus + 2, end == std::string_view::npos ? std::string_view::npos : end - plus - 2));
    const std::size_t comma = range.find(',');
    try {
      const std::int64_t first = std::stoll(range.substr(0, comma));
      const std::int64_t count = comma == std::string::npos ? 1 : std::stoll(range.substr(comma + 1));
      for (std::int64_t l = first; l < first + count; ++l) out[file].insert(l);
    } catch (const std::exception&) {
      continue;  // not a hunk header after all
    }
  }
  return out;
}

ChangedLinesCoverage changed_lines_coverage(const ChangedLines& changed, const CoverageFiles& files) {
  ChangedLinesCoverage out;
  for (const auto& [file, lines] : changed) {
    const auto found = files.find(file);
    if (found == files.end()) continue;  // no Python statements coverage.py measured
    for (std::int64_t line : lines) {
      const bool ran = found->second.executed.count(line) > 0;
      if (!ran && !found->second.missing.count(line)) continue;  // not a statement
      ++out.changed_statements;
      if (!ran) out.not_run.push_back({file, found->second.function_of(line), line});
    }
  }
  return out;
}

json::Json findings_json(const CoverageFindings& findings) {
  if (!findings.not_measured.empty())
    return {{"data_file", ""}, {"json_report", ""}, {"measured", false}, {"not_measured", findings.not_measured}};
  json::Json never = json::Json::array(), files = json::Json::array();
  for (const FunctionNeverRun& f : findings.checkpoint_path.never_run)
    never.push_back({{"file", f.file}, {"function", f.function}, {"line", f.start_line}, {"statements", f.statements}});
  for (const FileShare& s : findings.checkpoint_path.files)
    files.push_back({{"file", s.file},
                     {"functions", s.functions},
                     {"functions_run", s.functions_run},
                     {"statements", s.statements},
                     {"statements_run", s.statements_run}});
  json::Json out{{"data_file", findings.data_file},
                 {"json_report", findings.json_report},
                 {"measured", true},
                 {"checkpoint_path", {{"functions_never_run", never}, {"files", files}}}};
  if (findings.changed) {
    json::Json not_run = json::Json::array();
    for (const ChangedLineNotRun& l : findings.changed->not_run)
      not_run.push_back({{"file", l.file}, {"function", l.function}, {"line", l.line}});
    out["changed_lines"] = {{"statements", findings.changed->changed_statements},
                            {"not_run_count", findings.changed->not_run.size()},
                            {"not_run", not_run}};
  }
  return out;
}

namespace {

std::string function_label(const std::string& function) { return function.empty() ? "(module level)" : function; }

}  // namespace

std::string findings_markdown(const CoverageFindings& findings, bool with_checkpoint_path) {
  std::ostringstream out;
  out << "## Coverage of the Megatron tree\n\n";
  if (!findings.not_measured.empty())
    return out.str() + "Not measured: " + findings.not_measured + "." +
           (findings.changed_asked ? " Which changed lines ran is unknown." : "") + "\n\n";
  if (findings.changed) {
    out << "### Changed lines not run (" << findings.changed->not_run.size() << " of "
        << findings.changed->changed_statements << " changed statements)\n\n";
    std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>> by_function;
    std::vector<std::pair<std::string, std::string>> order;
    for (const ChangedLineNotRun& l : findings.changed->not_run) {
      auto& lines = by_function[{l.file, l.function}];
      if (lines.empty()) order.push_back({l.file, l.function});
      lines.push_back(l.line);
    }
    for (const auto& key : order) {
      out << "- `" << key.first << "` " << function_label(key.second) << ": line";
      const auto& lines = by_function[key];
      for (std::size_t i = 0; i < lines.size(); ++i) out << (i ? ", " : lines.size() > 1 ? "s " : " ") << lines[i];
      out << "\n";
    }
    out << "\n";
  }
  if (!with_checkpoint_path) return out.str();
  out << "### Checkpoint path\n\n| file | functions run | statements run |\n|---|---|---|\n";
  for (const FileShare& s : findings.checkpoint_path.files)
    out << "| `" << s.file << "` | " << s.functions_run << "/" << s.functions << " | " << s.statements_run << "/"
        << s.statements << " |\n";
  out << "\nFunctions never run (" << findings.checkpoint_path.never_run.size() << "):\n\n";
  for (const FunctionNeverRun& f : findings.checkpoint_path.never_run)
    out << "- `" << f.file << ":" << f.start_line << "` " << f.function << "\n";
  return out.str();
}

std::string verdict_suffix(const CoverageFindings& findings) {
  if (!findings.not_measured.empty())
    return findings.changed_asked ? ", coverage not measured (changed lines unknown)" : ", coverage not measured";
  std::string out =
      ", " + std::to_string(findings.checkpoint_path.never_run.size()) + " checkpoint-path functions never run";
  if (findings.changed) out += ", " + std::to_string(findings.changed->not_run.size()) + " changed lines not run";
  return out;
}

}  // namespace ih::coverage
