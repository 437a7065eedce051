// Output places (the files and folders a command writes) are checked before any work starts, so a
// long run never ends with its verdict lost to a path it could not write (docs/cli.md, "Output places").
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "models/result.h"

namespace ih::cli {

/// A file the command will write: refused (invalid_argument, naming `flag`, the path and why) when
/// it is '', a folder, under a file, in a folder that is missing or cannot be written, or a device
/// that refuses writes (/dev/full). The file itself is not created.
Status check_output_file(const std::string& flag, const std::string& path);

/// A folder the command will write into, created when missing (its parent never is): refused when it
/// is '', a file or device, under a file, in a folder that does not exist, or a place where nothing can
/// be written.
Status check_output_folder(const std::string& flag, const std::string& path);

/// check_output_folder, then removes the files in it whose names `is_own_file` accepts (what an
/// earlier run of the same writer left), so old pictures never sit beside a new summary. Other
/// files are left alone.
Status prepare_output_folder(const std::string& flag, const std::string& path,
                             const std::function<bool(std::string_view)>& is_own_file);

}  // namespace ih::cli
