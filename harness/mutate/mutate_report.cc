// A campaign's JSON report and summary.md (mutate.h).
#include <sstream>

#include "harness/mutate/mutate.h"

namespace ih::mutate {
namespace {

/// killed, survived, timeout counts of a group of mutants.
struct Tally {
  int killed = 0, survived = 0, timeout = 0, incompetent = 0, equivalent = 0;
  void add(Outcome o) {
    killed += o == Outcome::killed, survived += o == Outcome::survived, timeout += o == Outcome::timeout;
    incompetent += o == Outcome::incompetent, equivalent += o == Outcome::equivalent;
  }
  int judged() const { return killed + survived + timeout; }
  json::Json score() const {
    return judged() ? json::Json(static_cast<double>(killed) / judged()) : json::Json(nullptr);
  }
  std::string text() const {
    return judged() ? std::to_string(killed) + "/" + std::to_string(judged()) : std::string("-");
  }
};

template <class Key>
std::map<std::string, Tally> tallies(const std::vector<Mutant>& mutants, Key key) {
  std::map<std::string, Tally> out;
  for (const Mutant& m : mutants) out[key(m)].add(m.judgement.outcome);
  return out;
}

std::string function_key(const Mutant& m) { return m.file + ":" + m.function; }

}  // namespace

json::Json campaign_json(const std::vector<Mutant>& mutants) {
  Tally all;
  json::Json listed = json::Json::array();
  for (const Mutant& m : mutants) {
    all.add(m.judgement.outcome);
    json::Json one{{"file", m.file},
                   {"line", m.line},
                   {"operator", m.op},
                   {"diff", m.diff},
                   {"outcome", to_string(m.judgement.outcome)},
                   {"checks", m.checks},
                   {"killed_by", m.judgement.killed_by},
                   {"function", m.function},
                   {"diff_sha256", m.diff_sha256},
                   {"seconds", m.seconds}};
    if (!m.judgement.note.empty()) one["note"] = m.judgement.note;
    listed.push_back(std::move(one));
  }
  json::Json files = json::Json::object(), functions = json::Json::object();
  for (const auto& [file, t] : tallies(mutants, [](const Mutant& m) { return m.file; })) files[file] = t.score();
  for (const auto& [function, t] : tallies(mutants, function_key)) functions[function] = t.score();
  return {{"score", all.score()},
          {"killed", all.killed},
          {"survived", all.survived},
          {"timeout", all.timeout},
          {"incompetent", all.incompetent},
          {"equivalent", all.equivalent},
          {"mutants", listed},
          {"files", files},
          {"functions", functions}};
}

std::string campaign_summary(const std::vector<Mutant>& mutants) {
  std::ostringstream out;
  Tally all;
  for (const Mutant& m : mutants) all.add(m.judgement.outcome);
  out << "# Mutation campaign\n\nscore " << all.text() << " (killed / killed + survived + timeout); " << all.incompetent
      << " incompetent, " << all.equivalent << " equivalent (pinned)\n\n"
      << "| file | killed/judged |\n|---|---|\n";
  for (const auto& [file, t] : tallies(mutants, [](const Mutant& m) { return m.file; }))
    out << "| " << file << " | " << t.text() << " |\n";
  out << "\n| function | killed/judged |\n|---|---|\n";
  for (const auto& [function, t] : tallies(mutants, function_key))
    out << "| " << function << " | " << t.text() << " |\n";
  out << "\n## Survivors\n";
  for (const Mutant& m : mutants) {
    if (m.judgement.outcome != Outcome::survived && m.judgement.outcome != Outcome::timeout) continue;
    out << "\n### " << m.file << ":" << m.line << " (" << m.function << ", " << m.op << ", "
        << to_string(m.judgement.outcome) << ", diff " << m.diff_sha256 << ")\n\nchecks that ran it:";
    for (const std::string& check : m.checks) out << " `" << check << "`";
    out << "\n\n```diff\n" << m.diff << "```\n";
  }
  return out.str();
}

}  // namespace ih::mutate
