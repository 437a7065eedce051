"""The one table of every patch the adapter makes (docs/megatron-patches.md is generated from it): what lets
Megatron's checkpoint code, models and training entry points run on a CPU-only machine, the one-process ranks of
the ops that ask torch.distributed for them, and the declared optional fixes. Only what needs a GPU (or a package
this venv cannot have) is patched; each row names the code it stands in for and the check that it still fits
that code, and is in force only inside `patches.applied(<family>)`.

Families (the context that needs them):
  gtp                GTP availability flags: every world worker, a round trip of a GTP layout
  cpu_save           dist_checkpointing's synchronous save and load on CPU (world tasks that save or load, the
                     round-trip worlds)
  save_speed         the synchronous save's result queue (speed only)
  model, model_gdp, model_optimizer   building a real model, its GDP mixer, its DistributedOptimizer
  distributed_optimizer_load   what finding F lacks, for a second DistributedOptimizer.load_state_dict after the
                     unshimmed one raised F (a real round trip verifies the optimizer's own states past F)
  float16_optimizer  the optimizer_resume tasks' Float16OptimizerWithFloat16Params
  training, training_run, training_globals, training_load   Megatron's training entry points: their CUDA calls,
                     the run's command line and environment while Megatron parses it, Megatron's global args,
                     the tracker's CUDA all-reduce while the run loads
  one_process_ranks  ops that call Megatron code asking torch.distributed for ranks, in one process
  fix                declared optional fixes (--fix NAME), never applied by default
"""

import queue

from megatron_adapter.patches import stand_ins as s
from megatron_adapter.patches.checks import All, Exists, FlagOfFamily, Reads, Snippet
from megatron_adapter.patches.entries import (Patch, SetUp, always, both, compares_with, flag_false, no_cuda,
                                              target_is_none, to, value_is, wrapping)

GTP_API = "megatron.core.tensor_parallel.gtp_api"
GDP = "megatron.core.ssm.gated_delta_product"
MAMBA = "megatron.core.ssm.mamba_mixer"
TASD = "megatron.core.dist_checkpointing.tensor_aware_state_dict"
FS_ASYNC = "megatron.core.dist_checkpointing.strategies.filesystem_async"
SAVER = "megatron.core.dist_checkpointing.strategies.state_dict_saver"
OPTIMIZER = "megatron.core.optimizer.optimizer"
DISTRIB = "megatron.core.optimizer.distrib_optimizer"
TRAINING_CKPT = "megatron.training.checkpointing"
ARGUMENTS = "megatron.training.arguments"
GLOBAL_VARS = "megatron.training.global_vars"


def _gtp_flag(name, module, attr, binds, reader, unpatched, patched, why, code_family="gtp", optional=False):
    """A GTP availability flag: bound at import to what a machine without TE has, read at call time."""
    make = (lambda current, params: (patched(),)) if callable(patched) else to(patched)
    return Patch(name, "gtp", (f"{module}:{attr}",), why,
                 FlagOfFamily(module, attr, binds, reader, code_family, optional=optional), make, needed=value_is(unpatched),
                 summary=f"{name} -> {'is_gtp_param' if callable(patched) else patched}")


_MIXER_READER = (None, "sharded_state_dict")

GTP_FLAGS = (
    _gtp_flag("gtp_api.HAVE_GTP", GTP_API, "HAVE_GTP", "HAVE_TE", ("megatron.core.utils",
              "make_tp_sharded_tensor_for_checkpoint"), False, True,
              "HAVE_GTP is False without Transformer Engine; make_tp_sharded_tensor_for_checkpoint and "
              "make_sharded_tensors_for_checkpoint read it at call time to enter their GTP branch"),
    _gtp_flag("gated_delta_product.HAVE_GTP", GDP, "HAVE_GTP", None, _MIXER_READER, False, True,
              "the GDP mixer copied HAVE_GTP at import; its in_proj gather/merge branch needs it"),
    _gtp_flag("gated_delta_product.is_gtp_param", GDP, "is_gtp_param", "None", _MIXER_READER, None, s.gtp_is_gtp_param,
              "bound to None at import when HAVE_GTP is False"),
    # Mamba's GTP branch came separately: a checkout whose Mamba mixer cannot import keeps its GDP path usable.
    _gtp_flag("mamba_mixer.HAVE_GTP", MAMBA, "HAVE_GTP", None, _MIXER_READER, False, True,
              "the Mamba mixer copied HAVE_GTP at import; its in_proj gather/merge branch needs it", optional=True),
    _gtp_flag("mamba_mixer.is_gtp_param", MAMBA, "is_gtp_param", "None", _MIXER_READER, None, s.gtp_is_gtp_param,
              "bound to None at import when HAVE_GTP is False", optional=True),
    _gtp_flag("tensor_aware_state_dict.HAVE_NVRX", TASD, "HAVE_NVRX", "False", (None, "from_state_dict"), False, True,
              "MCoreTensorAwareStateDict.from_state_dict refuses to run without the nvidia_resiliency_ext package, "
              "whose base class the in-memory from_state_dict/to_state_dict path never uses; the only wheel that "
              "installs here (0.4.1) breaks `import megatron.core` of a checkout that asks for >= 0.6",
              code_family="nvrx", optional=True),
)

