#include "harness/coverage/coverage_collect.h"

#include <filesystem>

#include "harness/process/child_run.h"

namespace ih::coverage {
namespace {

/// Runs argv in `dir` (through sh: run_child starts in the harness's own folder); its stdout is kept.
Result<ChildOutcome> run_in(const std::string& dir, std::vector<std::string> argv, std::chrono::milliseconds timeout,
                            std::string& out) {
  argv.insert(argv.begin(), {"sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", dir});
  return run_child(argv, timeout, [&out](const std::string& line) { out += line + "\n"; });
}

Status succeeded(const Result<ChildOutcome>& ran, const std::string& what) {
  if (!ran.ok()) return ran.error();
  if (ran->timed_out || ran->signaled || ran->exit_code != 0)
    return make_error(seam_kind::harness_error, what + " failed (exit " + std::to_string(ran->exit_code) +
                                                    (ran->timed_out ? ", timed out" : "") + "): " + ran->stderr_tail);
  return Ok{};
}

}  // namespace

bool has_data_files(const std::string& data_dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir, error))
    if (entry.path().filename().string().rfind(".coverage.", 0) == 0) return true;
  return false;
}

Status combine_and_report(const std::string& python, const std::string& data_dir, const std::string& tree_root,
                          std::chrono::milliseconds timeout) {
  const std::filesystem::path dir(data_dir);
  const std::string data = (dir / ".coverage").string();
  std::string ignored;
  IH_TRY_STATUS(
      succeeded(run_in(tree_root, {python, "-m", "coverage", "combine", "--quiet", "--data-file=" + data, data_dir},
                       timeout, ignored),
                "coverage combine of " + data_dir));
  return succeeded(run_in(tree_root,
                          {python, "-m", "coverage", "json", "--quiet", "--show-contexts", "--data-file=" + data, "-o",
                           (dir / "coverage.json").string()},
                          timeout, ignored),
                   "coverage json of " + data);
}

Result<ChangedLines> changed_lines(const std::string& base_root, const std::string& new_root,
                                   std::chrono::milliseconds timeout) {
  std::error_code error;
  const auto base = std::filesystem::canonical(std::filesystem::path(base_root) / "megatron", error);
  if (error) return make_error(ErrorKind::invalid_argument, "the base tree " + base_root + " has no megatron/ folder");
  const auto changed = std::filesystem::canonical(std::filesystem::path(new_root) / "megatron", error);
  if (error) return make_error(ErrorKind::invalid_argument, "the tree " + new_root + " has no megatron/ folder");
  std::string diff;
  const auto ran = run_in("/",
                          {"git", "diff", "--no-index", "--no-color", "--no-ext-diff", "--no-renames", "-U0",
                           base.string(), changed.string()},
                          timeout, diff);
  if (!ran.ok()) return ran.error();
  // git diff --no-index exits 1 when the trees differ, 0 when they do not.
  if (ran->timed_out || ran->signaled || (ran->exit_code != 0 && ran->exit_code != 1))
    return make_error(seam_kind::harness_error, "git diff --no-index " + base.string() + " " + changed.string() +
                                                    " failed (exit " + std::to_string(ran->exit_code) +
                                                    "): " + ran->stderr_tail);
  return new_lines_of_diff(diff, changed.parent_path().string());
}

}  // namespace ih::coverage
