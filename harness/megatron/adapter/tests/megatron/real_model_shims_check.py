#!/usr/bin/env python3
"""The real-model shims are honest (docs/megatron-patches.md, "Real-model shims"): every shim
matches this checkout and is needed here (no CUDA); a shim whose snippet is gone is a ShimError (a
harness error, never a finding); the gated-norm kernel stub raises when called; the shims are undone
after use. Usage: shims_test.py --megatron-path DIR (the Megatron venv's python)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the adapter folder

failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failures.append(name)


def main():
    path = sys.argv[sys.argv.index("--megatron-path") + 1] if "--megatron-path" in sys.argv else None
    from megatron_adapter.megatron_import import load_megatron
    load_megatron(path)
    import torch
    from megatron_adapter.real_models import shims
    report = shims.check()
    check("every shim matches the checkout", len(report) == len(shims.SHIMS))
    check("every shim is needed here (no CUDA)", all(s["needed"] for s in report), str(report))
    saved = dict(shims.SHIMS)
    try:
        name, (module, _, why) = next(iter(saved.items()))
        shims.SHIMS[name] = (module, "a line Megatron never had", why)
        try:
            shims.check()
            check("a shim whose code is gone is a ShimError", False, "check() passed")
        except shims.ShimError as exc:
            check("a shim whose code is gone is a ShimError", "no longer contains" in str(exc), str(exc))
    finally:
        shims.SHIMS.clear()
        shims.SHIMS.update(saved)
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
    print("real-model shims: " + ("PASSED" if not failures else "FAILED: " + ", ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
