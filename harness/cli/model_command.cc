// `interop-harness model dump ...`: one rank's sharded state dict of a whole GPTModel or
// HybridModel, from the reference (its synthetic state dict) or from the real model built by
// Megatron on CPU (--target megatron), in the flat entry JSON of docs/state-dict-json.md.
#include <iostream>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/targets/targets.h"

namespace ih::cli {
namespace {

// Limits (docs/cli.md): real worlds run one process per rank, so the sizes stay small.
constexpr std::int64_t kMaxParallel = 64;
constexpr std::int64_t kMaxLayers = 256;
constexpr std::int64_t kMaxExperts = 1024;

const CommandSpec kModel = {
    "interop-harness model dump --model gpt|hybrid [--pattern P] [--layers N] [--tp T] [--pp P] [--ep E] "
    "[--etp T] [--gtp G] [--experts E] [--gated] [--tied] [--norm rms|layer] [--optimizer] --rank R [--json] "
    "[--target reference|megatron] [--megatron-path DIR]",
    {{"model", true, "gpt or hybrid"},
     {"pattern", true, "hybrid layer pattern (default M*-M*-)"},
     {"layers", true, "GPT transformer layers (default 2)"},
     {"tp", true, "tensor-parallel size (default 1)"},
     {"pp", true, "pipeline-parallel size (default 1)"},
     {"ep", true, "expert-parallel size (default 1)"},
     {"etp", true, "expert-tensor-parallel size (default 1)"},
     {"gtp", true, "generalized-tensor-parallel size over the mixers' in_proj (default 1)"},
     {"experts", true, "MoE experts (default 0: dense MLP; a GPT with experts has MoE layers)"},
     {"gated", false, "SwiGLU (gated) MLPs"},
     {"tied", false, "output layer tied to the word embeddings"},
     {"norm", true, "rms (default) or layer"},
     {"optimizer", false, "also the distributed optimizer's state entries"},
     {"rank", true, "global rank whose state dict is printed"},
     {"json", false, "print the flat entry JSON (docs/state-dict-json.md)"},
     {"target", true, "reference (default) or megatron"},
     {"megatron-path", true, "a Megatron-LM checkout (megatron only)"}},
    1,
    1};

int bad_input(const std::string& message) {
  return report_error(make_error(ErrorKind::invalid_argument, message), kExitBadInput);
}

/// One line per entry: path, kind, key, global shape, offset, fragmentation, replica id.
void print_text(const json::Json& entries) {
  for (const json::Json& item : entries) {
    const json::Json& e = item["entry"];
    std::cout << item["path"].get<std::string>() << "  " << e.value("kind", "") << "  " << e.value("key", "");
    for (const char* field : {"global_shape", "global_offset", "axis_fragmentations", "replica_id"})
      if (e.contains(field)) std::cout << "  " << field << "=" << json::dump(e[field]);
    std::cout << "\n";
  }
}

}  // namespace

int model_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kModel, exit_code);
  if (!args) return exit_code;
  if (args->positionals[0] != "dump") return bad_input("model takes dump, got '" + args->positionals[0] + "'");
  ModelDumpSpec spec;
  const std::string model = args->value("model").value_or("");
  if (model != "gpt" && model != "hybrid") return bad_input("--model must be gpt or hybrid (see --help)");
  spec.model = model == "gpt" ? ModelKind::gpt : ModelKind::hybrid;
  if (auto pattern = args->value("pattern")) {
    if (spec.model == ModelKind::gpt) return bad_input("--pattern is for --model hybrid");
    spec.pattern = *pattern;
  }
  if (spec.model == ModelKind::hybrid && args->value("layers"))
    return bad_input("--layers is for --model gpt (a hybrid model's layers are its --pattern)");
  if (!args->value("rank")) return bad_input("--rank is required (see --help)");
  struct IntFlag {
    const char* name;
    std::int64_t* field;
    std::int64_t min, max;
  };
  std::int64_t rank = 0;
  const IntFlag ints[] = {{"layers", &spec.layers, 1, kMaxLayers},
                          {"tp", &spec.sizes.tp, 1, kMaxParallel},
                          {"pp", &spec.sizes.pp, 1, kMaxParallel},
                          {"ep", &spec.sizes.ep, 1, kMaxParallel},
                          {"etp", &spec.sizes.etp, 1, kMaxParallel},
                          {"gtp", &spec.sizes.gtp, 1, kMaxParallel},
                          {"experts", &spec.config.num_experts, 0, kMaxExperts},
                          {"rank", &rank, 0, kMaxParallel * kMaxParallel * kMaxParallel}};
  for (const IntFlag& flag : ints) {
    const auto value = args->int_value(flag.name, *flag.field, flag.min, flag.max);
    if (!value.ok()) return bad_input(value.error().message + " (docs/cli.md, Limits)");
    *flag.field = *value;
  }
  const std::string norm = args->value("norm").value_or("rms");
  if (norm != "rms" && norm != "layer") return bad_input("--norm must be rms or layer, got '" + norm + "'");
  spec.config.layer_norm = norm == "layer";
  spec.config.gated_mlp = args->has("gated");
  spec.config.tied_embeddings = args->has("tied");
  spec.optimizer = args->has("optimizer");
  if (const Status valid = validate_model_dump(spec, rank); !valid.ok())
    return report_error(valid.error(), kExitBadInput);
  auto target_spec = validated(TargetSpec{args->value("target").value_or("reference"), std::nullopt,
                                          args->value("megatron-path"), std::nullopt, std::nullopt});
  if (!target_spec.ok()) return report_error(target_spec.error(), kExitBadInput);
  auto target = make_target(*target_spec);
  if (!target.ok()) return report_error(target.error());
  auto entries = (*target)->model_state_dict(spec, rank);
  if (!entries.ok()) return report_error(entries.error());
  const json::Json out = json::dump_entries_to_json(*entries);
  if (args->has("json"))
    std::cout << json::dump(out) << "\n";
  else
    print_text(out);
  return kExitOk;
}

}  // namespace ih::cli
