#include "models/gdp_layout.h"

#include "models/checked_math.h"

namespace ih {

Status require_positive(std::int64_t value, const std::string& parameter) {
  if (value <= 0)
    return make_error(ErrorKind::invalid_layout_parameter,
                      parameter + " must be positive, got " + std::to_string(value));
  return Ok{};
}

Result<std::int64_t> SplitLayout::total_rows() const {
  std::int64_t total = 0;
  for (std::int64_t s : sections) {
    IH_TRY_ASSIGN(sum, checked_add(total, s, "sum of split sections"));
    total = sum;
  }
  return total;
}

std::vector<std::int64_t> SplitLayout::starts() const {
  std::vector<std::int64_t> out;
  std::int64_t row = 0;
  for (std::int64_t s : sections) {
    out.push_back(row);
    row += s;
  }
  return out;
}

std::int64_t SplitLayout::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<std::int64_t>(i);
  return -1;
}

Status validate_layout(const SplitLayout& layout, const std::string& what) {
  if (layout.sections.size() != layout.names.size())
    return make_error(ErrorKind::invalid_layout_parameter, what + ": " + std::to_string(layout.sections.size()) +
                                                               " sections but " + std::to_string(layout.names.size()) +
                                                               " names");
  if (layout.sections.empty()) return make_error(ErrorKind::invalid_layout_parameter, what + ": no sections");
  for (std::size_t i = 0; i < layout.sections.size(); ++i)
    IH_TRY_STATUS(require_positive(layout.sections[i], what + " section '" + layout.names[i] + "'"));
  IH_TRY_STATUS(layout.total_rows());
  return Ok{};
}

namespace {

Status validate_gdp(const GdpDims& dims) {
  IH_TRY_STATUS(require_positive(dims.d_inner_local, "d_inner_local"));
  IH_TRY_STATUS(require_positive(dims.group_state_local, "group_state_local"));
  IH_TRY_STATUS(require_positive(dims.nheads_local, "nheads_local"));
  IH_TRY_STATUS(require_positive(dims.householder, "householder (M)"));
  // M copies of three sections each: bound M so the name list stays a sane size.
  if (dims.householder > 1'000'000)
    return make_error(ErrorKind::invalid_layout_parameter,
                      "householder (M) = " + std::to_string(dims.householder) + " is unreasonably large");
  return Ok{};
}

void add_copies(SplitLayout& out, std::int64_t size, const std::string& prefix, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    out.sections.push_back(size);
    out.names.push_back(prefix + std::to_string(i));
  }
}

void add(SplitLayout& out, std::int64_t size, const std::string& name) {
  out.sections.push_back(size);
  out.names.push_back(name);
}

Status validate_mamba(const MambaDims& dims) {
  IH_TRY_STATUS(require_positive(dims.d_inner_local, "d_inner_local"));
  IH_TRY_STATUS(require_positive(dims.group_state_local, "group_state_local"));
  return require_positive(dims.nheads_local, "nheads_local");
}

}  // namespace

Result<SplitLayout> gdp_in_proj_layout(const GdpDims& dims) {
  IH_TRY_STATUS(validate_gdp(dims));
  SplitLayout out;
  add(out, dims.d_inner_local, "z");
  add_copies(out, dims.d_inner_local, "V", dims.householder);
  add_copies(out, dims.group_state_local, "K", dims.householder);
  add(out, dims.group_state_local, "Q");
  add_copies(out, dims.nheads_local, "b", dims.householder);
  add(out, dims.nheads_local, "a");
  IH_TRY_STATUS(validate_layout(out, "GDP in_proj layout"));
  return out;
}

Result<SplitLayout> gdp_conv_layout(const GdpDims& dims) {
  IH_TRY_STATUS(validate_gdp(dims));
  SplitLayout out;
  add_copies(out, dims.d_inner_local, "V", dims.householder);
  add_copies(out, dims.group_state_local, "K", dims.householder);
  add(out, dims.group_state_local, "Q");
  IH_TRY_STATUS(validate_layout(out, "GDP conv1d layout"));
  return out;
}

Result<SplitLayout> mamba_in_proj_layout(const MambaDims& dims) {
  IH_TRY_STATUS(validate_mamba(dims));
  SplitLayout out;
  add(out, dims.d_inner_local, "z");
  add(out, dims.d_inner_local, "x");
  add(out, dims.group_state_local, "B");
  add(out, dims.group_state_local, "C");
  add(out, dims.nheads_local, "dt");
  IH_TRY_STATUS(validate_layout(out, "Mamba in_proj layout"));
  return out;
}

Result<SplitLayout> mamba_conv_layout(const MambaDims& dims) {
  IH_TRY_STATUS(validate_mamba(dims));
  SplitLayout out;
  add(out, dims.d_inner_local, "x");
  add(out, dims.group_state_local, "B");
  add(out, dims.group_state_local, "C");
  IH_TRY_STATUS(validate_layout(out, "Mamba conv1d layout"));
  return out;
}

Result<std::optional<TpRow>> row_at_tp_size(const std::vector<std::int64_t>& sections, std::int64_t from_tp, TpRow row,
                                            std::int64_t to_tp) {
  IH_TRY_STATUS(require_positive(from_tp, "from TP size"));
  IH_TRY_STATUS(require_positive(to_tp, "to TP size"));
  for (std::int64_t s : sections)
    if (s <= 0 || s % from_tp != 0 || s % to_tp != 0)
      return make_error(ErrorKind::invalid_layout_parameter,
                        "section of " + std::to_string(s) + " rows does not split over TP " + std::to_string(from_tp) +
                            " and " + std::to_string(to_tp));
  if (row.tp_rank < 0 || row.tp_rank >= from_tp || row.row < 0)
    return make_error(ErrorKind::invalid_layout_parameter, "no row " + std::to_string(row.row) + " of TP rank " +
                                                               std::to_string(row.tp_rank) + " at TP " +
                                                               std::to_string(from_tp));
  std::int64_t from_start = 0, to_start = 0;  // the section's first TP-local row at each size
  for (std::int64_t s : sections) {
    const std::int64_t from_part = s / from_tp, to_part = s / to_tp;
    if (row.row < from_start + from_part) {
      const std::int64_t in_section = row.tp_rank * from_part + (row.row - from_start);
      return std::optional(TpRow{in_section / to_part, to_start + in_section % to_part});
    }
    from_start += from_part, to_start += to_part;
  }
  return std::optional<TpRow>();
}

}  // namespace ih