CPU_SAVE = (
    Patch("save_cuda_synchronize", "cpu_save", ("torch.cuda:synchronize",),
          "FileSystemWriterAsync.preload_tensors calls torch.cuda.synchronize() whenever non_blocking, which the "
          "synchronous save path always passes: nothing to wait for on the CPU",
          Reads(FS_ASYNC, "preload_tensors", "synchronize"), to(s.no_wait),
          summary="torch.cuda.synchronize -> no-op (FileSystemWriterAsync.preload_tensors)"),
    Patch("save_flag_current_device", "cpu_save", ("torch.cuda:current_device",),
          "save_state_dict_async_finalize puts its failure flag on torch.cuda.current_device() before broadcasting "
          "it; gloo broadcasts the CPU tensor",
          Reads(SAVER, "save_state_dict_async_finalize", "current_device"), to(s.cpu_device),
          summary="torch.cuda.current_device -> 'cpu' (save_state_dict_async_finalize's flag tensor)"),
    Patch("save_process_memory", "cpu_save", (f"{FS_ASYNC}:_process_memory",),
          "every writer logs its memory use through psutil, which megatron-core does not depend on and the venv "
          "lacks: without it every write fails with \"psutil is not installed\"; its log reads 0",
          Reads(FS_ASYNC, "_process_memory", "HAVE_PSUTIL"), to(s.no_memory),
          needed=flag_false(FS_ASYNC, "HAVE_PSUTIL"),
          summary="filesystem_async._process_memory -> 0 (psutil is not installed)"),
    Patch("save_results_queue", "save_speed", (f"{FS_ASYNC}:_results_queue",),
          "speed only: the synchronous save's writer threads hand their results to the caller through a queue "
          "Megatron creates as a spawn-context multiprocessing.Manager queue (get_write_results_queue), whose "
          "server process and unpickling cost ~12 s a rank on 2 cores; in the synchronous path producer and "
          "consumer are threads of one process, so a queue.Queue carries the same items",
          Reads(FS_ASYNC, "get_write_results_queue", "_results_queue"),
          lambda current, params: (queue.Queue(),), needed=value_is(None),
          summary="filesystem_async._results_queue -> queue.Queue() (sync save: no Manager process)"),
)


def _flag_while(module, attr):
    """Needed without CUDA while the module's flag is False."""
    return both(no_cuda, flag_false(module, attr))


