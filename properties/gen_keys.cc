// Generators of storage keys for the retarget rules (spec 2.4) and FSDP explicit keys (spec 2.7).
#include "models/gpt_layer_maps.h"
#include "properties/generators.h"

namespace ih::props {
namespace gen = rc::gen;

namespace {

std::string modules(std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += "module.";
  return out;
}

std::string layer_key(std::int64_t index, const std::string& sub) {
  return "decoder.layers." + std::to_string(index) + "." + sub;
}

/// Non-fresh hybrid indices of a pattern's main' (attention and MLP positions).
std::vector<std::int64_t> sourced_positions(const std::string& layers) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i] != 'M') out.push_back(static_cast<std::int64_t>(i));
  return out;
}

/// Checkpoint keys holding the chosen captures (each once or twice) plus near-miss noise.
std::vector<std::string> checkpoint_keys_for(const std::vector<std::string>& captures, const std::string& bare,
                                             bool twice) {
  std::vector<std::string> keys = {"model." + bare + "_extra", "optimizer.state.exp_avg.x" + bare};
  for (const std::string& c : captures) {
    keys.push_back("model." + c);
    if (twice) keys.push_back("optimizer.state.exp_avg." + c);  // same capture again: still one distinct
  }
  return keys;
}

FsdpCase make_fsdp_case(const PatternCase& p, std::int64_t h, std::size_t lead, std::vector<std::size_t> depths,
                        bool twice) {
  const auto maps = gpt_compatible_layer_maps(std::string_view(p.pattern)).value();
  const std::string sub = "self_attention.linear_qkv.weight";
  const std::string bare = layer_key(*maps.gpt_layer_of(h), sub);
  std::vector<std::string> captures;
  for (std::size_t d : depths)
    if (std::find(captures.begin(), captures.end(), modules(d) + bare) == captures.end())
      captures.push_back(modules(d) + bare);
  return FsdpCase{p.pattern, modules(lead) + layer_key(h, sub), checkpoint_keys_for(captures, bare, twice), captures};
}

}  // namespace

rc::Gen<FsdpCase> genFsdpCase() {
  return gen::mapcat(genHybridPattern(4, '-'), [](const PatternCase& p) {
    const auto positions = sourced_positions(p.layers);
    const auto depths = gen::mapcat(gen::inRange<std::size_t>(0, 3), [](std::size_t n) {
      return gen::container<std::vector<std::size_t>>(n, gen::inRange<std::size_t>(0, 4));
    });
    return gen::map(gen::tuple(genElement(positions), gen::inRange<std::size_t>(0, 4), depths, gen::arbitrary<bool>()),
                    [p](const std::tuple<std::int64_t, std::size_t, std::vector<std::size_t>, bool>& t) {
                      return make_fsdp_case(p, std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t));
                    });
  });
}

rc::Gen<KeyRulesCase> genKeyRulesCase() {
  const auto prefix = genElement<std::string>({"", "optimizer.state.exp_avg.", "module.", "language_model."});
  const auto sub = genElement<std::string>({"self_attention.linear_qkv.weight", "mlp.linear_fc1.weight",
                                            "mixer.in_proj.weight", "self_attention.linear_qkv._extra_state"});
  return gen::mapcat(genHybridPattern(4, '-'), [prefix, sub](const PatternCase& p) {
    const auto n = static_cast<std::int64_t>(p.layers.size());
    const auto layer = gen::map(gen::tuple(prefix, gen::inRange<std::int64_t>(0, n), sub), [](const auto& t) {
      return std::get<0>(t) + layer_key(std::get<1>(t), std::get<2>(t));
    });
    const auto other = gen::map(
        gen::pair(prefix, genElement<std::string>({"output_layer._extra_state", "output_layer.weight",
                                                   "decoder.final_norm.weight", "embedding.word_embeddings.weight"})),
        [](const auto& t) { return t.first + t.second; });
    const auto unknown = gen::map(gen::inRange<std::int64_t>(n, n + 3),
                                  [](std::int64_t h) { return layer_key(h, "mlp.linear_fc2.weight"); });
    const auto key = gen::weightedOneOf<std::string>({{6, layer}, {4, other}, {1, unknown}});
    return gen::map(gen::resize(12, gen::nonEmpty(gen::container<std::vector<std::string>>(key))),
                    [p](std::vector<std::string> keys) {
                      return KeyRulesCase{p.pattern, std::move(keys)};
                    });
  });
}

}  // namespace ih::props
