"""Counts the real models a round trip builds (issue 30: "builds every real model twice"), by process, without
changing the harness: on PYTHONPATH with IH_COUNT_MODEL_BUILDS=FILE, every Python process the run starts (the
describing adapter and its forked world workers, each mpirun rank) appends one JSON line to FILE per call of the
adapter's one real-model builder, megatron_adapter.real_models.factory.build. bench/count_model_builds.sh reads
the lines. Without IH_COUNT_MODEL_BUILDS this file does nothing."""

import importlib.abc
import importlib.util
import json
import os
import sys

_LOG = os.environ.get("IH_COUNT_MODEL_BUILDS")
_MODULE = "megatron_adapter.real_models.factory"


def _role():
    argv = " ".join(sys.argv)
    if "roundtrip_world.py" in argv:
        return sys.argv[sys.argv.index("--phase") + 1] + " world" if "--phase" in sys.argv else "world"
    return "describer" if "adapter.py" in argv else "other"


class _CountBuilds(importlib.abc.MetaPathFinder):
    """Wraps factory.build when the module is first imported (before anyone imports the name from it)."""

    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            build = module.build

            def counted(M, req):
                with open(_LOG, "a", encoding="utf-8") as out:
                    sizes = {k: req.get(k) for k in ("model", "tp", "pp", "ep", "gtp", "dp", "rank", "mixer")}
                    out.write(json.dumps({"pid": os.getpid(), "role": _role(), **sizes}) + "\n")
                return build(M, req)

            module.build = counted

        spec.loader.exec_module = exec_module
        return spec


if _LOG:
    sys.meta_path.insert(0, _CountBuilds())
