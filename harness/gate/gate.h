// The gate: pinned cases, built-in scenarios, the property suite and differential checks run against
// one Implementation, each ending in a typed Outcome, with progress lines and a summary table. The
// same checks judge the reference, a planted mutant or a real Megatron.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "harness/gate/real_roundtrip_runner.h"
#include "properties/cases.h"
#include "seam/implementation.h"
#include "seam/outcome.h"
#include "seam/repro_token.h"

namespace ih::gate {

/// One way a check's invariant did not hold, typed: a known finding is matched on `kind` and `key`,
/// the report shows `text`.
struct Violation {
  std::string kind;  // e.g. "load_refused/global_shape_mismatch", "rows_misplaced", "order_failed"
  std::string key;   // what it concerns: a checkpoint key, a tensor, a load order, a mixer and its shapes
  std::string text;  // the failure line, with its case
};
using Violations = std::vector<Violation>;

/// What one check concluded.
struct CheckAnswer {
  Outcome outcome = Outcome::passed;
  std::string detail;                    // the first disagreement, or why there is no verdict
  std::string minimal_case;              // the smallest input that shows it (properties: the shrunk case)
  std::optional<ReproToken> case_token;  // a token naming exactly the failing case (properties: rc=...)
  std::optional<props::GtpCase> layout;  // the failing in_proj layout, drawn in the reports
  std::string note;                      // how the check was limited on this target (printed with any outcome)
  Violations violations;                 // a typed check's failure, one per line of `detail`; a failed property's one
};

/// One named check. `name` is stable: tokens and known findings refer to it, never to a position.
struct Check {
  std::string group;
  std::string name;
  std::function<CheckAnswer(Implementation&)> run;

