#include "harness/cli/gate_base.h"

#include <openssl/evp.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "codec/json_codec.h"
#include "harness/install/data_dir.h"
#include "harness/process/child_run.h"
#include "harness/process/run_scope.h"
#include "harness/report/gate_report.h"

namespace ih::cli {
namespace {

namespace fs = std::filesystem;

constexpr auto kGitTimeout = std::chrono::minutes(5);  // a worktree of Megatron-LM on a loaded 2-core machine
constexpr int kCacheFormat = 1;

Error invalid(const std::string& message) { return Error{ErrorKind::invalid_argument, message}; }

/// Runs `git args...`; its stdout lines, or an error of `kind` naming the command and git's own message.
Result<std::vector<std::string>> git(const std::vector<std::string>& args, ErrorKind kind) {
  std::vector<std::string> argv{"git"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> lines;
  IH_TRY_ASSIGN(outcome, run_child(argv, kGitTimeout, [&lines](const std::string& line) { lines.push_back(line); }));
  if (outcome.timed_out || outcome.signaled || outcome.exit_code != 0) {
    std::string command;
    for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
    std::string said = outcome.stderr_tail;
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    return Error{kind, "`" + command + "` failed" + (outcome.timed_out ? " (timed out)" : "") +
                           (said.empty() ? "" : ": " + said)};
  }
  return lines;
}

/// SHA-256 (OpenSSL's) of labelled parts: files' paths and bytes, option texts.
class Hasher {
 public:
  Hasher() : context_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr); }
  void add(std::string_view text) {
    const std::string size = std::to_string(text.size()) + ":";  // length-prefixed: parts cannot run together
    EVP_DigestUpdate(context_.get(), size.data(), size.size());
    EVP_DigestUpdate(context_.get(), text.data(), text.size());
  }
  Status add_file(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return invalid("cannot read " + file.string() + " to hash the base tree");
    add(std::string(std::istreambuf_iterator<char>(in), {}));
    return Ok{};
  }
  /// Every file under `root` (sorted by path relative to it; Python's byte-code caches left out: importing the
  /// tree writes them), and a symbolic link's target.
  Status add_tree(const fs::path& root) {
    std::vector<fs::path> files;
    std::error_code error;
    for (auto it = fs::recursive_directory_iterator(root, error); !error && it != fs::recursive_directory_iterator();
         it.increment(error)) {
      if (it->path().filename() == "__pycache__") {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_symlink() || (it->is_regular_file() && it->path().extension() != ".pyc")) files.push_back(it->path());
    }
    if (error) return invalid("cannot list " + root.string() + " to hash it: " + error.message());
    std::sort(files.begin(), files.end());
    add(root.filename().string());
    for (const fs::path& file : files) {
      add(fs::relative(file, root).string());
      if (fs::is_symlink(file))
        add("link " + fs::read_symlink(file).string());
      else
        IH_TRY_STATUS(add_file(file));
    }
    return Ok{};
  }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int size = 0;
    EVP_DigestFinal_ex(context_.get(), digest.data(), &size);
    std::string out;
    char byte[3];
    for (unsigned int i = 0; i < size; ++i) std::snprintf(byte, sizeof byte, "%02x", digest[i]), out += byte;
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> context_;
};

/// The cache key of a base: its tree's megatron/, the harness that judges it (this executable, its adapter and
/// corpus) and the options that change the checks or their verdicts.
Result<std::string> base_cache_key(const std::string& tree, const std::string& corpus, const std::string& options) {
  Hasher hash;
  hash.add("interop-harness gate base " + std::to_string(kCacheFormat));
  hash.add(options);
  IH_TRY_STATUS(hash.add_tree(fs::path(tree) / "megatron"));
  IH_TRY_STATUS(hash.add_tree(install::adapter_dir()));
  IH_TRY_STATUS(hash.add_tree(corpus));
  IH_TRY_STATUS(hash.add_file("/proc/self/exe"));
  return hash.hex();
}

fs::path cache_folder(const BaseFlags& flags) {
  if (flags.base_cache) return *flags.base_cache;
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "interop-harness" / "gate-base";
}

}  // namespace

