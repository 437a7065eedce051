// Errors as values for the reference model: every failure names its kind and the offending input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ih {

/// One distinct code per check of the spec, so tests can assert *which* check fired. The underlying
/// type is fixed so that the layers above the model can declare kinds of their own, from
/// kFirstOuterErrorKind up; the model never produces those and does not name them.
enum class ErrorKind : std::uint16_t {
  // Pattern grammar and GPT layer maps (spec 1, 2.2). Names are the CLI's JSON "kind" strings.
  invalid_symbol,
  mtp_not_identical,
  attention_with_mla_dsa,
  mtp_present,
  empty_pattern,
  untranslatable_layer_types,
  mixed_mlp_kinds,
  unbalanced_attention_mlp,
  unknown_layer_symbol,  // Python KeyError in get_layer_maps_from_layer_type_list (spec 1.7)
  // Pipeline segment selection (spec 1.6).
  pipe_with_first_last,
  vpp_without_pipes,
  middle_not_divisible,
  layers_not_divisible_by_pp,
  segments_not_divisible_by_pp,
  segment_out_of_range,
  // Retargeting (spec 2.4-2.7).
  unknown_hybrid_layer,
  uneven_prepend,  // Python TypeError: prepending to a tensor without axis_fragmentations
  // Data model (spec 3).
  metadata_integrity,
  invalid_rank_offsets,
  narrow_misaligned,
  merge_key_mismatch,
  merge_list_length,
  merge_duplicate_leaf,
  // Layouts (spec 4).
  split_sections_mismatch,
  invalid_layout_parameter,   // a zero/negative size or out-of-range rank; the message names the parameter
  gtp_indivisible,            // p = 0 and the rows are not divisible by the GTP size (Python assert)
  gtp_group_too_large,        // p = 0 and more GTP ranks than rows: a shard would have no rows
  load_not_covered,           // a requested shard is not fully covered by stored chunks
  sharding_assertion,         // validate_sharding_integrity's asserts (AssertionError, spec 3.7 step 4)
  invalid_sharding_pattern,   // "Invalid sharding pattern validation. Errors: ..." (spec 3.7 step 6)
  gtp_replica_group_unknown,  // GTP writer election without a stamped group or parallel_state (RuntimeError)
  global_shape_mismatch,      // a load request's global shape differs from the stored one (CheckpointingException)
  strict_load_keys,           // StrictHandling raise_*: unexpected or missing keys at load (CheckpointingException)
  // Generic input problems.
  invalid_argument,
  overflow,
  bad_json,
  // The model's own depth limit: the reference does not go this deep (e.g. element reads of column slices).
  not_modelled,
};

/// Kinds from this value up belong to the layers above the model (seam/error_kinds.h).
inline constexpr std::uint16_t kFirstOuterErrorKind = 256;

/// The stable snake_case name of one of the model's kinds (the CLI's JSON "kind"); "" for any other
/// value. Code above the model names every kind with to_string (seam/error_kinds.h).
std::string_view model_kind_name(ErrorKind kind);

struct Error {
  ErrorKind kind;
  std::string message;

  /// Adds context while keeping the original message (rule 4 of the style guide).
  Error with_context(std::string_view context) const { return Error{kind, std::string(context) + ": " + message}; }
};

/// A value or an Error. Small on purpose: C++20 has no std::expected.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(state_); }
  T& value() & { return std::get<T>(state_); }
  T value() && { return std::get<T>(std::move(state_)); }  // by value: no dangling in range-for
  const Error& error() const { return std::get<Error>(state_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Error> state_;
};

/// Success carries nothing.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(ErrorKind kind, std::string message) { return Error{kind, std::move(message)}; }

}  // namespace ih

/// Propagates an error from an expression returning Result/Status; yields nothing.
#define IH_TRY_STATUS(expr)                          \
  do {                                               \
    auto ih_status_ = (expr);                        \
    if (!ih_status_.ok()) return ih_status_.error(); \
  } while (0)

/// Evaluates a Result expression, returns its error, else binds the value to `var`.
#define IH_TRY_ASSIGN(var, expr)                         \
  auto var##_result_ = (expr);                           \
  if (!var##_result_.ok()) return var##_result_.error(); \
  auto var = std::move(var##_result_).value()
