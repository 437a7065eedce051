"""merge_factories_first: serialization.load applies its factory merges before its merge of the loaded shards with
the common and nonpersistent parts (to_state_dict's order). Its four patches share one state, made afresh each time
the mutant is planted (Mutant.shared): the factories load_preprocess split off, the id of what the strategy loaded,
Megatron's own apply_factory_merges, and whether the merges already ran."""


def shared_state():
    return {}


def hold_factories(original, M, held):
    def load_preprocess(sharded_state_dict):
        out = original(sharded_state_dict)
        held["factories"], held["done"] = out[2], False
        return out
    return load_preprocess


def note_loaded(original, M, held):
    def load(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        held["loaded"] = id(out)
        return out
    return load


def merge_factories_before(original, M, held):
    def merge_first(x1, x2, *args, **kwargs):
        if held.get("loaded") == id(x2) and held.get("factories") is not None:
            x2 = held["apply_factory_merges"](x2, held["factories"])
            held["done"] = True
        return original(x1, x2, *args, **kwargs)
    return merge_first


def skip_merged_factories(original, M, held):
    held["apply_factory_merges"] = original

    def merges(x1, x2, *args, **kwargs):
        if held.get("done"):
            held["done"] = False
            return x1
        return original(x1, x2, *args, **kwargs)
    return merges