namespace {

json::Json cache_json(const BaseVerdicts& base) {
  json::Json checks = json::Json::array();
  for (const gate::CheckResult& r : base.results) {
    json::Json violations = json::Json::array();
    for (const gate::Violation& v : r.answer.violations) violations.push_back({v.kind, v.key, v.text});
    json::Json check{{"group", r.group},
                     {"name", r.name},
                     {"outcome", std::string(to_string(r.answer.outcome))},
                     {"detail", r.answer.detail},
                     {"violations", violations}};
    if (r.known_finding) check["known_finding"] = *r.known_finding;
    checks.push_back(std::move(check));
  }
  return {{"format", kCacheFormat}, {"target", base.target}, {"exit_code", base.exit_code}, {"checks", checks}};
}

Result<Outcome> outcome_named(const std::string& word) {
  for (Outcome o : {Outcome::passed, Outcome::failed, Outcome::not_run, Outcome::known_finding, Outcome::harness_error,
                    Outcome::timeout})
    if (to_string(o) == word) return o;
  return invalid("unknown outcome '" + word + "'");
}

/// A cached base read back; any damage is an error (the caller then runs the base again).
Result<BaseVerdicts> from_cache_json(const json::Json& cached) {
  try {
    if (cached.at("format").get<int>() != kCacheFormat) return invalid("another cache format");
    BaseVerdicts base{cached.at("target").get<std::string>(), cached.at("exit_code").get<int>(), {}, "", true};
    for (const json::Json& c : cached.at("checks")) {
      gate::CheckResult r;
      r.group = c.at("group").get<std::string>();
      r.name = c.at("name").get<std::string>();
      IH_TRY_ASSIGN(outcome, outcome_named(c.at("outcome").get<std::string>()));
      r.answer.outcome = outcome;
      r.answer.detail = c.at("detail").get<std::string>();
      for (const json::Json& v : c.at("violations"))
        r.answer.violations.push_back(
            {v.at(0).get<std::string>(), v.at(1).get<std::string>(), v.at(2).get<std::string>()});
      if (c.contains("known_finding")) r.known_finding = c.at("known_finding").get<std::string>();
      base.results.push_back(std::move(r));
    }
    return base;
  } catch (const std::exception& e) {
    return invalid(std::string("not a cached base: ") + e.what());
  }
}

/// The cached base of `key`, if a readable one is there (a damaged one is said and ignored).
std::optional<BaseVerdicts> read_cached(const fs::path& file, std::ostream& progress) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  auto parsed = json::parse(text);
  auto base = parsed.ok() ? from_cache_json(*parsed) : Result<BaseVerdicts>(parsed.error());
  if (base.ok()) return *base;
  progress << "NOTE: ignoring the damaged cached base " << file.string() << ": " << base.error().message << "\n";
  return std::nullopt;
}

/// Stores a base whose every check came to a verdict or NOT RUN (a harness error or timeout may not recur).
void store_cached(const fs::path& file, const BaseVerdicts& base, std::ostream& progress) {
  for (const gate::CheckResult& r : base.results)
    if (r.answer.outcome == Outcome::harness_error || r.answer.outcome == Outcome::timeout) {
      progress << "NOTE: the base gave no verdict on " << r.group << ": " << r.name << "; not cached\n";
      return;
    }
  std::error_code error;
  fs::create_directories(file.parent_path(), error);
  const Status written = error
                             ? Status(invalid("cannot create " + file.parent_path().string() + ": " + error.message()))
                             : report::write_file_atomically(file.string(), json::dump(cache_json(base)) + "\n");
  if (!written.ok()) progress << "NOTE: the base's verdicts were not cached: " << written.error().message << "\n";
}

