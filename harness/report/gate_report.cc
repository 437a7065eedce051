#include "harness/report/gate_report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/report/layout_report.h"
#include "seam/reference_implementation.h"

namespace ih::report {
namespace {

std::string repro_line(const gate::CheckResult& r) { return "interop-harness repro " + to_string(r.token); }

using gate::has_repro;

/// "; picture: layout-x.svg" for a check with a picture, else "".
std::string picture_note(const Pictures& pictures, const gate::CheckResult& r) {
  const auto found = pictures.find(gate_check_name(r.group, r.name));
  return found == pictures.end() ? "" : "picture: " + found->second + " (in the report folder)";
}

std::string xml_escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 has no other control characters; a minimal case may carry them.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r')
          out += "?";
        else
          out += c;
    }
  }
  return out;
}

std::string markdown_cell(std::string_view text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

std::map<Outcome, int> counts_of(const std::vector<gate::CheckResult>& results) {
  std::map<Outcome, int> counts;
  for (const auto& r : results) ++counts[r.answer.outcome];
  return counts;
}

std::string verdict_word(int exit_code) {
  switch (exit_code) {
    case kExitOk: return "PASSED";
    case kExitCheckFailed: return "FAILED";
    case kExitHarnessError: return "HARNESS ERROR";
    case kExitTimeout: return "TIMEOUT";
    case kExitNothingRan: return "NOTHING RAN";
    default: return "ERROR";
  }
}

json::Json base_json(const BaseRun& base) {
  return {{"target", base.target},
          {"exit_code", base.exit_code},
          {"verdict", verdict_word(base.exit_code)},
          {"verdict_counts", base.verdict_counts},
          {"tree_hash", base.tree_hash},
          {"from_cache", base.from_cache}};
}

json::Json delta_json(const std::vector<gate::Change>& delta) {
  json::Json changes = json::Json::array();
  int worse = 0;
  for (const gate::Change& c : delta) {
    worse += c.worse();
    changes.push_back({{"name", c.check},
                       {"change", std::string(gate::to_string(c.kind))},
                       {"worse", c.worse()},
                       {"base", c.base},
                       {"new", c.now},
                       {"detail", c.detail}});
  }
  return {{"counts", gate::delta_counts(delta)}, {"worse", worse}, {"changes", changes}};
}

/// The change as a JUnit suite of its own: one testcase per change, a failure for each worse one.
std::string delta_junit(const BaseRun& base) {
  int worse = 0;
  for (const gate::Change& c : base.delta) worse += c.worse();
  std::ostringstream out;
  out << "  <testsuite name=\"change against base\" tests=\"" << base.delta.size() << "\" failures=\"" << worse
      << "\" errors=\"0\" skipped=\"0\">\n"
      << "    <properties>\n      <property name=\"base\" value=\"" << xml_escaped(base.target) << "\"/>\n"
      << "      <property name=\"base_verdict\" value=\""
      << xml_escaped(verdict_word(base.exit_code) + " " + base.verdict_counts) << "\"/>\n    </properties>\n";
  for (const gate::Change& c : base.delta) {
    const std::string what = std::string(gate::to_string(c.kind)) + ": " + c.now + " (base: " + c.base + ")";
    out << "    <testcase classname=\"change\" name=\"" << xml_escaped(c.check) << "\">\n      "
        << (c.worse() ? "<failure message=\"" : "<system-out>") << (c.worse() ? xml_escaped(what) + "\">" : "")
        << xml_escaped((c.worse() ? "" : what + "\n") + c.detail) << (c.worse() ? "</failure>" : "</system-out>")
        << "\n    </testcase>\n";
  }
  return out.str() + "  </testsuite>\n";
}

/// The change first in summary.md: the base's verdict, then a table of the checks whose verdict differs.
std::string delta_markdown(const BaseRun& base) {
  std::ostringstream out;
  out << "### The change, " << gate::delta_counts(base.delta) << "\n\nBase: `" << markdown_cell(base.target)
      << "`: " << verdict_word(base.exit_code) << " " << base.verdict_counts
      << (base.from_cache ? " (from the cache)" : "") << "\n\n";
  if (base.delta.empty()) return out.str() + "Every check's verdict is the base's.\n\n";
  out << "| change | check | now | base | detail |\n|---|---|---|---|---|\n";
  for (const gate::Change& c : base.delta)
    out << "| " << (c.worse() ? "**WORSE** " : "") << gate::to_string(c.kind) << " | " << markdown_cell(c.check)
        << " | " << c.now << " | " << c.base << " | " << markdown_cell(c.detail.substr(0, 300)) << " |\n";
  return out.str() + "\n";
}

}  // namespace

std::string verdict_line(const GateRun& run, const std::vector<gate::CheckResult>& results) {
  const std::string line = gate::verdict_line(run.exit_code, results);
  return (run.base ? line + ", " + gate::delta_counts(run.base->delta) : line) + run.verdict_suffix;
}