MODEL = (
    Patch("embedding_group_cuda_copy", "model", ("torch:Tensor.cuda",),
          "LanguageModule.setup_embeddings_and_output_layer moves the tied word-embedding weight to CUDA before "
          "all-reducing it over the embedding group (tied embeddings with pp > 1); on CPU Tensor.cuda() is made "
          "the identity while the model is built, and gloo all-reduces the CPU tensor",
          Snippet("megatron.core.models.common.language_module.language_module", "weight.data = weight.data.cuda()"),
          to(s.identity_cuda)),
    Patch("mamba_ssm_rmsnorm_gated", "model", (f"{MAMBA}:HAVE_MAMBA_SSM", f"{MAMBA}:ExtendedRMSNorm"),
          "without mamba_ssm the mixer's gated RMSNorm base class is a MagicMock and MambaMixer refuses to "
          "build (HAVE_MAMBA_SSM); while building, HAVE_MAMBA_SSM is True and ExtendedRMSNorm is a CPU module "
          "with the same weight whose forward raises (a kernel stub) and whose sharded_state_dict is "
          "ExtendedRMSNorm's (make_sharded_tensors_for_checkpoint, weight sharded along axis 0 over TP); the "
          "mixer's ExtendedRMSNorm class itself is a MagicMock here, so its method cannot be reused",
          Snippet(MAMBA, "RMSNormGated = MagicMock()"), lambda current, params: (True, s.gated_norm_stub()),
          needed=_flag_while(MAMBA, "HAVE_MAMBA_SSM")),
    Patch("einops_flag", "model", (f"{MAMBA}:HAVE_EINOPS",),
          "einops is not installed; it is used only in the mixer's forward, which is never called here",
          Snippet(MAMBA, 'raise ImportError("einops is required by the Mamba model but cannot be imported")'),
          to(True), needed=_flag_while(MAMBA, "HAVE_EINOPS")),
    Patch("einops_flag_context_parallel", "model", ("megatron.core.ssm.mamba_context_parallel:HAVE_EINOPS",),
          "the same einops check in MambaContextParallel, which the mixer builds; einops is used only in forward",
          Snippet("megatron.core.ssm.mamba_context_parallel",
                  'raise ImportError("einops is required by the Mamba model but cannot be imported")'),
          to(True), needed=_flag_while("megatron.core.ssm.mamba_context_parallel", "HAVE_EINOPS")),
    Patch("cuda_current_device", "model", ("torch.cuda:current_device",),
          "the Mamba mixer allocates its conv1d, A_log, D, dt_bias and norm on torch.cuda.current_device() "
          "regardless of use_cpu_initialization; while building it is 'cpu'",
          Snippet(MAMBA, "device=torch.cuda.current_device()"), to(s.cpu_device)),
    Patch("cuda_rng_tracker_fork", "model", (f"{MAMBA}:get_cuda_rng_tracker",),
          "the Mamba mixer initialises its parameters under the CUDA RNG tracker's fork, which needs CUDA RNG "
          "states; while building, the mixer's tracker forks nothing (parameters are never used)",
          Snippet(MAMBA, "with get_cuda_rng_tracker().fork():"), to(s.no_fork_tracker)),
    Patch("hybrid_final_norm_tenorm", "model", ("megatron.core.models.hybrid.hybrid_block:TENorm",),
          "HybridStack hard-codes Transformer Engine's TENorm for its final norm; while building, the local "
          "spec's norm (the one get_gpt_layer_local_spec uses) stands in, same weight and key",
          Snippet("megatron.core.models.hybrid.hybrid_block", "self.final_norm = TENorm("),
          lambda current, params: (s.local_norm(),)),
)

MODEL_OPTIMIZER = (
    Patch("optimizer_cuda_scalars", "model_optimizer", ("torch:tensor",),
          "MixedPrecisionOptimizer (the base of the DistributedOptimizer) allocates its found-inf flag, overflow "
          "buffer and unit scale with torch.tensor(..., device='cuda'); while the optimizer is built, a "
          "torch.tensor asked for a CUDA device is made on the CPU (they are used only in step's unscaling)",
          Snippet(OPTIMIZER, "self._scale_one = torch.tensor([1.0], dtype=torch.float, device='cuda')"),
          wrapping(s.host_tensor)),
    Patch("optimizer_cuda_type_names", "model_optimizer", ("torch:Tensor.type",),
          "the DistributedOptimizer sorts parameters into fp32 / float16 groups by their CUDA type names "
          "(torch.cuda.FloatTensor, ...) and refuses any other; while the optimizer is built, Tensor.type() of "
          "a CPU tensor answers the CUDA name of the same dtype",
          Snippet(DISTRIB, "elif model_param.type() == 'torch.cuda.FloatTensor':"), wrapping(s.cuda_type_name)),
    Patch("optimizer_gather_cuda_copy", "model_optimizer", ("torch:Tensor.cuda",),
          "the fully_reshardable format gathers each DP rank's state shard over the data-parallel group "
          "(get_parameter_state_dp_zero) after copying it to CUDA; Tensor.cuda() is the identity, as for "
          "embedding_group_cuda_copy, and gloo gathers the CPU tensors",
          Snippet(DISTRIB, "send_tensor = send_tensor.cuda()"), to(s.identity_cuda)),
    Patch("optimizer_empty_state_step", "model_optimizer", (f"{DISTRIB}:DistributedOptimizer.state_dict",),
          "without Transformer Engine or Apex, DistributedOptimizer.state_dict reads the step from torch's "
          "per-parameter states and asserts there is exactly one; an optimizer that holds no parameter here "
          "has none (param groups are aligned over all ranks, so a pipeline stage without experts still has an "
          "expert optimizer with empty groups). For such an optimizer only, state_dict runs its Transformer "
          "Engine branch (what GPU training runs: the step from non-empty param groups, here none); needed "
          "while distrib_optimizer.HAVE_APEX_OR_TE is False, whatever the CUDA state",
          Snippet(DISTRIB, 'steps = list(set([s["step"].item() for s in inner_state_dict["state"].values()]))'),
          wrapping(s.te_branch_when_empty), needed=flag_false(DISTRIB, "HAVE_APEX_OR_TE")),
)

