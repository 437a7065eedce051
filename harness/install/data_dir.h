// Where the harness finds its data (the pinned corpus, the Python adapter, ci/install-megatron.sh)
// at run time, so that an installed or moved binary works from any folder.
#pragma once

#include <filesystem>

namespace ih::install {

/// The data root, first match wins:
///   1. $IH_DATA_DIR, when set and non-empty;
///   2. <folder of the executable>/../share/interop-harness, when it holds corpus/ (cmake --install);
///   3. the source tree the binary was built from (a build tree's binary).
/// Below the root the layout is the source tree's: corpus/, harness/megatron/adapter/, ci/.
std::filesystem::path data_dir();

/// data_dir() / "corpus": pinned cases (regressions/, pinned/).
std::filesystem::path corpus_dir();
/// data_dir() / "harness/megatron/adapter": adapter.py, roundtrip_world.py and the rest of the adapter.
std::filesystem::path adapter_dir();

}  // namespace ih::install
