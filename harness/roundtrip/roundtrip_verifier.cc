#include "harness/roundtrip/roundtrip_verifier.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>

#include "codec/json_codec.h"
#include "harness/process/child_run.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif
#ifndef IH_BINARY_DIR_PATH
#define IH_BINARY_DIR_PATH "."
#endif

namespace ih {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// What the last configure found (harness/CMakeLists.txt writes it): "configured <torch>" or "missing: <why>".
std::string verifier_status(const fs::path& build) {
  std::ifstream in(build / "roundtrip-verifier.txt");
  std::string line;
  std::getline(in, line);
  return in ? line : "missing: " + (build / "roundtrip-verifier.txt").string() + " is absent (configure the build)";
}

}  // namespace

Result<fs::path> ensure_roundtrip_verifier(const std::function<void(const std::string&)>& progress) {
  const fs::path build = IH_BINARY_DIR_PATH;
  const fs::path exe = build / "bin" / "ih_roundtrip_verifier";
  const fs::path lock_path = build / ".ih_roundtrip_verifier.lock";
  const int lock = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0) return make_error(seam_kind::harness_error, "cannot open the build lock " + lock_path.string());
  flock(lock, LOCK_EX);  // one build at a time (parallel ctest runs)
  const auto release = [&] {
    flock(lock, LOCK_UN);
    close(lock);
  };
  // A venv installed after this build was configured: configure again, which finds it.
  if (verifier_status(build).rfind("configured ", 0) != 0) {
    progress("looking for the Megatron venv's LibTorch again: cmake -S " + std::string(IH_SOURCE_DIR_PATH) + " -B " +
             build.string());
    auto configured = run_child({"cmake", "-S", IH_SOURCE_DIR_PATH, "-B", build.string()}, std::chrono::seconds(300),
                                [](const std::string&) {});
    if (!configured.ok() || configured->timed_out || configured->exit_code != 0) {
      release();
      return make_error(seam_kind::harness_error, "re-configuring " + build.string() + " failed" +
                                                      (configured.ok() ? ":\n" + configured->stderr_tail : ""));
    }
    const std::string status = verifier_status(build);
    if (status.rfind("configured ", 0) != 0) {
      release();
      return make_error(seam_kind::unsupported, "the LibTorch verifier cannot be built: " + status);
    }
  }
  if (!fs::exists(exe))
    progress("building the LibTorch verifier (first use, about a minute): cmake --build " + build.string() +
             " --target ih_roundtrip_verifier");
  auto outcome = run_child({"cmake", "--build", build.string(), "--target", "ih_roundtrip_verifier"},
                           std::chrono::seconds(1200), [](const std::string&) {});
  release();
  if (!outcome.ok()) return outcome.error();
  if (outcome->timed_out || outcome->exit_code != 0 || !fs::exists(exe))
    return make_error(seam_kind::harness_error, "building ih_roundtrip_verifier failed:\n" + outcome->stderr_tail);
  return exe;
}

Status verify_scenario(const fs::path& verifier, const std::string& name, std::int64_t load_ranks,
                       const WorldRunOptions& o, bool refused_after_dump, ScenarioOutcome& r) {
  const fs::path dir = o.work / scenario_dir(name);
  IH_TRY_ASSIGN(
      v, run_child({verifier.string(), "--dir", dir.string(), "--ranks", std::to_string(load_ranks), "--save-result",
                    (o.work / "results" / "save_rank_0.json").string(), "--scenario", name, "--show", "8"},
                   std::chrono::seconds(o.world_timeout_s), [&](const std::string& line) {
                     auto parsed = json::parse(line);
                     if (parsed.ok() && parsed->is_object()) r.details["verifier"] = *parsed;
                   }));
  if (v.timed_out) {
    r.outcome = Outcome::timeout;
    r.problems.push_back("the verifier timed out");
    return Ok{};
  }
  const Json& vr = r.details.contains("verifier") ? r.details["verifier"] : Json::object();
  r.elements_verified = vr.value("elements_verified", std::int64_t{0});
  r.wrong_elements = vr.value("wrong_elements", std::int64_t{0});
  if (vr.contains("first"))
    for (const auto& line : vr["first"]) r.problems.push_back(line.get<std::string>());
  const bool cannot_verify = vr.contains("error"), verifier_broke = !vr.contains("ok") && v.exit_code != 0;
  if (cannot_verify) r.problems.push_back("cannot verify: " + vr["error"].value("message", std::string()));
  if (verifier_broke)
    r.problems.push_back("the verifier failed (exit " + std::to_string(v.exit_code) + "): " + v.stderr_tail);
  if (cannot_verify || verifier_broke)
    r.outcome = Outcome::harness_error;
  else if (vr.value("ok", false) && v.exit_code == 0 && r.elements_verified > 0 && !refused_after_dump)
    r.outcome = Outcome::passed;
  return Ok{};
}

}  // namespace ih