# Finding F (docs/megatron-findings.md): never in force for the load that observes F; a real round trip applies it
# only to load again after that load raised, so the optimizer's own states past F can be verified.
DISTRIBUTED_OPTIMIZER_LOAD = (
    Patch("optimizer_load_step_from_own_state", "distributed_optimizer_load",
          (f"{DISTRIB}:DistributedOptimizer._set_main_param_and_optimizer_states",),
          "finding F: without Transformer Engine or Apex, DistributedOptimizer.load_state_dict puts the "
          "checkpoint's step into torch AdamW's per-parameter states, load_parameter_state_from_fully_reshardable "
          "leaves `step` out of the tensors it hands on, and the setter copies every state of the parameter from "
          "those tensors (KeyError 'step'). Handed no `step`, the setter takes the one the parameter's own state "
          "holds (copied onto itself); every other state, and the main parameter, still come from the tensors "
          "Megatron's loader cut",
          All(Snippet(DISTRIB, "dst_tensors[key].copy_(tensors[key])"),
              Reads(DISTRIB, "_set_main_param_and_optimizer_states", "model_param_group_index_map"),
              Reads(DISTRIB, "load_parameter_state_from_fully_reshardable", "_set_main_param_and_optimizer_states")),
          wrapping(s.step_from_own_state),
          needed=both(flag_false(DISTRIB, "HAVE_APEX_OR_TE"),
                      compares_with(DISTRIB, "load_parameter_state_from_fully_reshardable", "step",
                                    "the fully_reshardable loader skips `step`")),
          summary="DistributedOptimizer._set_main_param_and_optimizer_states takes a missing step from the "
                  "optimizer's own state (finding F)"),
)

MODEL_GDP = (
    Patch("gdp_mamba_ssm_rmsnorm_gated", "model_gdp", (f"{GDP}:HAVE_MAMBA_SSM", f"{GDP}:ExtendedRMSNorm"),
          "the same gated RMSNorm as mamba_ssm_rmsnorm_gated, in the GDP mixer's module: without mamba_ssm "
          "GatedDeltaProductMixer refuses to build (HAVE_MAMBA_SSM) and its ExtendedRMSNorm is a MagicMock; while "
          "building, HAVE_MAMBA_SSM is True and ExtendedRMSNorm is the same CPU stand-in (weight sharded along "
          "axis 0 over TP, forward raises)",
          Snippet(GDP, "RMSNormGated = MagicMock()"), lambda current, params: (True, s.gated_norm_stub()),
          needed=_flag_while(GDP, "HAVE_MAMBA_SSM")),
    Patch("gdp_fla_kernels", "model_gdp", (f"{GDP}:HAVE_FLA", f"{GDP}:chunk_gated_delta_product", f"{GDP}:l2_norm"),
          "without flash-linear-attention (fla) GatedDeltaProductMixer refuses to build (HAVE_FLA); while "
          "building, HAVE_FLA is True and the mixer's chunk_gated_delta_product and l2_norm are kernel stubs that "
          "raise KernelNotAvailable when called (the mixer only stores the kernel at construction)",
          Snippet(GDP, "from fla.ops.gated_delta_product import chunk_gated_delta_product"),
          to(True, s.kernel_stub("fla's chunk_gated_delta_product"), s.kernel_stub("fla's l2_norm")),
          needed=_flag_while(GDP, "HAVE_FLA")),
    Patch("gdp_causal_conv1d", "model_gdp", (f"{GDP}:check_fla_sequence_packing_support", f"{GDP}:causal_conv1d_fn"),
          "GatedDeltaProductMixer asserts at construction that causal_conv1d >= 1.4.0 is installed (its packed-"
          "sequence conv, used only in forward), which imports causal_conv1d; while building, the mixer's "
          "check answers supported and its causal_conv1d_fn is a kernel stub that raises KernelNotAvailable "
          "(without the package it is None)",
          Snippet(GDP, "ok, reason = check_fla_sequence_packing_support()"),
          to(s.supported, s.kernel_stub("causal_conv1d's causal_conv1d_fn")),
          needed=both(no_cuda, target_is_none(1, "causal_conv1d_fn"))),
    Patch("gdp_einops_context_parallel", "model_gdp", ("megatron.core.ssm.gdp_context_parallel:HAVE_EINOPS",),
          "GDPContextParallel, which the GDP mixer builds, refuses to build without einops (HAVE_EINOPS); "
          "einops is used only in forward",
          Snippet("megatron.core.ssm.gdp_context_parallel", 'raise ImportError("einops is required but cannot be imported")'),
          to(True), needed=_flag_while("megatron.core.ssm.gdp_context_parallel", "HAVE_EINOPS")),
    Patch("gdp_cuda_current_device", "model_gdp", ("torch.cuda:current_device",),
          "the GDP mixer allocates its conv1d, dt_bias, A_log and norm on torch.cuda.current_device() regardless "
          "of use_cpu_initialization; while building it is 'cpu' (the same patch as cuda_current_device)",
          Snippet(GDP, "device=torch.cuda.current_device()"), to(s.cpu_device)),
    Patch("gdp_cuda_rng_tracker_fork", "model_gdp", (f"{GDP}:get_cuda_rng_tracker",),
          "the GDP mixer initialises its parameters under the CUDA RNG tracker's fork; while building, the "
          "mixer's tracker forks nothing (parameters are never used)",
          Snippet(GDP, "with get_cuda_rng_tracker().fork():"), to(s.no_fork_tracker)),
)

