#include "harness/megatron/candidates.h"

namespace ih {

std::string_view to_string(Candidate candidate) {
  for (const auto& [c, word] : kCandidateNames)
    if (c == candidate) return word;
  return "";
}

Result<Candidate> parse_candidate(std::string_view word) {
  std::string known;
  for (const auto& [candidate, name] : kCandidateNames) {
    if (word == name) return candidate;
    known += (known.empty() ? "" : ", ") + std::string(name);
  }
  return make_error(ErrorKind::invalid_argument,
                    "unknown --candidate '" + std::string(word) + "' (known: " + known + ")");
}

std::string candidate_label(Candidate candidate) {
  return "candidate " + std::string(to_string(candidate)) + " design, not Megatron's code";
}

}  // namespace ih
