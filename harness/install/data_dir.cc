#include "harness/install/data_dir.h"

#include <cstdlib>
#include <system_error>

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih::install {
namespace {

std::filesystem::path resolve() {
  if (const char* env = std::getenv("IH_DATA_DIR"); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "interop-harness";
    if (std::filesystem::is_directory(installed / "corpus", ec)) return installed;
  }
  return IH_SOURCE_DIR_PATH;
}

}  // namespace

std::filesystem::path data_dir() {
  static const std::filesystem::path root = resolve();
  return root;
}

std::filesystem::path corpus_dir() { return data_dir() / "corpus"; }

std::filesystem::path adapter_dir() { return data_dir() / "harness" / "megatron" / "adapter"; }

}  // namespace ih::install