FLOAT16_OPTIMIZER = (
    # The worlds' parameters are CPU tensors on any machine: needed always.
    Patch("float16_optimizer_cuda_type_names", "float16_optimizer", ("torch:Tensor.type",),
          "Float16OptimizerWithFloat16Params accepts only torch.cuda.{Half,BFloat16,Float}Tensor parameters and "
          "checks with Tensor.type(); for one opt_save / opt_load task a CPU tensor answers the CUDA name of its "
          "dtype (a conversion .type(dtype) is unchanged)",
          Snippet(OPTIMIZER, "if param.type() in ['torch.cuda.HalfTensor', 'torch.cuda.BFloat16Tensor']:"),
          wrapping(s.cuda_type_name), needed=always),
    Patch("float16_optimizer_cuda_scalars", "float16_optimizer", ("torch:tensor",),
          "the mixed-precision optimizer keeps its loss scale in a one-element CUDA tensor; for one opt_save / "
          "opt_load task torch.tensor(..., device='cuda') is made on the CPU",
          Snippet(OPTIMIZER, "self._scale_one = torch.tensor([1.0], dtype=torch.float, device='cuda')"),
          wrapping(s.host_tensor), needed=always),
)

TRAINING = (
    Patch("training_rng_state_cuda", "training", (f"{TRAINING_CKPT}:get_rng_state",),
          "save_checkpoint calls get_rng_state, which reads torch.cuda.get_rng_state, before --no-save-rng drops "
          "the result; while saving it answers None (never written)",
          Snippet(TRAINING_CKPT, "'cuda_rng_state': torch.cuda.get_rng_state(),"),
          to(lambda *args, **kwargs: None)),
    Patch("validate_args_device_arch", "training", (f"{ARGUMENTS}:get_device_arch_version",),
          "validate_args asks the GPU's architecture (torch.cuda.get_device_properties) when TP > 1; while "
          "validating it answers 0 (pre-Blackwell), so Megatron requires CUDA_DEVICE_MAX_CONNECTIONS=1, which "
          "the run sets as Megatron's launch scripts do",
          Snippet(ARGUMENTS, "and get_device_arch_version() < 10:"), to(lambda: 0)),
    Patch("tracker_cuda_all_reduce", "training_load", ("torch:tensor",),
          "load_checkpoint reads the tracker file (read_metadata), whose iteration it all-reduces as a CUDA tensor "
          "(gloo reduces it as well on the host); while loading, torch.tensor(..., device='cuda') is made on the CPU",
          Snippet(TRAINING_CKPT, "iters_cuda = torch.tensor([iteration], dtype=torch.long, device='cuda')"),
          wrapping(s.host_tensor)),
    Patch("training_argv", "training_run", ("sys:argv",),
          "Megatron's parse_args reads the process's command line; while it parses, sys.argv is the run's "
          "(pretrain_<model> and the flags written from the plan's model request)",
          Snippet(ARGUMENTS, "args = parser.parse_args()"),
          lambda current, params: (["pretrain_" + params["model"]] + list(params["argv"]),), needed=always),
    Patch("training_environment", "training_run",
          ("os:environ[RANK]", "os:environ[WORLD_SIZE]", "os:environ[CUDA_DEVICE_MAX_CONNECTIONS]"),
          "parse_args takes the rank and world size from RANK and WORLD_SIZE, and validate_args requires "
          "CUDA_DEVICE_MAX_CONNECTIONS=1 (as Megatron's launch scripts set it) at TP > 1 before Blackwell; while "
          "Megatron parses and validates they are the run's",
          All(Snippet(ARGUMENTS, "os.getenv('RANK', '0')"), Snippet(ARGUMENTS, "CUDA_DEVICE_MAX_CONNECTIONS")),
          lambda current, params: (str(params["rank"]), str(params["world_size"]), "1"), needed=always),
    SetUp("training_global_args", "training_globals", f"{GLOBAL_VARS}:_GLOBAL_ARGS (set_global_variables)",
          "save_checkpoint and load_checkpoint read Megatron's global args: set from the run's parsed and validated "
          "args by Megatron's set_global_variables (no tokenizer: nothing is tokenized) while the run saves or "
          "loads, unset after",
          All(Exists(GLOBAL_VARS, "set_global_variables"), Exists(GLOBAL_VARS, "unset_global_variables")),
          s.set_global_args, s.unset_global_args),
)

