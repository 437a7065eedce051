"""The patch registry against the real Megatron (docs/megatron-patches.md): every row fits this checkout and is
needed here (no CUDA); a row whose code is gone is a PatchError (a harness error, never a finding); the stubs
raise when called; each family is in force only inside its block and undone after. Rows of code only a Megatron-LM
checkout has (GDP, GTP, the training entry points) are marked `checkout` (ctest megatron_checkout_model_shims,
megatron_checkout_adapter_pytest)."""

import contextlib
import os
import sys

import pytest

from megatron_adapter import patches
from megatron_adapter.patches import stand_ins
from megatron_adapter.patches.checks import PatchError, Snippet
from megatron_adapter.patches.entries import Patch
from megatron_adapter.patches.table import TABLE

# A one-rank hybrid run of the training path (real_models/training_path.argv's request).
RUN = {"model": "hybrid", "pattern": "M*-", "tp": 1, "pp": 1, "ep": 1, "etp": 1, "gtp": 1, "hidden": 16,
       "num_attention_heads": 2, "num_query_groups": 1, "kv_channels": 8, "ffn_hidden": 32, "norm": "rms",
       "vocab": 32, "gated_mlp": False, "add_bias": False, "tied_embeddings": False, "num_experts": 0,
       "moe_ffn_hidden": 16, "mamba_heads": 2, "mamba_head_dim": 8, "mamba_groups": 1, "mamba_state": 8}
ON_ANY_MEGATRON = ("cpu_save", "save_speed", "model", "model_optimizer", "distributed_optimizer_load", "float16_optimizer",
                   "one_process_ranks")
ON_A_CHECKOUT = ("gtp", "model_gdp", "training", "training_run", "training_globals", "fix")


@pytest.mark.parametrize("family", ON_ANY_MEGATRON)
def test_every_row_fits_and_is_needed_here(M, family):
    report = patches.report(family)
    assert len(report) == sum(e.family == family for e in TABLE)
    assert all(r["needed"] and "not_applicable" not in r for r in report), report


@pytest.mark.checkout
@pytest.mark.parametrize("family", ON_A_CHECKOUT)
def test_every_row_of_a_checkout_fits_and_is_needed_here(checkout, family):
    report = patches.report(family)
    assert all(r["needed"] and "not_applicable" not in r for r in report), report


@pytest.mark.parametrize("name", ["cuda_current_device", "optimizer_empty_state_step", "save_cuda_synchronize",
                                  "optimizer_load_step_from_own_state"])
def test_a_row_whose_code_is_gone_is_a_patch_error(M, name):
    row = next(e for e in TABLE if e.name == name)
    module = getattr(row.fits, "module", "megatron.core")
    gone = Patch(row.name, row.family, [str(t) for t in row.targets], row.why, Snippet(module, "a line Megatron never had"),
                 row.make, row.needed)
    with pytest.raises(PatchError, match="no longer contains"):
        patches.report(row.family, table=(gone,))


def test_the_model_rows_stub_what_needs_a_gpu_and_are_undone(M):
    import torch
    import megatron.core.ssm.mamba_mixer as mixer
    before = (torch.Tensor.cuda, torch.cuda.current_device, mixer.ExtendedRMSNorm, mixer.get_cuda_rng_tracker)
    with patches.applied("model"):
        stub = mixer.ExtendedRMSNorm(16, group_size=8, norm_before_gate=False, dtype=torch.float32)
        assert tuple(stub.weight.shape) == (16,)
        with pytest.raises(stand_ins.KernelNotAvailable):
            stub(torch.zeros(2, 16))
        assert torch.cuda.current_device() == "cpu"
    assert (torch.Tensor.cuda, torch.cuda.current_device, mixer.ExtendedRMSNorm, mixer.get_cuda_rng_tracker) == before


def test_the_optimizer_rows_are_in_force_only_with_the_optimizer_and_are_undone(M):
    import torch
    import megatron.core.optimizer.distrib_optimizer as distrib

    def state():
        return torch.tensor, torch.Tensor.type, distrib.DistributedOptimizer.state_dict
    before = state()
    with patches.applied("model"):
        assert state() == before
    with patches.applied("model", "model_optimizer"):
        x = torch.zeros(2)
        assert x.type() == "torch.cuda.FloatTensor" and x.type(torch.float64).dtype == torch.float64
        assert torch.tensor([1.0], device="cuda").device.type == "cpu"
        assert distrib.DistributedOptimizer.state_dict is not before[2]
    assert state() == before


