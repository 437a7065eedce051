#include "harness/coverage/coverage_report.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "codec/json_codec.h"

namespace ih::coverage {
namespace {

/// `file` relative to `root` when it lies under it (both made absolute and normal), else "".
std::string relative_to(const std::string& file, const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  const fs::path given(file);
  if (given.is_relative()) return given.lexically_normal().generic_string();
  const fs::path relative = given.lexically_normal().lexically_relative(root);
  if (relative.empty() || *relative.begin() == "..") return "";
  return relative.generic_string();
}

Error bad(const std::string& path, const std::string& why) {
  return make_error(ErrorKind::invalid_argument, "coverage JSON " + path + ": " + why);
}

}  // namespace

Result<LineContexts> read_coverage_json(const std::string& path, const std::string& tree_root) {
  std::ifstream in(path);
  if (!in) return bad(path, "cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  IH_TRY_ASSIGN(document, json::parse(text.str()));
  if (!document.is_object() || !document.contains("files") || !document["files"].is_object())
    return bad(path, "no \"files\" object (not coverage.py's JSON report)");
  namespace fs = std::filesystem;
  const fs::path root = fs::absolute(tree_root).lexically_normal();
  LineContexts out;
  for (const auto& [file, data] : document["files"].items()) {
    const std::string relative = relative_to(file, root);
    if (relative.empty()) continue;
    if (!data.contains("contexts") || !data["contexts"].is_object())
      return bad(path, file + " has no per-line contexts (write it with `coverage json --show-contexts`)");
    auto& lines = out[relative];
    for (const auto& [line, contexts] : data["contexts"].items()) {
      std::int64_t number = 0;
      try {
        number = std::stoll(line);
      } catch (const std::exception&) {
        return bad(path, file + ": line '" + line + "' is not a number");
      }
      auto& checks = lines[number];
      for (const auto& context : contexts)
        if (context.is_string() && !context.get<std::string>().empty()) checks.insert(context.get<std::string>());
    }
  }
  return out;
}

}  // namespace ih::coverage