ONE_PROCESS_RANKS = (
    Patch("one_process_ranks", "one_process_ranks",
          ("torch.distributed:is_initialized", "torch.distributed:get_rank", "torch.distributed:get_world_size"),
          "Megatron code that only asks torch.distributed for ranks (select_pipeline_segment, "
          "validate_sharding_integrity) runs in the adapter's one process: an initialized job in which this process "
          "is global rank 0 and a FakeGroup answers for its own group",
          All(*(Exists("torch.distributed", f) for f in ("is_initialized", "get_rank", "get_world_size"))),
          to(s.one_process_initialized, s.one_process_rank, s.one_process_world_size), needed=always),
)

FIXES = (
    Patch("to_state_dict_order", "fix", (f"{TASD}:MCoreTensorAwareStateDict.to_state_dict",),
          "MCoreTensorAwareStateDict.to_state_dict applies the factory merges after merging the loaded shards into "
          "the common and nonpersistent tree, as serialization.load does (finding C's proposed fix)",
          Snippet(TASD, "apply_factory_merges(sharded_part, sh_ten_factories)"), wrapping(s.to_state_dict_merges_last),
          needed=always),
)

TABLE = GTP_FLAGS + CPU_SAVE + MODEL + MODEL_OPTIMIZER + MODEL_GDP + DISTRIBUTED_OPTIMIZER_LOAD + FLOAT16_OPTIMIZER \
    + TRAINING + ONE_PROCESS_RANKS + FIXES

# What each family is for (the headings of docs/megatron-patches.md's generated tables), in table order.
FAMILIES = {
    "gtp": "GTP availability flags (every world worker; a round trip of a GTP layout)",
    "cpu_save": "dist_checkpointing's synchronous save and load on CPU (world tasks that save or load, round-trip "
                "worlds)",
    "save_speed": "the synchronous save's result queue (speed only; world tasks that save, round-trip worlds)",
    "model": "building a real GPTModel or HybridModel (model dump, real round trips, findings A and B)",
    "model_optimizer": "building a real model's DistributedOptimizer (model dump --optimizer, real round trips)",
    "model_gdp": "building the GatedDeltaProduct mixer (model dump --mixer gdp)",
    "distributed_optimizer_load": "a DistributedOptimizer's second load_state_dict, after the unshimmed one raised "
                                  "finding F (real round trips of the DistributedOptimizer)",
    "float16_optimizer": "the optimizer_resume tasks' Float16OptimizerWithFloat16Params",
    "training": "Megatron's training entry points (roundtrip --real, load path training)",
    "training_run": "while Megatron parses and validates the training run's args",
    "training_globals": "while the training run saves or loads",
    "training_load": "while the training run's load_checkpoint runs (roundtrip --real, load path training)",
    "one_process_ranks": "ops that ask torch.distributed for ranks in the adapter's one process (select_segment, "
                         "integrity)",
    "fix": "declared optional fixes (--fix NAME), never applied by default",
}