  /// A check that answers "" when it holds, else what went wrong; an error answer is typed by its
  /// kind (unsupported: not run; timeout; harness error; anything else: a finding).
  static Check simple(std::string group, std::string name, std::function<Result<std::string>(Implementation&)> body);
  /// A check that answers the violations it found (none: it holds); errors as simple's.
  static Check typed(std::string group, std::string name, std::function<Result<Violations>(Implementation&)> body);
  /// "gate/<group>/<name>".
  std::string check_name() const { return gate_check_name(group, name); }
};

/// The answer of a simple check's result.
CheckAnswer answer_of(const Result<std::string>& result);

struct CheckResult {
  std::string group;
  std::string name;
  CheckAnswer answer;
  ReproToken token;                          // replays this check (or, for properties, its failing case)
  std::optional<std::string> known_finding;  // the reason of the pinned finding this failure matches
  double seconds = 0;
  bool never_ran = false;  // a NOT RUN check that --require-all turned into a failure: nothing to replay
};

/// Whether `r` has a case to replay (a REPRO line): it ran and has no clean verdict.
bool has_repro(const CheckResult& r);

/// The counts behind a verdict, e.g. "(2 failed, 56 passed, 15 not run, 5 known findings)": every
/// outcome that occurred (passed always), and the passed checks whose pinned finding is stale.
std::string verdict_counts(const std::vector<CheckResult>& results);
/// The gate's last console line, e.g. "gate: PASSED (58 passed, 15 not run, 5 known findings)";
/// scripts read it by its start ("gate: PASSED", "gate: FAILED", "gate: NOTHING RAN", "gate: NO VERDICT").
std::string verdict_line(int exit_code, const std::vector<CheckResult>& results);
/// How many checks passed although a known finding is pinned for them (the finding is stale).
int stale_findings(const std::vector<CheckResult>& results);

/// Pinned layer-map cases from corpus/pinned/layer_maps.jsonl (expected answers from the spec).
Result<std::vector<Check>> pinned_layer_map_checks(const std::string& corpus_dir);
/// GPT->Hybrid retarget scenarios over all ranks of built-in layouts (spec 2.9).
std::vector<Check> retarget_scenario_checks();

/// Reference vs target on generated inputs (meaningful when the target is not the reference).
std::vector<Check> differential_checks();
/// Split factory chunks, Megatron's validation verdicts and FSDP trees, reference vs target.
std::vector<Check> layout_differential_checks();
/// Spec invariants Megatron is known to break (docs/megatron-findings.md), for every target; group
/// "spec invariants", stable names: optimizer_resume_gtp_to_no_gtp and optimizer_resume_no_gtp_to_gtp (R1),
/// optimizer_resume_tp2_gtp_change, optimizer_resume_tp_change and gtp_linear_resume_tp2_gtp_change (R2),
/// optimizer_resume_tp1_gtp_change (holds), fresh_in_proj_fits_parameter (B),
/// load_orders_agree_all_padding (C), single_expert_objects_load (A).
std::vector<Check> spec_invariant_checks();
/// The gather-design GTP save path (spec 4.5) against the reference on fixed layouts; group "gtp-gather":
/// gather_pieces, gather_merge, gather_param_entry, all_padding_load (Megatron's own serialization.load:
/// NOT RUN on the reference).
std::vector<Check> gtp_gather_checks();

/// Group "real-roundtrips": one check per scenario and direction, named <scenario>_<A>_to_<B>. Wrong
/// elements are the violation `elements_wrong <scenario>`; a refusal is `roundtrip_failed <scenario> in <the Megatron
/// function it raised in>`, beside them where it came after the loaded elements were verified; a scenario that
/// could not run is NOT RUN.
std::vector<Check> real_roundtrip_checks(const std::vector<std::string>& scenarios,
                                         const std::vector<std::pair<std::int64_t, std::int64_t>>& directions,
                                         RealRoundTripRunner runner);
/// Group "real-roundtrip-cross" (a change against its base, gate --base-megatron-path): every real scenario and
/// direction saved by BASE and loaded by NEW (`base-to-new_<scenario>_<A>_to_<B>`, run by `base_to_new`) and saved
/// by NEW and loaded by BASE (`new-to-base_...`), judged as the real round trips are.
std::vector<Check> real_roundtrip_cross_checks(const std::vector<std::string>& scenarios,
                                               const std::vector<std::pair<std::int64_t, std::int64_t>>& directions,
                                               RealRoundTripRunner base_to_new, RealRoundTripRunner new_to_base);
/// Generated configurations the model_dump group adds to its curated ones by default (gate --model-dumps).
inline constexpr std::int64_t kGeneratedModelDumps = 3;
/// Real versus synthetic (issue 17), group "model_dump", for every target: one check per curated
/// configuration (stable names, e.g. gpt_moe_e4_ep2, hybrid_virtual_stages) and per generated one
/// (generated_0 .. generated_<generated - 1>, drawn from `seed`; the first ones do not depend on
/// `generated`), the target's model_state_dict of each listed rank against the
/// reference's (models/model_dump_compare.h); typed violations `differs` (key "rank R") and
/// `stale_explanation` (key: the rule of docs/spec-addendum.md I that no longer fires).
std::vector<Check> model_dump_checks(std::uint64_t seed, std::int64_t generated);

/// Refuses two checks with one name: a token must name exactly one check.
Result<std::vector<Check>> with_unique_names(std::vector<Check> checks);

/// One known finding (corpus/findings/<name>.finding): a `token:` line naming the check, target and
/// mutant, a one-line `reason:`, and `violation: <kind> <key>` lines, the typed violations the failure
/// must be (a typed check's, or a property's: `<kind> spec=<spec case>` or `<kind> generated`); a check
/// without typed violations (a simple check) is pinned by `expect:` lines, texts its failure must show.
struct KnownFinding {
  PinnedCase pin;
  std::set<std::pair<std::string, std::string>> violations;  // (kind, key): exactly the failure's
  std::vector<std::string>
      expect;  // simple checks: every line of the failure's detail contains one; each is in some line
  std::string file;
  /// Whether `answer` is exactly this finding; else why not.
  std::optional<std::string> mismatch(const CheckAnswer& answer) const;
};

/// Known findings: pinned failures of a target, each with its reason.
struct KnownFindings {
  std::vector<KnownFinding> findings;
  /// The finding pinned for `token`'s check on `token`'s target, if any: a pin without a mutant is
  /// the unmutated target's finding and holds under any mutant that fails exactly the same way (its
  /// violation: or expect: lines); a pin with a mutant matches only that mutant. Likewise a pin with a candidate
  /// design (candidate=) matches only runs of that candidate; one without holds under any candidate. A pin with a
  /// Megatron release (megatron-version=, a finding of that release, fixed since) matches only that release and
  /// wins over a pin of the same check without one.
  const KnownFinding* match(const ReproToken& token) const;
};
Result<KnownFindings> load_known_findings(const std::string& corpus_dir);

/// A check's verdict word, as its progress line ends: "ok", "ok (known finding no longer reproduces)", "FAILED",
/// "NOT RUN", "known finding", "HARNESS ERROR", "TIMEOUT".
std::string progress_word(const CheckResult& r);

/// Runs the checks, printing "INFO: [i/n] group: name ... <outcome>" to `progress`. `base` carries
/// the target and budget options every token of this run gets; `before_each` hears of each check before it runs
/// (gate --coverage names the check the processes record under).
std::vector<CheckResult> run_checks(Implementation& target, const std::vector<Check>& checks, const ReproToken& base,
                                    const KnownFindings& known, std::ostream& progress,
                                    const std::function<void(const Check&)>& before_each = {});
/// The verdicts of a gate whose target does not import (Megatron's own module raised at import, `why`): the check
/// gate/megatron/imports FAILED (nothing to replay but the gate) and every check NOT RUN for that reason.
std::vector<CheckResult> results_without_target(const std::vector<Check>& checks, const ReproToken& base,
                                                const std::string& why);
/// A table of groups with counts per outcome, then every failure's detail and every NOT RUN reason.
std::string summary_table(const std::vector<CheckResult>& results);

}  // namespace ih::gate
