"""The describe/plan handshake of a real scenario planned in its own worlds (plan.json's "describe";
harness/roundtrip/world_handshake.h, docs/roundtrip.md "Model builds per real round trip"). Before the scenario runs
here, this rank builds its model once, describes it as the describer would (the same tree, worlds/model_tasks.py's
described_tree, and the same codec call) into <scenario dir>/described/<phase>_rank_<r>.json, and waits for the C++
side's markers there: plan.ready, and on the load side checkpoint.complete; skip, written instead, means the scenario
does not run. The model it built then goes on to be cast, filled and saved, or loaded (states.real_state)."""

import collections
import os
import time
import traceback

from megatron_adapter.roundtrip.plan import write_atomic

PLAN_READY, SKIP, CHECKPOINT_COMPLETE, DESCRIBED = "plan.ready", "skip", "checkpoint.complete", "described"

# The model this rank built and described for its scenario: its request (with this rank) and its chunks.
Built = collections.namedtuple("Built", "request chunks")


class HandshakeTimeout(Exception):
    """No marker came in time: the C++ side plans beside the worlds, so this is the harness's failure."""


def wait_for(sdir, marker, timeout):
    """True once sdir/marker exists, False once sdir/skip does (the scenario does not run here)."""
    deadline = time.monotonic() + timeout
    while True:
        if os.path.exists(os.path.join(sdir, marker)):
            return True
        if os.path.exists(os.path.join(sdir, SKIP)):
            return False
        if time.monotonic() > deadline:
            raise HandshakeTimeout(f"neither {marker} nor {SKIP} in {sdir} after {timeout:.0f} s")
        time.sleep(0.1)


def describe(world, req):
    """(the chunks, or None where none were built, and the describer's answer for this rank's model): {"entries"},
    {"unsupported"} (the factory cannot build it here), {"megatron_error"} (Megatron's sharded_state_dict raised)
    or {"harness_error"}."""
    from megatron_adapter import patches
    from megatron_adapter.real_models import factory
    from megatron_adapter.real_models import roundtrip_models as rm
    from megatron_adapter.worlds import model_tasks
    chunks = None
    try:
        chunks = rm.build_chunks(world.M, req)
        with patches.applied(*factory.patch_families(req)):
            tree = model_tasks.described_tree(world.M, chunks, req)
        return chunks, {"entries": world.codec.encode(tree, "dotted")}
    except factory.UnsupportedConfig as exc:
        return None, {"unsupported": str(exc)}
    except factory.MegatronRefused as exc:
        return None, {"megatron_error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - told to the C++ side, which ends the scenario as a harness error
        traceback.print_exc()
        return None, {"harness_error": f"the real model could not be built here: {type(exc).__name__}: {exc}"[:2000]}


def _build_and_describe(world, scenario, sdir):
    from megatron_adapter.roundtrip import states
    req = dict(scenario["describe"][world.phase], rank=world.rank)
    world.stage(f"{world.phase}: build and describe Megatron's real model")
    if req["gtp"] > 1:  # Megatron's GTP checkpoint code runs only with these (as model dump's)
        states.gtp_patches(world)
    chunks, answer = describe(world, req)
    world.built = Built(req, chunks) if chunks is not None else None
    os.makedirs(os.path.join(sdir, DESCRIBED), exist_ok=True)
    write_atomic(os.path.join(sdir, DESCRIBED, f"{world.phase}_rank_{world.rank}.json"), answer)


def prepared(world, scenario, entry):
    """Whether this rank runs the scenario after the handshake (False: the C++ side skipped it). A scenario without
    "describe" runs at once; one already planned (a load world started again after a refused load) is built by
    the run as usual, undescribed. The seconds spent waiting go to the entry."""
    if "describe" not in scenario:
        return True
    sdir = os.path.join(world.work, scenario["dir"])
    if os.path.exists(os.path.join(sdir, SKIP)):
        return False
    if not os.path.exists(os.path.join(sdir, PLAN_READY)):
        _build_and_describe(world, scenario, sdir)
    started = time.perf_counter()
    timeout = world.args.timeout
    world.stage(f"{world.phase}: wait for the scenario's plan ({PLAN_READY})")
    ready = wait_for(sdir, PLAN_READY, timeout)
    if ready and world.phase == "load":
        world.stage(f"load: wait for the complete checkpoint ({CHECKPOINT_COMPLETE})")
        ready = wait_for(sdir, CHECKPOINT_COMPLETE, timeout)
    entry["handshake_wait_seconds"] = time.perf_counter() - started
    return ready
