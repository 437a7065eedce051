#include "harness/process/work_folder.h"

#include <stdlib.h>

#include "harness/process/run_scope.h"

namespace ih {

namespace fs = std::filesystem;

Result<WorkFolder> WorkFolder::make(const std::optional<std::string>& keep, const std::string& prefix) {
  if (keep) return WorkFolder(*keep, true);
  std::string templ = temp_dir() + "/" + prefix + "-XXXXXX";
  if (!mkdtemp(templ.data())) return make_error(seam_kind::harness_error, "cannot create a temporary folder " + templ);
  return WorkFolder(templ, false);
}

WorkFolder::~WorkFolder() {
  std::error_code ec;
  if (!keep_ && !path_.empty()) fs::remove_all(path_, ec);
}

}  // namespace ih
