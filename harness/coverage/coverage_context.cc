#include "harness/coverage/coverage_context.h"

#include <cstdlib>

namespace ih::coverage {
namespace {

// The names coverage_run.py reads (one place each side).
constexpr const char* kDirVariable = "IH_COVERAGE_DIR";
constexpr const char* kSourceVariable = "IH_COVERAGE_SOURCE";
constexpr const char* kContextVariable = "IH_COVERAGE_CONTEXT";
// coverage.py's sys.monitoring core (Python 3.12+): a fraction of the tracing core's overhead.
constexpr const char* kCoreVariable = "COVERAGE_CORE";
constexpr const char* kCore = "sysmon";

std::optional<Collection>& enabled_collection() {
  static std::optional<Collection> value;
  return value;
}

std::string& running_check() {
  static std::string value;
  return value;
}

}  // namespace

void enable(const Collection& collection) {
  enabled_collection() = collection;
  setenv(kDirVariable, collection.data_dir.c_str(), 1);
  setenv(kSourceVariable, collection.source.c_str(), 1);
  setenv(kCoreVariable, kCore, 1);
}

void disable() {
  enabled_collection().reset();
  for (const char* variable : {kDirVariable, kSourceVariable, kContextVariable}) unsetenv(variable);
}

const std::optional<Collection>& collection() { return enabled_collection(); }

void set_context(const std::string& check) {
  running_check() = check;
  if (enabled_collection()) setenv(kContextVariable, check.c_str(), 1);
}

const std::string& context() { return running_check(); }

std::vector<std::string> rank_environment(const std::string& context_template) {
  const auto& on = enabled_collection();
  if (!on) return {};
  return {std::string(kDirVariable) + "=" + on->data_dir.string(),
          std::string(kSourceVariable) + "=" + on->source.string(), std::string(kCoreVariable) + "=" + kCore,
          std::string(kContextVariable) + "=" + context_template};
}

}  // namespace ih::coverage
