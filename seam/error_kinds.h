// The error kinds of the seam and the harness around it, and the one naming function for every kind.
// The reference model never produces these: they say that no answer came (the implementation lacks
// the operation, a subprocess or rank did not answer in time, the harness itself broke), not what the
// model concluded; description_disagrees, the one verdict among them, says the implementation's own description
// of its state is not the reference's. Header-only, so the codec and the subprocess layer can name them without linking
// the seam.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "models/result.h"

namespace ih {

namespace seam_kind {
// The implementation cannot answer this operation (a check that needs it is not run).
inline constexpr ErrorKind unsupported{kFirstOuterErrorKind};
// A subprocess or rank did not answer in time.
inline constexpr ErrorKind timeout{kFirstOuterErrorKind + 1};
// The harness itself failed (a subprocess died, a protocol broke).
inline constexpr ErrorKind harness_error{kFirstOuterErrorKind + 2};
// The implementation describes its own state otherwise than the reference lays it out (a real model's pieces
// of a split factory, two main replicas of one chunk): a verdict on the implementation (a failed check naming
// the difference), never a harness fault.
inline constexpr ErrorKind description_disagrees{kFirstOuterErrorKind + 3};
// The implementation's own code raised while it was imported (a Megatron tree whose module raises at import,
// not a missing dependency of the environment): a verdict on the implementation, every check left without one.
inline constexpr ErrorKind does_not_import{kFirstOuterErrorKind + 4};
}  // namespace seam_kind

/// The words that start every message of an implementation whose own code raised at import (does_not_import, and
/// the Megatron adapter's failures of an operation whose module did not import: docs/adapter-protocol.md).
inline constexpr std::string_view kDoesNotImport = "Megatron does not import";

/// True for the kinds that mean no answer came (the operation is missing, a timeout, a harness fault):
/// a check that meets one has no verdict and passes the error on (outcome_of_error, seam/outcome.h)
/// instead of comparing it with the reference's answer as if it were one.
inline bool is_no_answer(ErrorKind kind) {
  return kind == seam_kind::unsupported || kind == seam_kind::timeout || kind == seam_kind::harness_error;
}

/// The stable snake_case name of any kind, the model's or the seam's: the JSON "kind" string and the
/// <kind> of `ERROR: <kind>: ...` (docs/cli.md). "unknown" for a value nobody declared.
inline std::string_view to_string(ErrorKind kind) {
  if (const std::string_view name = model_kind_name(kind); !name.empty()) return name;
  if (kind == seam_kind::unsupported) return "unsupported";
  if (kind == seam_kind::timeout) return "timeout";
  if (kind == seam_kind::harness_error) return "harness_error";
  if (kind == seam_kind::description_disagrees) return "description_disagrees";
  if (kind == seam_kind::does_not_import) return "does_not_import";
  return "unknown";
}

/// Every declared kind, the model's first.
inline std::vector<ErrorKind> all_error_kinds() {
  std::vector<ErrorKind> out;
  for (std::uint16_t k = 0; k < kFirstOuterErrorKind; ++k)
    if (!model_kind_name(ErrorKind{k}).empty()) out.push_back(ErrorKind{k});
  out.insert(out.end(), {seam_kind::unsupported, seam_kind::timeout, seam_kind::harness_error,
                         seam_kind::description_disagrees, seam_kind::does_not_import});
  return out;
}

/// The kind whose name is `name` (the inverse of to_string), or nullopt.
inline std::optional<ErrorKind> error_kind_from_name(std::string_view name) {
  for (const ErrorKind kind : all_error_kinds())
    if (to_string(kind) == name) return kind;
  return std::nullopt;
}

}  // namespace ih
