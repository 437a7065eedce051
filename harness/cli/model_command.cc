// `interop-harness model dump ...`: one rank's sharded state dict of a whole GPTModel or
// HybridModel, from the reference (its synthetic state dict) or from the real model built by
// Megatron on CPU (--target megatron), in the flat entry JSON of docs/state-dict-json.md.
#include <array>
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

const char* const kSynopsis =
    "interop-harness model dump --model gpt|hybrid [--pattern P] [--layers N] [--tp T] [--pp P] [--ep E] "
    "[--etp T] [--gtp G] [--dp D] [--cp C] [--experts E] [--gated] [--bias] [--tied] [--norm rms|layer] [--optimizer "
    "[--optimizer-kind "
    "distributed|float16|fp32]] --rank R [--json] [--target reference|megatron] [--megatron-path DIR] [--mixer "
    "mamba|gdp]";

constexpr std::array<Named<ModelKind>, 2> kModelNames = {{{"gpt", ModelKind::gpt}, {"hybrid", ModelKind::hybrid}}};
enum class Norm { rms, layer };
constexpr std::array<Named<Norm>, 2> kNormNames = {{{"rms", Norm::rms}, {"layer", Norm::layer}}};
constexpr std::array<Named<OptimizerKind>, 3> kOptimizerKinds = {
    {{"distributed", OptimizerKind::distributed}, {"float16", OptimizerKind::float16}, {"fp32", OptimizerKind::fp32}}};
enum class Mixer { mamba, gdp };
constexpr std::array<Named<Mixer>, 2> kMixerNames = {{{"mamba", Mixer::mamba}, {"gdp", Mixer::gdp}}};

/// The command's options, filled from kModelFlags (defaults here and in ModelDumpSpec).
struct ModelOptions : GivenFlags {
  ModelKind model = ModelKind::gpt;
  Norm norm = Norm::rms;
  OptimizerKind optimizer_kind = OptimizerKind::distributed;
  Mixer mixer = Mixer::mamba;
  std::optional<std::string> pattern, target, megatron_path;
  std::int64_t layers = ModelDumpSpec{}.layers, tp = 1, pp = 1, ep = 1, etp = 1, gtp = 1, dp = 1, cp = 1, experts = 0,
               rank = 0;
  bool gated = false, bias = false, tied = false, optimizer = false, json = false;
};

using O = ModelOptions;
const std::vector<Flag<O>> kModelFlags = {
    {"model", one_of<O>(&O::model, kModelNames), "gpt or hybrid", 0, 0, true},
    {"pattern", &O::pattern, "hybrid layer pattern (default M*-M*-)"},
    {"layers", &O::layers, "GPT transformer layers (default 2)", 1, kMaxLayers},
    {"tp", &O::tp, "tensor-parallel size (default 1)", 1, kMaxParallel},
    {"pp", &O::pp, "pipeline-parallel size (default 1)", 1, kMaxParallel},
    {"ep", &O::ep, "expert-parallel size (default 1)", 1, kMaxParallel},
    {"etp", &O::etp, "expert-tensor-parallel size (default 1)", 1, kMaxParallel},
    {"gtp", &O::gtp, "generalized-tensor-parallel size over the mixers' in_proj (default 1)", 1, kMaxParallel},
    {"dp", &O::dp, "data-parallel size (default 1; the world's is the least multiple of it that EP x ETP allows)", 1,
     kMaxParallel},
    {"cp", &O::cp, "context-parallel size (default 1; its ranks are replicas like DP's)", 1, kMaxParallel},
    {"experts", &O::experts, "MoE experts (default 0: dense MLP; a GPT with experts has MoE layers)", 0, kMaxExperts},
    {"gated", &O::gated, "SwiGLU (gated) MLPs"},
    {"bias", &O::bias, "biases on the linear layers (Megatron's add_bias_linear; default off)"},
    {"tied", &O::tied, "output layer tied to the word embeddings"},
    {"norm", one_of<O>(&O::norm, kNormNames), "rms (default) or layer"},
    {"optimizer", &O::optimizer, "also the optimizer's state entries"},
    {"optimizer-kind", one_of<O>(&O::optimizer_kind, kOptimizerKinds),
     "with --optimizer: distributed (default, the DistributedOptimizer), float16 "
     "(Float16OptimizerWithFloat16Params over Adam, the path GTP uses) or fp32 (FP32Optimizer over Adam)"},
    {"rank", &O::rank, "global rank whose state dict is printed", 0, kMaxParallel* kMaxParallel* kMaxParallel, true},
    {"json", &O::json, "print the flat entry JSON (docs/state-dict-json.md)"},
    {"target", &O::target, "reference (default) or megatron"},
    {"megatron-path", &O::megatron_path, "a Megatron-LM checkout (megatron only)"},
    {"mixer", one_of<O>(&O::mixer, kMixerNames), "the mixer at a hybrid pattern's M: mamba (default) or gdp"}};

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
  const auto args = open_command<O>(argv, kSynopsis, kModelFlags, exit_code, Positionals{1, 1});
  if (!args) return exit_code;
  if (args->positionals[0] != "dump") return bad_input("model takes dump, got '" + args->positionals[0] + "'");
  ModelDumpSpec spec;
  spec.model = args->model;
  if (args->pattern) {
    if (spec.model == ModelKind::gpt) return bad_input("--pattern is for --model hybrid");
    spec.pattern = *args->pattern;
  }
  if (spec.model == ModelKind::gpt && args->has("mixer")) return bad_input("--mixer is for --model hybrid");
  if (args->mixer == Mixer::gdp) spec.config.ssm_mixer = "gdp";
  if (spec.model == ModelKind::hybrid && args->has("layers"))
    return bad_input("--layers is for --model gpt (a hybrid model's layers are its --pattern)");
  spec.layers = args->layers;
  spec.sizes.tp = args->tp, spec.sizes.pp = args->pp, spec.sizes.ep = args->ep, spec.sizes.etp = args->etp,
  spec.sizes.gtp = args->gtp, spec.sizes.dp = args->dp, spec.sizes.cp = args->cp;
  spec.config.num_experts = args->experts;
  spec.config.layer_norm = args->norm == Norm::layer;
  spec.config.gated_mlp = args->gated;
  spec.config.add_bias = args->bias;
  spec.config.tied_embeddings = args->tied;
  spec.optimizer = args->optimizer;
  if (args->has("optimizer-kind") && !args->optimizer) return bad_input("--optimizer-kind needs --optimizer");
  spec.optimizer_kind = args->optimizer_kind;
  if (const Status valid = validate_model_dump(spec, args->rank); !valid.ok())
    return report_error(valid.error(), kExitBadInput);
  auto target_spec = validated_target(args->target, std::nullopt, args->megatron_path, std::nullopt, std::nullopt);
  if (!target_spec.ok()) return report_error(target_spec.error(), kExitBadInput);
  auto target = make_target(*target_spec);
  if (!target.ok()) return report_error(target.error());
  auto entries = (*target)->model_state_dict(spec, args->rank);
  if (!entries.ok()) return report_error(entries.error());
  const json::Json out = json::dump_entries_to_json(*entries);
  if (args->json)
    std::cout << json::dump(out) << "\n";
  else
    print_text(out);
  return kExitOk;
}

}  // namespace ih::cli
