// Runs a mutation campaign: coverage -> lines -> cosmic-ray's mutants -> each in an overlay, judged by the
// checks that reach its line, run by the gate itself (`interop-harness gate --checks-from`) in a child
// process with a deadline: one adapter per overlay, so no mutated module outlives its mutant (each forked warm
// from the campaign's fork server, warm_adapters.h, importing Megatron afresh).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/mutate/mutate.h"

namespace ih::mutate {

struct CampaignOptions {
  std::string tree;                 // the Megatron-LM tree mutated (never edited)
  std::optional<std::string> base;  // a BASE tree: only the lines changed from it
  std::vector<std::string> globs;   // files, relative to the tree's root
  std::int64_t max_mutants = 20, seed = 1;
  std::optional<std::string> coverage_json;  // none: a `gate --coverage` run makes it
  bool whole_gate = false;                   // every mutant runs the whole gate (bench: selection's speedup)
  bool cold_adapters = false;                // no fork server: every adapter imports torch itself (bench, tests)
  std::string corpus;                        // corpus/ (mutation-equivalent/)
  std::string self;                          // the interop-harness executable
};

struct CampaignResult {
  std::vector<Mutant> mutants;
  std::int64_t positions = 0;  // cosmic-ray's positions on the lines to mutate
  std::int64_t lines = 0;      // lines to mutate
  double clean_seconds = 0;    // the clean tree's run of the checks
};

/// Runs the campaign, one progress line per mutant. Bad input (globs matching nothing covered, a bad
/// coverage JSON or equivalent pin) is invalid_argument; a tool that fails is harness_error.
Result<CampaignResult> run_campaign(const CampaignOptions& options, std::ostream& progress);

}  // namespace ih::mutate
