#include "harness/coverage/coverage_report.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "codec/json_codec.h"

namespace ih::coverage {
namespace {

Result<json::Json> read_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorKind::invalid_argument, "cannot read the coverage report " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  if (!parsed.ok()) return parsed.error().with_context(path);
  if (!parsed->is_object() || !parsed->contains("files") || !(*parsed)["files"].is_object() ||
      !parsed->contains("meta") || !(*parsed)["meta"].is_object())
    return make_error(ErrorKind::invalid_argument,
                      path + " is not coverage.py's JSON report (no \"meta\" and \"files\")");
  return *parsed;
}

/// The name of `file` relative to `tree_root`; "" when it lies outside.
std::string tree_relative(const std::string& file, const std::string& tree_root) {
  const std::filesystem::path p(file);
  if (p.is_relative()) return p.lexically_normal().string();
  const std::filesystem::path rel =
      p.lexically_normal().lexically_relative(std::filesystem::path(tree_root).lexically_normal());
  if (rel.empty() || *rel.begin() == "..") return "";
  return rel.string();
}

Result<std::set<std::int64_t>> lines_of(const json::Json& entry, const char* field, const std::string& where) {
  if (!entry.contains(field) || !entry[field].is_array())
    return make_error(ErrorKind::invalid_argument, where + ": no \"" + field + "\" list of line numbers");
  std::set<std::int64_t> out;
  for (const auto& line : entry[field]) {
    if (!line.is_number_integer() || line.get<std::int64_t>() < 1)
      return make_error(ErrorKind::invalid_argument, where + ": \"" + field + "\" holds " + json::dump(line));
    out.insert(line.get<std::int64_t>());
  }
  return out;
}

Result<FileCoverage> file_coverage(const json::Json& entry, const std::string& where) {
  FileCoverage file;
  IH_TRY_ASSIGN(executed, lines_of(entry, "executed_lines", where));
  IH_TRY_ASSIGN(missing, lines_of(entry, "missing_lines", where));
  file.executed = std::move(executed), file.missing = std::move(missing);
  if (!entry.contains("functions") || !entry["functions"].is_object())
    return make_error(ErrorKind::invalid_argument, where + ": no \"functions\" (coverage.py before 7.5?)");
  for (const auto& [name, f] : entry["functions"].items()) {
    const std::string at = where + " function '" + name + "'";
    IH_TRY_ASSIGN(run, lines_of(f, "executed_lines", at));
    IH_TRY_ASSIGN(not_run, lines_of(f, "missing_lines", at));
    const std::int64_t start =
        f.contains("start_line") && f["start_line"].is_number_integer() ? f["start_line"].get<std::int64_t>() : 0;
    file.functions.push_back({name, start, std::move(run), std::move(not_run)});
  }
  return file;
}

}  // namespace

std::string FileCoverage::function_of(std::int64_t line) const {
  for (const FunctionLines& f : functions)
    if (f.executed.count(line) || f.missing.count(line)) return f.name;
  return "";
}

Result<LineContexts> read_coverage_json(const std::string& path, const std::string& tree_root) {
  IH_TRY_ASSIGN(report, read_report(path));
  if (!report["meta"].value("show_contexts", false))
    return make_error(ErrorKind::invalid_argument,
                      path + " has no contexts: write it with `coverage json --show-contexts`");
  LineContexts out;
  for (const auto& [file, entry] : report["files"].items()) {
    const std::string name = tree_relative(file, tree_root);
    if (name.empty()) continue;
    const std::string where = path + ": " + file;
    IH_TRY_ASSIGN(executed, lines_of(entry, "executed_lines", where));
    auto& lines = out[name];
    for (std::int64_t line : executed) lines[line];
    if (!entry.contains("contexts") || !entry["contexts"].is_object())
      return make_error(ErrorKind::invalid_argument, where + ": no \"contexts\" object");
    for (const auto& [line_text, contexts] : entry["contexts"].items()) {
      std::int64_t line = 0;
      try {
        line = std::stoll(line_text);
      } catch (const std::exception&) {
        return make_error(ErrorKind::invalid_argument, where + ": context line '" + line_text + "' is no number");
      }
      if (line < 1) continue;  // coverage.py lists an empty file's line 0
      if (!contexts.is_array())
        return make_error(ErrorKind::invalid_argument, where + ": the contexts of line " + line_text + " are no list");
      auto& checks = lines[line];
      for (const auto& context : contexts)
        if (context.is_string() && !context.get<std::string>().empty()) checks.insert(context.get<std::string>());
    }
  }
  return out;
}

Result<CoverageFiles> read_coverage_files(const std::string& path, const std::string& tree_root) {
  IH_TRY_ASSIGN(report, read_report(path));
  CoverageFiles out;
  for (const auto& [file, entry] : report["files"].items()) {
    const std::string name = tree_relative(file, tree_root);
    if (name.empty()) continue;
    IH_TRY_ASSIGN(coverage, file_coverage(entry, path + ": " + file));
    out[name] = std::move(coverage);
  }
  return out;
}

}  // namespace ih::coverage