/// The --base-ref part of a plan: NEW's git checkout and the commit REF names there.
Status plan_base_ref(BasePlan& plan, const std::string& ref, const std::optional<std::string>& new_tree) {
  if (!new_tree)
    return invalid("--base-ref needs --megatron-path: a git checkout of Megatron-LM in which REF names the base");
  if (ref.empty() || ref[0] == '-') return invalid("--base-ref '" + ref + "' is no git revision");
  auto top = git({"-C", *new_tree, "rev-parse", "--show-toplevel"}, ErrorKind::invalid_argument);
  if (!top.ok() || top->empty())
    return invalid("--base-ref needs --megatron-path to be a git checkout; " + *new_tree + " is none");
  auto commit = git({"-C", *new_tree, "rev-parse", "--verify", "--quiet", "--end-of-options", ref + "^{commit}"},
                    ErrorKind::invalid_argument);
  if (!commit.ok() || commit->empty())
    return invalid("--base-ref '" + ref + "' names no commit of the git checkout at " + top->front());
  plan.repository = top->front();
  plan.inside = fs::relative(fs::canonical(*new_tree), fs::canonical(plan.repository)).string();
  plan.commit = commit->front();
  plan.spec.megatron_path.reset();  // the worktree's, once check_out_base made it
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<BaseWorktree>> BaseWorktree::add(const std::string& repository, const std::string& commit) {
  std::string pattern = (fs::path(temp_dir()) / "ih-base-XXXXXX").string();
  if (!mkdtemp(pattern.data()))
    return Error{seam_kind::harness_error, "cannot make a folder for the base worktree under " + temp_dir()};
  std::unique_ptr<BaseWorktree> made(new BaseWorktree(repository, pattern));
  IH_TRY_STATUS(git({"-C", repository, "worktree", "prune"}, seam_kind::harness_error));
  IH_TRY_STATUS(git({"-C", repository, "worktree", "add", "--detach", made->path(), commit}, seam_kind::harness_error));
  return made;
}

BaseWorktree::BaseWorktree(std::string repository, std::string folder)
    : repository_(std::move(repository)), folder_(std::move(folder)) {}

BaseWorktree::~BaseWorktree() {
  (void)git({"-C", repository_, "worktree", "remove", "--force", path()}, seam_kind::harness_error);
  std::error_code ignored;
  fs::remove_all(folder_, ignored);
  (void)git({"-C", repository_, "worktree", "prune"}, seam_kind::harness_error);
}

std::string BaseWorktree::path() const { return (fs::path(folder_) / "tree").string(); }

Result<std::unique_ptr<BaseWorktree>> check_out_base(BasePlan& plan, std::ostream& progress) {
  if (!plan.commit) return std::unique_ptr<BaseWorktree>();
  IH_TRY_ASSIGN(worktree, BaseWorktree::add(plan.repository, *plan.commit));
  const fs::path tree = plan.inside == "." ? fs::path(worktree->path()) : fs::path(worktree->path()) / plan.inside;
  TargetSpec spec = plan.spec;
  spec.megatron_path = tree.lexically_normal().string();
  if (!validated(spec).ok())  // e.g. NEW is a folder git ignores inside another project's checkout
    return invalid("--base-ref " + *plan.commit + " of " + plan.repository + " has no megatron/core/__init__.py at " +
                   plan.inside);
  plan.spec = std::move(spec);
  progress << "INFO: base: a worktree of " << *plan.commit << " at " << worktree->path() << "\n" << std::flush;
  return worktree;
}

Result<std::optional<BasePlan>> base_plan_of(const TargetSpec& spec, const BaseFlags& flags) {
  const int named = spec.base_megatron_path.has_value() + flags.base_ref.has_value() + flags.base_without_mutant;
  if (named == 0) {
    if (flags.base_cache || flags.no_base_cache)
      return invalid("--base-cache and --no-base-cache need a base (--base-megatron-path or --base-ref)");
    return std::optional<BasePlan>();
  }
  if (named > 1) return invalid("name one base: --base-megatron-path, --base-ref or --base-without-mutant");
  BasePlan plan{spec, std::nullopt, "", ""};
  plan.spec.mutant.reset();
  plan.spec.base_megatron_path.reset();
  if (flags.base_without_mutant) return std::optional<BasePlan>(plan);  // no --mutant: the target itself
  if (spec.target != TargetKind::megatron)
    return invalid("--base-megatron-path and --base-ref apply to --target megatron only");
  if (flags.base_ref) {
    IH_TRY_STATUS(plan_base_ref(plan, *flags.base_ref, spec.megatron_path));
    return std::optional<BasePlan>(plan);
  }
  if (!spec.megatron_path) return invalid("--base-megatron-path needs --target megatron --megatron-path NEW");
  plan.spec.megatron_path = *spec.base_megatron_path;
  auto valid = validated(plan.spec);
  if (!valid.ok())
    return invalid("--base-megatron-path " + *spec.base_megatron_path +
                   " holds no megatron/core/__init__.py (not a Megatron-LM checkout)");
  plan.spec = *valid;
  return std::optional<BasePlan>(plan);
}

Result<BaseVerdicts> base_verdicts(const BasePlan& plan, const BaseFlags& flags, const std::string& corpus,
                                   const std::string& cache_options, const GateSideRunner& run,
                                   std::ostream& progress) {
  const TargetSpec& spec = plan.spec;
  if (plan.commit && !spec.megatron_path)
    return Error{seam_kind::harness_error, "the base " + *plan.commit + " was not checked out before its gate"};
  const bool cached = !flags.no_base_cache && spec.target == TargetKind::megatron && spec.megatron_path;
  std::string key;
  fs::path file;
  if (cached) {
    IH_TRY_ASSIGN(hashed, base_cache_key(*spec.megatron_path, corpus, cache_options));
    key = hashed;
    file = cache_folder(flags) / (key + ".json");
    if (auto hit = read_cached(file, progress)) {
      hit->tree_hash = key;
      progress << "INFO: base " << hit->target << ": its verdicts from the cache " << file.string() << "\n";
      return *hit;
    }
  }
  progress << "INFO: gating the base first\n";
  IH_TRY_ASSIGN(verdicts, run(spec, progress));
  verdicts.tree_hash = key;
  if (cached) store_cached(file, verdicts, progress);
  return verdicts;
}

}  // namespace ih::cli
