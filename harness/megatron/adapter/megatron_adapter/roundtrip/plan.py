"""What a round-trip rank reads from the C++ plan (harness/roundtrip/world_plan.cc): plan.json, each scenario's
catalogue and rank plans, and the oracle's encoding of every element's value. No layout or retarget rule lives
here: the segments and the expected values are the C++ reference's."""

import json
import os

SENTINEL = -1  # what a loaded entry holds before the load: "never written"
LOAD_PATHS = ("dist_checkpointing", "training", "fully_parallel")


class PlanError(Exception):
    """plan.json lacks what this file needs: a harness error (the C++ plan and this reader disagree)."""


def write_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Oracle:
    """A scenario's oracle encoding, from its catalogue.json "oracle": {"key_shift": N, "dtype": D} (the C++
    plan's choice, harness/roundtrip/oracle_encoding.h; there is no copy of it in Python): element g of the key
    with id k holds (k << N) | its linear global index, exact in parameters of dtype D (float64, or float32
    where the scenario keeps Megatron's DistributedOptimizer)."""

    DTYPES = ("float64", "float32")

    def __init__(self, catalogue):
        oracle = catalogue.get("oracle") if isinstance(catalogue, dict) else None
        shift = oracle.get("key_shift") if isinstance(oracle, dict) else None
        dtype = oracle.get("dtype") if isinstance(oracle, dict) else None
        if not isinstance(shift, int) or isinstance(shift, bool) or not 1 <= shift <= 62 or dtype not in self.DTYPES:
            raise PlanError('catalogue.json needs "oracle": {"key_shift": N, "dtype": "float64" | "float32"} with N an '
                            "integer in 1..62 (the oracle's key encoding, written by the C++ plan); got "
                            f'"oracle": {json.dumps(oracle)}')
        self.key_shift, self.dtype = shift, dtype

    def values(self, torch, shape, segments, device="cpu"):
        return fill(torch, list(shape), segments, device, self.key_shift)


def fill(torch, shape, segments, device, key_shift):
    """An int64 tensor of `shape` whose rows follow the segments; rows no segment covers are 0."""
    t = torch.zeros(tuple(shape), dtype=torch.int64)
    for begin, rows, key_id, gshape, goff, p in segments:
        strides, s = [0] * len(gshape), 1
        for a in range(len(gshape) - 1, -1, -1):
            strides[a], s = s, s * gshape[a]
        base = key_id << key_shift
        for a in range(p):
            base += goff[a] * strides[a]
        if len(shape) == 0:
            t.fill_(base)
            continue
        local = [rows] + list(shape[1:])
        value = torch.full(tuple(local), base, dtype=torch.int64)
        for j, n in enumerate(local):
            idx = torch.arange(n, dtype=torch.int64) + goff[p + j]
            view = [1] * len(local)
            view[j] = n
            value += (idx * strides[p + j]).reshape(view)
        t[begin:begin + rows] = value
    return t.to(device)


def load_path_of(scenario):
    """Which of Megatron's entry points the scenario's worlds call (the plan's "load_path")."""
    path = scenario.get("load_path")
    if path not in LOAD_PATHS:
        raise PlanError(f'plan.json scenario {scenario.get("name")!r} needs "load_path": one of {LOAD_PATHS}, '
                        f"got {path!r}")
    return path


class ScenarioFiles:
    """One scenario's folder and what this rank reads there: its rank plan (<phase>_rank_<r>.json, prefix
    "save" or "load"), the catalogue and its oracle encoding."""

    def __init__(self, work, scenario, phase, rank):
        self.scenario, self.rank = scenario, rank
        self.dir = os.path.join(work, scenario["dir"])
        self.rank_plan = read_json(os.path.join(self.dir, f"{phase}_rank_{rank}.json"))
        self.catalogue = read_json(os.path.join(self.dir, "catalogue.json"))
        self.oracle = Oracle(self.catalogue)

    @property
    def training(self):
        return load_path_of(self.scenario) == "training"

    @property
    def saved_by_older_megatron(self):
        """What the training save leaves out to write its checkpoint as an older Megatron-LM did ({"args": [...],
        "param_group_fields": [...]}, harness/roundtrip/world_scenario.h OlderMegatronCheckpoint), or None."""
        return self.scenario.get("saved_by_older_megatron")

    @property
    def fully_parallel(self):
        """Whether dist_checkpointing's save and load go through Megatron's fully parallel strategy wrappers."""
        return load_path_of(self.scenario) == "fully_parallel"

    @property
    def kind(self):
        return self.rank_plan.get("kind")

    def path(self, name):
        return os.path.join(self.dir, name)

    def expected(self):
        """This load rank's oracle (oracle_rank_<r>.json): what it must hold after the load."""
        return read_json(self.path(f"oracle_rank_{self.rank}.json"))


def scenario_files(world, scenario, table):
    """This rank's files of one scenario (its stage "<phase>: build state"), and what `table` does for its rank
    plan's "kind" (harness/roundtrip/world_plan.h ScenarioKind); PlanError for a kind the table lacks."""
    world.stage(f"{world.phase}: build state")
    files = ScenarioFiles(world.work, scenario, world.phase, world.rank)
    handler = table.get(files.kind)
    if handler is None:
        raise PlanError(f"{world.phase}_rank_{world.rank}.json: unknown kind {files.kind!r} (known: {', '.join(table)})")
    return files, handler