std::string gate_json(const GateRun& run, const std::vector<gate::CheckResult>& results, const Pictures& pictures) {
  json::Json checks = json::Json::array();
  for (const auto& r : results) {
    json::Json check{{"name", gate_check_name(r.group, r.name)},
                     {"group", r.group},
                     {"title", r.name},
                     {"outcome", std::string(to_string(r.answer.outcome))},
                     {"seconds", r.seconds}};
    if (!r.answer.detail.empty()) check["detail"] = r.answer.detail;
    if (!r.answer.minimal_case.empty()) check["minimal_case"] = r.answer.minimal_case;
    if (r.known_finding) check["known_finding"] = *r.known_finding;
    if (has_repro(r)) check["repro"] = repro_line(r);
    if (const auto picture = pictures.find(gate_check_name(r.group, r.name)); picture != pictures.end())
      check["picture"] = picture->second;
    checks.push_back(std::move(check));
  }
  json::Json counts = json::Json::object();
  for (const auto& [outcome, n] : counts_of(results)) counts[std::string(to_string(outcome))] = n;
  json::Json report{{"ok", run.exit_code == kExitOk},
                    {"verdict", verdict_word(run.exit_code)},
                    {"exit_code", run.exit_code},
                    {"target", run.target},
                    {"seed", run.seed},
                    {"property_cases", run.property_cases},
                    {"require_all", run.require_all},
                    {"verdict_line", verdict_line(run, results)},
                    {"stale_findings", gate::stale_findings(results)},
                    {"counts", counts},
                    {"checks", checks}};
  if (run.base) {  // after every key of a gate without a base, which keep their places
    report["base"] = base_json(*run.base);
    report["delta"] = delta_json(run.base->delta);
  }
  if (!run.coverage.is_null()) report["coverage"] = run.coverage;
  return json::dump(report) + "\n";
}

std::string gate_junit(const GateRun& run, const std::vector<gate::CheckResult>& results, const Pictures& pictures) {
  auto counts = counts_of(results);
  double seconds = 0;
  for (const auto& r : results) seconds += r.seconds;
  // With a base the change is a suite of its own, counted in the whole's totals.
  const std::size_t changes = run.base ? run.base->delta.size() : 0;
  int worse = 0;
  if (run.base)
    for (const gate::Change& c : run.base->delta) worse += c.worse();
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"interop-harness gate\" tests=\"" << results.size() + changes << "\" failures=\""
      << counts[Outcome::failed] + worse << "\" errors=\"" << counts[Outcome::harness_error] + counts[Outcome::timeout]
      << "\" skipped=\"" << counts[Outcome::not_run] << "\" time=\"" << seconds << "\">\n"
      << "  <testsuite name=\"gate\" tests=\"" << results.size() << "\" failures=\"" << counts[Outcome::failed]
      << "\" errors=\"" << counts[Outcome::harness_error] + counts[Outcome::timeout] << "\" skipped=\""
      << counts[Outcome::not_run] << "\" time=\"" << seconds << "\">\n"
      << "    <properties>\n"
      << "      <property name=\"target\" value=\"" << xml_escaped(run.target) << "\"/>\n"
      << "      <property name=\"seed\" value=\"" << run.seed << "\"/>\n"
      << "      <property name=\"property_cases\" value=\"" << run.property_cases << "\"/>\n"
      << "    </properties>\n";
  for (const auto& r : results) {
    out << "    <testcase classname=\"" << xml_escaped("gate." + r.group) << "\" name=\"" << xml_escaped(r.name)
        << "\" time=\"" << r.seconds << "\"";
    const std::string picture = picture_note(pictures, r);
    const std::string body =
        r.answer.detail + (r.answer.minimal_case.empty() ? "" : "\nminimal case: " + r.answer.minimal_case) +
        (has_repro(r) ? "\nREPRO: " + repro_line(r) : "") + (picture.empty() ? "" : "\n" + picture);
    // The message leads with the picture: CI pages often show only the (shortened) message.
    const std::string message = (picture.empty() ? "" : picture + "; ") + r.answer.detail.substr(0, 200);
    switch (r.answer.outcome) {
      case Outcome::passed: out << "/>\n"; continue;
      case Outcome::failed:
        out << ">\n      <failure message=\"" << xml_escaped(message) << "\">" << xml_escaped(body) << "</failure>\n";
        break;
      case Outcome::not_run:
        out << ">\n      <skipped message=\"" << xml_escaped("not run: " + r.answer.detail) << "\"/>\n";
        break;
      case Outcome::known_finding:
        out << ">\n      <system-out>" << xml_escaped("known finding: " + *r.known_finding + "\n" + body)
            << "</system-out>\n";
        break;
      case Outcome::harness_error:
      case Outcome::timeout:
        out << ">\n      <error type=\"" << to_string(r.answer.outcome) << "\" message=\""
            << xml_escaped(r.answer.detail.substr(0, 200)) << "\">" << xml_escaped(body) << "</error>\n";
        break;
    }
    out << "    </testcase>\n";
  }
  out << "  </testsuite>\n" << (run.base ? delta_junit(*run.base) : "") << "</testsuites>\n";
  return out.str();
}

