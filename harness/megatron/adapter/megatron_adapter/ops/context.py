"""What every op handler gets: the imported Megatron and the adapter's per-process state (its worlds and the
answers it keeps for the requests that follow)."""

from megatron_adapter.error_kinds import classify
from megatron_adapter.errors import Unsupported, string
from megatron_adapter.ops.gtp_world_cases import GtpWorldCases
from megatron_adapter.worlds.gloo_worlds import WorldPool


class OpContext:
    """One per adapter process: ops take (ctx, req). Megatron functions are looked up through
    their module at call time (ctx.need), never bound at import, so a mutant that replaces a
    module attribute (mutants.py) changes what the ops answer."""

    def __init__(self, M):
        self.M = M
        self.worlds = WorldPool(M)  # the persistent gloo worlds, by layout
        self._gtp = None
        self.load_cache = {}  # load_state: case -> (world, per-rank results)
        self.model_dumps = {}  # model_dump: the last configuration -> every rank's answer

    @property
    def gtp(self):
        """The GTP world cases (started on first use)."""
        if self._gtp is None:
            self._gtp = GtpWorldCases(self.M, self.worlds)
        return self._gtp

    def need(self, attr_path, what):
        """The named Megatron attribute (module.attr) or Unsupported."""
        mod_name, _, attr = attr_path.partition(".")
        mod = getattr(self.M, mod_name, None)
        if mod is None:
            raise Unsupported(f"{what}: {self.M.import_errors.get(mod_name, mod_name + ' not importable')}")
        if attr and not hasattr(mod, attr):
            raise Unsupported(f"{what}: {mod.__name__}.{attr} does not exist in this Megatron")
        return getattr(mod, attr) if attr else mod

    def pattern(self, req, nullable=False):
        return string(req, "pattern", nullable=nullable)

    def maps(self, pattern):
        fn = self.need("interop.gpt_compatible_layer_maps", "GPT layer maps")
        try:
            return fn(pattern)
        except Exception as exc:  # noqa: BLE001 - every Megatron failure becomes a kind
            raise classify(exc)

    def call(self, attr_path, *args, type_kinds=None):
        """The named Megatron function called; what it raises becomes an OpError kind (error_kinds)."""
        fn = self.need(attr_path, attr_path)
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001
            raise classify(exc, type_kinds)
