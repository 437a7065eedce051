#!/usr/bin/env python3
"""The real-model shims are honest (docs/megatron-patches.md, "Real-model shims"): every shim
matches this checkout and is needed here (no CUDA); a shim whose snippet is gone is a ShimError (a
harness error, never a finding); the gated-norm kernel stub raises when called; the optimizer's shims
are in force only for `--optimizer` and do what they declare; the shims are undone after use. The same for
the training path's stand-ins (real_models/training_path.py): they match, what each replaces fails here
without it, and they are undone. Usage: shims_test.py --megatron-path DIR (the Megatron venv's python)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the adapter folder

failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failures.append(name)


def gone_code_is_a_shim_error(table, check_table, error, what):
    """A table entry whose source snippet is no longer in Megatron makes check_table() raise `error`."""
    saved = dict(table)
    try:
        name, (module, _, why) = next(iter(saved.items()))
        table[name] = (module, "a line Megatron never had", why)
        try:
            check_table()
            check(f"{what} whose code is gone is a ShimError", False, "check() passed")
        except error as exc:
            check(f"{what} whose code is gone is a ShimError", "no longer contains" in str(exc), str(exc))
    finally:
        table.clear()
        table.update(saved)


def main():
    path = sys.argv[sys.argv.index("--megatron-path") + 1] if "--megatron-path" in sys.argv else None
    from megatron_adapter.megatron_import import load_megatron
    load_megatron(path)
    import torch
    from megatron_adapter.real_models import shims
    report = shims.check()
    check("every shim matches the checkout", len(report) == len(shims.SHIMS))
    check("every shim is needed here (no CUDA)", all(s["needed"] for s in report), str(report))
    gone_code_is_a_shim_error(shims.SHIMS, shims.check, shims.ShimError, "a shim")
    import megatron.core.ssm.mamba_mixer as mixer
    before = (torch.Tensor.cuda, torch.cuda.current_device, mixer.ExtendedRMSNorm, mixer.get_cuda_rng_tracker)
    with shims.applied():
        stub = mixer.ExtendedRMSNorm(16, group_size=8, norm_before_gate=False, dtype=torch.float32)
        check("the gated-norm stub has the mixer norm's weight", tuple(stub.weight.shape) == (16,))
        try:
            stub(torch.zeros(2, 16))
            check("the gated-norm kernel stub raises when called", False, "it returned")
        except shims.KernelNotAvailable:
            check("the gated-norm kernel stub raises when called", True)
        check("torch.cuda.current_device is 'cpu' while building", torch.cuda.current_device() == "cpu")
    after = (torch.Tensor.cuda, torch.cuda.current_device, mixer.ExtendedRMSNorm, mixer.get_cuda_rng_tracker)
    check("the shims are undone after use", before == after)
    import megatron.core.optimizer.distrib_optimizer as distrib
    optimizer_before = (torch.tensor, torch.Tensor.type, distrib.DistributedOptimizer.state_dict)
    with shims.applied():
        check("the optimizer's shims are not in force for a model alone",
              (torch.tensor, torch.Tensor.type, distrib.DistributedOptimizer.state_dict) == optimizer_before)
    with shims.applied(optimizer=True):
        x = torch.zeros(2)
        check("a CPU float tensor answers its CUDA type name while the optimizer is built",
              x.type() == "torch.cuda.FloatTensor", x.type())
        check("a conversion through Tensor.type is unchanged", x.type(torch.float64).dtype == torch.float64)
        check("torch.tensor asked for CUDA is made on the CPU",
              torch.tensor([1.0], device="cuda").device.type == "cpu")
        check("DistributedOptimizer.state_dict is wrapped for an optimizer without state",
              distrib.DistributedOptimizer.state_dict is not optimizer_before[2])
    check("the optimizer's shims are undone after use",
          (torch.tensor, torch.Tensor.type, distrib.DistributedOptimizer.state_dict) == optimizer_before)
    gdp_shims()
    training_standins(torch)
    print("real-model shims: " + ("PASSED" if not failures else "FAILED: " + ", ".join(failures)))
    return 1 if failures else 0


def gdp_shims():
    """The GDP mixer's shims: in force only for a GDP model, each kernel stub raises, all undone (a name the
    module never had, a failed import's, is removed again)."""
    import megatron.core.ssm.gated_delta_product as gdp
    from megatron_adapter.real_models import shims

    def state():
        return (gdp.HAVE_FLA, gdp.HAVE_MAMBA_SSM, gdp.ExtendedRMSNorm, gdp.causal_conv1d_fn,
                gdp.check_fla_sequence_packing_support, hasattr(gdp, "chunk_gated_delta_product"),
                hasattr(gdp, "l2_norm"))

    before = state()
    check("without the shims GDP's kernels are absent here (fla, mamba_ssm, causal_conv1d)",
          before[0] is False and before[1] is False and before[3] is None, str(before))
    with shims.applied():
        check("the GDP shims are not in force for a Mamba model", state() == before)
    with shims.applied(gdp=True):
        check("the GDP mixer's causal_conv1d check answers supported while building",
              gdp.check_fla_sequence_packing_support() == (True, None))
        for name in ("chunk_gated_delta_product", "l2_norm", "causal_conv1d_fn"):
            try:
                getattr(gdp, name)()
                check(f"the GDP kernel stub {name} raises when called", False, "it returned")
            except shims.KernelNotAvailable:
                check(f"the GDP kernel stub {name} raises when called", True)
    check("the GDP shims are undone after use", state() == before, str(state()))


def tracker_read_fails(torch, checkpointing):
    """read_metadata of a tracker file in a one-rank gloo world raises here (its CUDA all-reduce)."""
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
                f.write("1")
            try:
                checkpointing.read_metadata(tracker)
                return False
            except (RuntimeError, AssertionError):
                return True
    finally:
        dist.destroy_process_group()


def training_standins(torch):
    from megatron.training import arguments, checkpointing
    from megatron_adapter.real_models import shims, training_path
    report = training_path.check()
    check("every training stand-in matches the checkout", len(report) == len(training_path.STANDINS))
    check("every training stand-in is needed here (no CUDA)", all(s["needed"] for s in report), str(report))
    for name, call in (("training_rng_state_cuda", torch.cuda.get_rng_state),
                       ("validate_args_device_arch", arguments.get_device_arch_version)):
        try:
            call()
            check(f"{name}: what it replaces fails without CUDA", False, "it returned")
        except (RuntimeError, AssertionError) as exc:
            check(f"{name}: what it replaces fails without CUDA", True, str(exc))
    check("tracker_cuda_all_reduce: read_metadata fails without CUDA", tracker_read_fails(torch, checkpointing))
    gone_code_is_a_shim_error(training_path.STANDINS, training_path.check, shims.ShimError, "a training stand-in")
    before = (checkpointing.get_rng_state, arguments.get_device_arch_version)
    with training_path.applied():
        check("the RNG states are not collected while saving", checkpointing.get_rng_state("torch_dist", None, None)
              is None)
        check("validate_args sees no GPU architecture", arguments.get_device_arch_version() == 0)
    check("the training stand-ins are undone after use",
          before == (checkpointing.get_rng_state, arguments.get_device_arch_version))


if __name__ == "__main__":
    sys.exit(main())
