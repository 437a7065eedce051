#include "harness/cli/output_places.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace ih::cli {
namespace {

namespace fs = std::filesystem;

Error refused(const std::string& flag, const std::string& path, const std::string& why) {
  return make_error(ErrorKind::invalid_argument, "--" + flag + " '" + path + "': " + why);
}

/// The nearest part of `path` (itself or a parent) that exists; "." for a relative path with none.
fs::path nearest_existing(const fs::path& path) {
  std::error_code ec;
  for (fs::path p = path; !p.empty(); p = p.parent_path()) {
    if (fs::exists(fs::symlink_status(p, ec)) || fs::exists(p, ec)) return p;
    if (p == p.parent_path()) break;
  }
  return ".";
}

/// The folder `folder` lies in ("." for a relative name alone); a trailing separator is not a level.
fs::path parent_folder(const fs::path& folder) {
  const fs::path parent = (folder.has_filename() ? folder : folder.parent_path()).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

/// Creates, writes one byte to and removes a file in `dir`: catches read-only mounts, missing
/// permissions and a full file system, which a permission check alone does not.
std::string probe_folder(const fs::path& dir) {
  std::string name = (dir / ".interop-harness-probe-XXXXXX").string();
  const int fd = mkstemp(name.data());
  if (fd < 0) return std::string("cannot create a file there: ") + std::strerror(errno);
  const bool wrote = ::write(fd, "\n", 1) == 1;
  const int write_errno = errno;
  const bool closed = ::close(fd) == 0;
  ::unlink(name.c_str());
  if (!wrote || !closed) return std::string("cannot write there: ") + std::strerror(wrote ? errno : write_errno);
  return "";
}

/// Why `dir` (an existing path) cannot hold new files, or "".
std::string folder_problem(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "'" + dir.string() + "' is a file, not a folder";
  return probe_folder(dir);
}

}  // namespace

Status check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return refused(flag, path, "an empty path names no file");
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::is_directory(status)) return refused(flag, path, "is a folder; a file is expected here");
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    // A device or pipe: try one byte without blocking (/dev/null takes it, /dev/full refuses).
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return refused(flag, path, std::string("cannot open for writing: ") + std::strerror(errno));
    const bool wrote = !fs::is_character_file(status) || ::write(fd, "\n", 1) == 1;
    const int write_errno = errno;
    ::close(fd);
    if (!wrote) return refused(flag, path, std::string("cannot write: ") + std::strerror(write_errno));
    return Ok{};
  }
  if (fs::exists(status)) {
    if (::access(path.c_str(), W_OK) != 0)
      return refused(flag, path, std::string("cannot write: ") + std::strerror(errno));
    const std::string problem =
        probe_folder(fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path());
    return problem.empty() ? Status(Ok{}) : refused(flag, path, problem);
  }
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  const fs::path existing = nearest_existing(parent);
  if (!fs::is_directory(existing, ec))
    return refused(flag, path, "is under '" + existing.string() + "', which is a file, not a folder");
  if (existing != parent)
    return refused(flag, path, "the folder '" + parent.string() + "' does not exist (create it first)");
  const std::string problem = probe_folder(parent);
  return problem.empty() ? Status(Ok{}) : refused(flag, path, problem);
}

Status check_output_folder(const std::string& flag, const std::string& path) {
  if (path.empty()) return refused(flag, path, "an empty path names no folder");
  std::error_code ec;
  const fs::path folder(path);
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
    return refused(flag, path, "is a file or device, not a folder");
  const fs::path existing = nearest_existing(folder);
  if (!fs::is_directory(existing, ec))
    return refused(flag, path, "is under '" + existing.string() + "', which is a file, not a folder");
  // The folder itself is made when missing, never its parents: a typo in a parent must not grow a tree.
  const fs::path parent = parent_folder(folder);
  if (!fs::exists(folder, ec) && !fs::is_directory(parent, ec))
    return refused(flag, path, "the folder '" + parent.string() + "' does not exist (create it first)");
  if (const std::string problem = folder_problem(existing); !problem.empty()) return refused(flag, path, problem);
  fs::create_directory(folder, ec);
  if (ec) return refused(flag, path, "cannot create the folder: " + ec.message());
  if (const std::string problem = folder_problem(folder); !problem.empty()) return refused(flag, path, problem);
  return Ok{};
}

Status prepare_output_folder(const std::string& flag, const std::string& path,
                             const std::function<bool(std::string_view)>& is_own_file) {
  IH_TRY_STATUS(check_output_folder(flag, path));
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_own_file(name) || entry.is_directory(ec)) continue;
    if (!fs::remove(entry.path(), ec) || ec)
      return refused(flag, path, "cannot remove the earlier run's '" + name + "': " + ec.message());
  }
  if (ec) return refused(flag, path, "cannot list the folder: " + ec.message());
  return Ok{};
}

}  // namespace ih::cli