def test_the_save_rows_make_the_synchronous_save_run_on_cpu_and_are_undone(M):
    import torch
    from megatron.core.dist_checkpointing.strategies import filesystem_async as fs
    before = (torch.cuda.synchronize, torch.cuda.current_device, fs._process_memory, fs._results_queue)
    with patches.applied("cpu_save", "save_speed") as applied:
        assert torch.cuda.synchronize() is None and torch.cuda.current_device() == "cpu"
        assert fs._process_memory() == 0 and fs._results_queue is not None
        assert applied.summaries[0] == "torch.cuda.synchronize -> no-op (FileSystemWriterAsync.preload_tensors)"
    assert (torch.cuda.synchronize, torch.cuda.current_device, fs._process_memory, fs._results_queue) == before


@pytest.mark.checkout
def test_the_gdp_rows_are_in_force_only_for_a_gdp_model_and_are_undone(checkout):
    """In force only for a GDP model, each kernel stub raises, all undone (a name the module never had, a failed
    import's, is removed again)."""
    import megatron.core.ssm.gated_delta_product as gdp

    def state():
        return (gdp.HAVE_FLA, gdp.HAVE_MAMBA_SSM, gdp.ExtendedRMSNorm, gdp.causal_conv1d_fn,
                gdp.check_fla_sequence_packing_support, hasattr(gdp, "chunk_gated_delta_product"),
                hasattr(gdp, "l2_norm"))
    before = state()
    assert before[0] is False and before[1] is False and before[3] is None  # fla, mamba_ssm, causal_conv1d absent
    with patches.applied("model"):
        assert state() == before
    with patches.applied("model", "model_gdp"):
        assert gdp.check_fla_sequence_packing_support() == (True, None)
        for name in ("chunk_gated_delta_product", "l2_norm", "causal_conv1d_fn"):
            with pytest.raises(stand_ins.KernelNotAvailable):
                getattr(gdp, name)()
    assert state() == before


@contextlib.contextmanager
def _tracker_of_iteration(checkpointing, text):
    """A tracker file holding `text` in a one-rank gloo world (read_metadata all-reduces what it reads)."""
    import socket
    import tempfile
    import torch.distributed as dist
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        with tempfile.TemporaryDirectory() as d:
            tracker = checkpointing.get_checkpoint_tracker_filename(d)
            with open(tracker, "w", encoding="ascii") as f:
                f.write(text)
            yield tracker
    finally:
        dist.destroy_process_group()


def _tracker_read_fails(checkpointing):
    """read_metadata of a tracker file raises here without the training_load row (its CUDA all-reduce)."""
    with _tracker_of_iteration(checkpointing, "1") as tracker:
        with pytest.raises((RuntimeError, AssertionError)):
            checkpointing.read_metadata(tracker)


@pytest.mark.checkout
def test_what_the_training_rows_stand_in_for_fails_here_without_them(checkout):
    import torch
    from megatron.training import arguments, checkpointing
    for call in (torch.cuda.get_rng_state, arguments.get_device_arch_version):
        with pytest.raises((RuntimeError, AssertionError)):
            call()
    _tracker_read_fails(checkpointing)


@pytest.mark.checkout
def test_the_training_rows_are_in_force_while_applied_and_undone(checkout):
    from megatron.training import arguments, checkpointing, global_vars
    before = (checkpointing.get_rng_state, arguments.get_device_arch_version)
    with patches.applied("training"):
        assert checkpointing.get_rng_state("torch_dist", None, None) is None
        assert arguments.get_device_arch_version() == 0
    assert (checkpointing.get_rng_state, arguments.get_device_arch_version) == before
    argv, env = list(sys.argv), {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "CUDA_DEVICE_MAX_CONNECTIONS")}
    with patches.applied("training_run", model="gpt", argv=["--x"], rank=3, world_size=4):
        assert sys.argv == ["pretrain_gpt", "--x"] and (os.environ["RANK"], os.environ["WORLD_SIZE"]) == ("3", "4")
    assert sys.argv == argv and {k: os.environ.get(k) for k in env} == env
    from megatron_adapter.real_models import training_path
    with training_path.global_args(RUN, "load", "/nowhere", 1, 0):
        assert global_vars.get_args().hybrid_layer_pattern == "M*-" and sys.argv == argv
    assert global_vars._GLOBAL_ARGS is None


@pytest.mark.checkout
def test_the_tracker_is_read_on_the_cpu_while_training_load_is_applied(checkout):
    from megatron.training import checkpointing
    for text, read in (("7", (7, False)), ("release", (0, True))):
        with _tracker_of_iteration(checkpointing, text) as tracker, patches.applied("training_load"):
            assert checkpointing.read_metadata(tracker) == read
    _tracker_read_fails(checkpointing)  # undone