std::string gate_markdown(const GateRun& run, const std::vector<gate::CheckResult>& results, const Pictures& pictures) {
  auto counts = counts_of(results);
  std::ostringstream out;
  out << "## interop-harness gate: " << verdict_word(run.exit_code) << " " << gate::verdict_counts(results)
      << run.verdict_suffix << "\n\n"
      << (run.base ? delta_markdown(*run.base) : "") << "Target: `" << markdown_cell(run.target) << "`  \nSeed "
      << run.seed << ", " << run.property_cases << " cases per property"
      << (run.require_all ? ", every check required to run" : "") << ".\n\n"
      << "| passed | failed | known finding | not run | harness error | timeout |\n|---|---|---|---|---|---|\n"
      << "| " << counts[Outcome::passed] << " | " << counts[Outcome::failed] << " | " << counts[Outcome::known_finding]
      << " | " << counts[Outcome::not_run] << " | " << counts[Outcome::harness_error] << " | "
      << counts[Outcome::timeout] << " |\n";
  bool header = false;
  for (const auto& r : results) {
    if (r.answer.outcome == Outcome::passed) continue;
    if (!header) out << "\n| outcome | check | detail | repro |\n|---|---|---|---|\n", header = true;
    const std::string detail = r.known_finding ? *r.known_finding : r.answer.detail;
    const auto picture = pictures.find(gate_check_name(r.group, r.name));
    out << "| " << to_string(r.answer.outcome) << " | " << markdown_cell(r.group + ": " + r.name) << " | "
        << markdown_cell(detail.substr(0, 300))
        << (picture == pictures.end() ? "" : " [picture: " + picture->second + "](" + picture->second + ")") << " | "
        << (has_repro(r) ? "`" + repro_line(r) + "`" : "") << " |\n";
  }
  if (!run.coverage_summary.empty()) out << "\n" << run.coverage_summary;
  return out.str();
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return make_error(ErrorKind::invalid_argument, "cannot write " + path);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::remove(temporary.c_str());
    return make_error(ErrorKind::invalid_argument, "cannot write " + path + ": " + error.message());
  }
  return Ok{};
}

namespace {

LayoutParams layout_params_of(const props::GtpCase& c) {
  LayoutParams params{c.mixer == "mamba" ? MixerFamily::mamba : MixerFamily::gdp,
                      c.dims.d_inner_local,
                      c.dims.group_state_local,
                      c.dims.nheads_local,
                      c.dims.householder,
                      c.tp,
                      c.gtp,
                      c.pad_alignment,
                      c.cols};
  params.design = c.design;
  return params;
}

}  // namespace

bool draws_pictures(const std::vector<gate::CheckResult>& results) {
  return std::any_of(results.begin(), results.end(), [](const gate::CheckResult& r) {
    return r.answer.layout && (r.answer.outcome == Outcome::failed || r.answer.outcome == Outcome::known_finding);
  });
}

Status write_gate_reports(const std::string& dir, const GateRun& run, const std::vector<gate::CheckResult>& results,
                          Implementation& target) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    return make_error(ErrorKind::invalid_argument,
                      "--report " + dir + ": cannot create the folder: " + error.message());
  const std::filesystem::path base(dir);
  // Pictures first, so that no report links a file that is not there.
  Pictures pictures;
  for (const auto& r : results) {
    if (!draws_pictures({r})) continue;
    const LayoutParams params = layout_params_of(*r.answer.layout);
    ReferenceImplementation reference_model;
    const auto reference = build_layout_report(params, reference_model);
    if (!reference.ok()) continue;  // a layout the model refuses has no picture; the failure text says why
    std::string stem;
    for (char ch : r.name) stem += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    const std::string file = "layout-" + stem + ".svg";
    IH_TRY_STATUS(write_file_atomically(
        (base / file).string(), layout_comparison_svg(*reference, build_layout_report(params, target), run.target)));
    pictures[gate_check_name(r.group, r.name)] = file;
  }
  IH_TRY_STATUS(write_file_atomically((base / "junit.xml").string(), gate_junit(run, results, pictures)));
  IH_TRY_STATUS(write_file_atomically((base / "report.json").string(), gate_json(run, results, pictures)));
  IH_TRY_STATUS(write_file_atomically((base / "summary.md").string(), gate_markdown(run, results, pictures)));
  return Ok{};
}

bool is_gate_report_file(std::string_view name) {
  if (name.size() > 8 && name.substr(name.size() - 8) == ".partial") name.remove_suffix(8);
  if (name == "junit.xml" || name == "report.json" || name == "summary.md") return true;
  return name.rfind("layout-", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".svg";
}

}  // namespace ih::report
