"""This rank of a round-trip world: who it is (Open MPI's environment), where it is (DIR/status/<phase>_rank_<r>.json,
for naming a hung rank), what it recorded (DIR/results/<phase>_rank_<r>.json) and what it measures."""

import os
import threading
import time

from megatron_adapter.roundtrip.plan import read_json, write_atomic


class Status:
    """DIR/status/<phase>_rank_<r>.json: where this rank is, for naming a hung rank."""

    def __init__(self, work, phase, rank):
        os.makedirs(os.path.join(work, "status"), exist_ok=True)
        self.path = os.path.join(work, "status", f"{phase}_rank_{rank}.json")
        self.step = 0
        self.scenario = None

    def __call__(self, stage):
        self.step += 1
        write_atomic(self.path, {"pid": os.getpid(), "stage": stage, "step": self.step, "scenario": self.scenario,
                                 "since": time.time()})


class World:
    """This rank's view of its world: the plan, its coordinates, its status and result files; once Megatron is
    imported (attach), Megatron, torch, the codec and the device every scenario uses, and the patches in force
    for the scenario that runs (scenario_patches, an ExitStack closed when the scenario ends)."""

    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.plan = read_json(os.path.join(self.work, "plan.json"))
        self.rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
        self.size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        self.local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("LOCAL_RANK", "0")))
        self.phase = args.phase
        self.status = Status(self.work, self.phase, self.rank)
        os.makedirs(os.path.join(self.work, "results"), exist_ok=True)
        self.result_path = os.path.join(self.work, "results", f"{self.phase}_rank_{self.rank}.json")
        self.result = {"rank": self.rank, "world_size": self.size, "phase": self.phase, "pid": os.getpid(),
                       "scenarios": []}
        self.device = self.plan.get("device", "cpu")
        self.scenario_patches = None
        self.built = None  # the model the handshake built and described for the scenario that runs (handshake.Built)

    def attach(self, M, codec, device):
        import torch.distributed as dist
        from megatron.core import dist_checkpointing
        self.M, self.torch, self.codec, self.device = M, M.torch, codec, device
        self.dist, self.dcp = dist, dist_checkpointing

    def flush(self):
        write_atomic(self.result_path, self.result)

    def fault(self, kind):
        """--fault KIND:RANK[:SCENARIO] applies to this rank (and scenario) only."""
        f = self.args.fault
        if not f:
            return False
        parts = f.split(":")
        if parts[0] != kind or int(parts[1]) != self.rank:
            return False
        return len(parts) < 3 or parts[2] == self.status.scenario

    def stage(self, stage):
        """Records the stage this rank entered (its status file) and returns it."""
        self.status(stage)
        return stage


def exit_with_parent():
    """A rank whose mpirun is gone (killed at a timeout) must not live on as an orphan."""
    parent = os.getppid()

    def watch():
        while True:
            if os.getppid() != parent:
                os._exit(3)
            time.sleep(0.5)
    threading.Thread(target=watch, daemon=True).start()


def vm_field(name):
    """A /proc/self/status field in bytes (VmHWM, VmRSS), 0 where unavailable."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak_rss():
    """Resets VmHWM to the current RSS (Linux clear_refs 5); False where not permitted."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _leaf_values(sd):
    from megatron_adapter.codec import leaves
    return [leaf for _, leaf in leaves(sd)]


def tensor_bytes(sd, torch):
    n = 0
    for v in _leaf_values(sd):
        data = getattr(v, "data", None)
        if isinstance(data, torch.Tensor):
            n += data.numel() * data.element_size()
    return n


def memcpy_seconds(sd, torch, device):
    """Best of three copies of this rank's tensors (the bandwidth the save/load is compared to)."""
    tensors = [v.data for v in _leaf_values(sd) if isinstance(getattr(v, "data", None), torch.Tensor)]
    best = None
    for _ in range(3):
        if device != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for t in tensors:
            torch.empty_like(t).copy_(t)
        if device != "cpu":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best or 0.0


def measure_state(world, entry, sd):
    """The state's bytes and its memcpy time into the scenario's result entry."""
    entry["bytes"] = tensor_bytes(sd, world.torch)
    entry["memcpy_seconds"] = memcpy_seconds(sd, world.torch, world.device)


def start_measured_call(world, entry, what, name=None):
    """Lines every rank up, then zeroes the peak counters just before the call (`name`, by default
    dist_checkpointing.<what>): returns (on CUDA?, the stage name the call runs under)."""
    torch = world.torch
    name = name or f"dist_checkpointing.{what}"
    world.stage(f"{what}: barrier before {name}")
    world.dist.barrier()
    cuda = world.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    entry["rss_before"] = vm_field("VmRSS")
    entry["peak_reset"] = reset_peak_rss()
    return cuda, world.stage(f"{what}: {name}")


def record_peaks(world, entry, cuda, t0):
    """The call's seconds since t0 and its peak memory into the scenario's result entry."""
    torch = world.torch
    entry["seconds"] = time.perf_counter() - t0
    entry["peak_rss"] = vm_field("VmHWM")
    if cuda:
        entry["cuda_max_allocated"] = torch.cuda.max_memory_allocated()
        entry["cuda_max_reserved"] = torch.cuda.max_memory_reserved()
