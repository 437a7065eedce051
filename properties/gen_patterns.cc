// Pattern, segment, FSDP-key and key-rule generators.
#include <algorithm>

#include "models/gpt_layer_maps.h"
#include "properties/generators.h"

namespace ih::props {
namespace gen = rc::gen;

namespace {

/// Blocks that each pair attention with MLP positions ('-' stands for the MLP kind).
rc::Gen<std::string> genBlock(char mlp) {
  return gen::map(genElement<std::string>({"*-", "M*-", "*M-", "*-M", "**--", "MM*-"}), [mlp](std::string b) {
    std::replace(b.begin(), b.end(), '-', mlp);
    return b;
  });
}

/// Inserts pipes at `cuts` (positions in `layers`, sorted here).
std::string with_pipes(const std::string& layers, std::vector<std::size_t> cuts) {
  std::sort(cuts.begin(), cuts.end());
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i <= layers.size(); ++i) {
    while (next < cuts.size() && cuts[next] == i) out += '|', ++next;
    if (i < layers.size()) out += layers[i];
  }
  return out;
}

rc::Gen<PatternCase> genPiped(std::string layers, std::int64_t pp, std::int64_t vpp) {
  const std::size_t cuts = static_cast<std::size_t>(pp * vpp - 1);
  return gen::map(gen::container<std::vector<std::size_t>>(cuts, gen::inRange<std::size_t>(0, layers.size() + 1)),
                  [layers, pp](std::vector<std::size_t> at) {
                    return PatternCase{layers, with_pipes(layers, at), pp};
                  });
}

std::string insert_at(std::string text, std::size_t pos, const std::string& what) {
  return text.insert(std::min(pos, text.size()), what);
}

rc::Gen<NearValidCase> genInsertion(const std::string& base, const std::string& what, std::string why, ErrorKind kind) {
  return gen::map(gen::inRange<std::size_t>(0, base.size() + 1), [=](std::size_t pos) {
    return NearValidCase{insert_at(base, pos, what), why, kind};
  });
}

rc::Gen<std::string> genMtpPart() {
  return gen::map(gen::nonEmpty(gen::container<std::string>(genElement<char>({'M', '*', '-'}))),
                  [](std::string s) { return s; });
}

rc::Gen<NearValidCase> genMutation(const PatternCase& v) {
  const std::string& p = v.pattern;
  const char other = v.layers.find('E') != std::string::npos ? '-' : 'E';
  return gen::oneOf(
      genInsertion(p, std::string("*") + other, "mixed: a '*" + std::string(1, other) + "' block added",
                   ErrorKind::mixed_mlp_kinds),
      gen::mapcat(genElement<std::string>({"*", std::string(1, other == 'E' ? '-' : 'E')}),
                  [p](std::string extra) {
                    return genInsertion(p, extra, "unbalanced: one extra '" + extra + "'",
                                        ErrorKind::unbalanced_attention_mlp);
                  }),
      gen::map(
          gen::inRange<std::size_t>(1, 5),
          [](std::size_t n) {
            return NearValidCase{std::string(n, 'M'), "unbalanced: Mamba only", ErrorKind::unbalanced_attention_mlp};
          }),
      gen::map(gen::pair(genMtpPart(), gen::inRange(1, 3)),
               [p](std::pair<std::string, int> m) {
                 std::string text = p;
                 for (int i = 0; i < m.second; ++i) text += "/" + m.first;
                 return NearValidCase{text, "MTP depth " + std::to_string(m.second), ErrorKind::mtp_present};
               }),
      genInsertion(p, "G", "untranslatable: a 'G' layer", ErrorKind::untranslatable_layer_types),
      gen::map(genElement<std::string>({"", "|", "||", "/", "|/", "//"}),
               [](std::string e) {
                 return NearValidCase{e, "empty main pattern", ErrorKind::empty_pattern};
               }),
      gen::mapcat(genElement<std::string>({"D", "+"}),
                  [p](std::string s) {
                    return genInsertion(p, s, "'" + s + "' next to attention", ErrorKind::attention_with_mla_dsa);
                  }),
      gen::mapcat(genElement<std::string>({"X", "a", ".", " "}),
                  [p](std::string s) {
                    return genInsertion(p, s, "invalid symbol '" + s + "' in main", ErrorKind::invalid_symbol);
                  }),
      gen::map(gen::pair(genMtpPart(), genElement<char>({'M', 'a', 'X'})),
               [p](std::pair<std::string, char> m) {
                 return NearValidCase{p + "/" + m.first + "/" + m.first + m.second,
                                      "MTP parts differ (second has '" + std::string(1, m.second) + "' appended)",
                                      ErrorKind::mtp_not_identical};
               }),
      gen::map(genMtpPart(), [p](std::string m) {
        return NearValidCase{p + "/" + m + "a/" + m + "a", "invalid symbol 'a' in identical MTP parts",
                             ErrorKind::invalid_symbol};
      }));
}

}  // namespace

rc::Gen<PatternCase> genHybridPattern(int max_blocks, char mlp) {
  const auto blocks = gen::mapcat(gen::inRange(1, max_blocks + 1), [mlp](int n) {
    return gen::container<std::vector<std::string>>(static_cast<std::size_t>(n), genBlock(mlp));
  });
  return gen::mapcat(gen::tuple(blocks, genElement<std::int64_t>({1, 2, 4}), gen::inRange<std::int64_t>(1, 3)),
                     [](const std::tuple<std::vector<std::string>, std::int64_t, std::int64_t>& t) {
                       std::string layers;
                       for (const std::string& b : std::get<0>(t)) layers += b;
                       return genPiped(layers, std::get<1>(t), std::get<2>(t));
                     });
}

rc::Gen<PatternCase> genAnyHybridPattern(int max_blocks) {
  return gen::mapcat(genElement<char>({'-', 'E'}),
                     [max_blocks](char mlp) { return genHybridPattern(max_blocks, mlp); });
}

rc::Gen<NearValidCase> genNearValidPattern() { return gen::mapcat(genAnyHybridPattern(6), genMutation); }

rc::Gen<SegmentCase> genSegmentCase() {
  const auto segment = gen::container<std::string>(genElement<char>({'M', '*', '-', 'E'}));
  return gen::mapcat(gen::pair(genElement<std::int64_t>({1, 2, 4}), gen::inRange<std::int64_t>(1, 4)),
                     [segment](std::pair<std::int64_t, std::int64_t> sizes) {
                       const auto n = static_cast<std::size_t>(sizes.first * sizes.second);
                       return gen::map(gen::container<std::vector<std::string>>(n, gen::resize(4, segment)),
                                       [pp = sizes.first](std::vector<std::string> s) {
                                         return SegmentCase{s, pp};
                                       });
                     });
}

}  // namespace ih::props
