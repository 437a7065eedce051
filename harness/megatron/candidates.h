// The candidate designs of pending Megatron changes the adapter can apply (adapter/candidates/, `--candidate`),
// named once: every command reads the word into a Candidate at its edge and passes the enum on.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "seam/error_kinds.h"

namespace ih {

/// none: the checkout's own code; shard_split: the harness's candidate of the pending GTP shard-split save.
enum class Candidate { none, shard_split };
/// The one name table of the candidates a command line names (none is no word).
inline constexpr std::array<std::pair<Candidate, const char*>, 1> kCandidateNames = {
    {{Candidate::shard_split, "shard-split"}}};

/// The command-line and token word of a candidate ("" for none).
std::string_view to_string(Candidate candidate);
/// The candidate a word names; anything else is invalid_argument naming the word and the known candidates.
Result<Candidate> parse_candidate(std::string_view word);
/// How every report names a run with `candidate`: "candidate shard-split design, not Megatron's code".
std::string candidate_label(Candidate candidate);

}  // namespace ih
