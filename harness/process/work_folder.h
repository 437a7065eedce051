// A temporary folder of the run's (run_scope.h), removed when its owner ends: a session's work folder, one
// world's Open MPI session folder.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "seam/error_kinds.h"

namespace ih {

/// The folder given (kept), or a fresh one under the run's temporary folder (removed at the end).
class WorkFolder {
 public:
  /// `keep`, or a fresh folder `<prefix>-XXXXXX` under the run's temporary folder (harness_error when it cannot).
  static Result<WorkFolder> make(const std::optional<std::string>& keep, const std::string& prefix);
  WorkFolder(WorkFolder&& other) noexcept : path_(std::move(other.path_)), keep_(other.keep_) { other.path_.clear(); }
  WorkFolder(const WorkFolder&) = delete;
  WorkFolder& operator=(const WorkFolder&) = delete;
  WorkFolder& operator=(WorkFolder&&) = delete;
  ~WorkFolder();
  const std::filesystem::path& path() const { return path_; }
  bool kept() const { return keep_; }

 private:
  WorkFolder(std::filesystem::path path, bool keep) : path_(std::move(path)), keep_(keep) {}
  std::filesystem::path path_;
  bool keep_ = false;
};

}  // namespace ih
