"""JSON <-> Megatron conversions for the adapter: sharded-state-dict entries and trees.

Entries travel as a list of {"path": P, "entry": E} (docs/adapter-protocol.md). Decoding
builds REAL Megatron objects (ShardedTensor with data=None, ShardedObject,
LocalNonpersistentObject, ShardedTensorFactory over a meta tensor) so that Megatron's own
constructors validate the metadata. Encoding walks the tree in Megatron's traversal order
(dicts in insertion order, lists by index), which is the order dict_list_map_inplace visits.
"""

from megatron_adapter.errors import BadRequest, OpError, is_int, boolean, field, int_list, meta_tensor, string

_DTYPES = {
    "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool",
    "float8_e4m3fn", "float8_e5m2",
}


class Codec:
    """Conversions bound to one set of imported Megatron modules (see megatron_import.load_megatron)."""

    def __init__(self, M):
        self.M = M

    # ---- scalars -------------------------------------------------------------------------
    def dtype(self, name, where):
        if not isinstance(name, str) or name not in _DTYPES or not hasattr(self.M.torch, name):
            raise BadRequest(f"{where}: unknown dtype {name!r}")
        return getattr(self.M.torch, name)

    @staticmethod
    def dtype_name(dtype):
        return str(dtype).replace("torch.", "")

    @staticmethod
    def replica(value, where):
        if is_int(value):
            return value
        if isinstance(value, list) and all(is_int(v) for v in value):
            return tuple(value)
        raise BadRequest(f"{where}: replica_id must be an integer or a list of integers")

    @staticmethod
    def replica_json(value):
        return list(value) if isinstance(value, (tuple, list)) else value

    def _construct(self, ctor, where, *args, **kwargs):
        """Calls a Megatron constructor; its CheckpointingException is metadata_integrity."""
        try:
            return ctor(*args, **kwargs)
        except self.M.CheckpointingException as exc:
            raise OpError("metadata_integrity", f"{where}: {exc}", exception_type=type(exc).__name__)

    # ---- leaves --------------------------------------------------------------------------
    def tensor(self, e, where, with_meta_data=False):
        """A ShardedTensor from a tensor entry. data=None unless with_meta_data (meta tensor)."""
        key = string(e, "key", where)
        gshape = tuple(int_list(field(e, "global_shape", where), "global_shape", where))
        goff = tuple(int_list(field(e, "global_offset", where), "global_offset", where))
        lshape = tuple(int_list(field(e, "local_shape", where), "local_shape", where, minimum=0))
        frag = field(e, "axis_fragmentations", where)
        frag = None if frag is None else tuple(int_list(frag, "axis_fragmentations", where))
        prepend = field(e, "prepend_axis_num", where)
        if not is_int(prepend) or prepend < 0:
            raise BadRequest(f"{where}: prepend_axis_num must be a non-negative integer")
        # No replica_id: ShardedTensor's own default decides (spec: 0, the main replica).
        replica = {"replica_id": self.replica(e["replica_id"], where)} if "replica_id" in e else {}
        dtype = self.dtype(e.get("dtype", "float32"), where)
        allow = boolean(e, "allow_shape_mismatch", False, where)
        data = None
        if with_meta_data or "data" in e:
            data = meta_tensor(self.M.torch, lshape, dtype, where)
            # The harness's identity of this data travels on the tensor, so LNP(entry.data) can
            # be reported back as exactly the data Megatron wrapped.
            data._ih_data = e.get("data")
        return self._construct(
            self.M.ShardedTensor, where, key, data, dtype, lshape, gshape, goff, frag,
            prepend_axis_num=prepend, allow_shape_mismatch=allow, **replica)

    def leaf(self, e, where):
        if not isinstance(e, dict):
            raise BadRequest(f"{where}: entry must be a JSON object")
        kind = string(e, "kind", where)
        if kind == "tensor":
            return self.tensor(e, where)
        if kind == "object":
            key = string(e, "key", where)
            gshape = tuple(int_list(field(e, "global_shape", where), "global_shape", where))
            goff = tuple(int_list(field(e, "global_offset", where), "global_offset", where))
            replica = self.replica(e.get("replica_id", 0), where)
            return self._construct(self.M.ShardedObject, where, key, _decoded_payload(e.get("data")), gshape, goff,
                                   replica)
        if kind == "local":
            return self.M.LocalNonpersistentObject(_decoded_payload(e.get("value")))
        if kind == "plain":
            return _Plain(e.get("value"))
        if kind == "factory":
            return self.factory(e, where)
        raise BadRequest(f"{where}: unknown entry kind {kind!r} (tensor, object, local, plain, factory)")

    def factory(self, e, where):
        """A real Megatron factory over a meta tensor: "split" (ssm/utils.py) or "swiglu"; or, for an
        entry carrying only "built" (a factory the harness got back earlier), a ShardedTensorFactory
        whose build returns those entries, so retargeting it again exercises Megatron's own code."""
        if "factory" not in e and "built" in e:
            return self.prebuilt_factory(e, where)
        which = string(e, "factory", where)
        orig = self.tensor(field(e, "tensor", where), where + ".tensor", with_meta_data=True)
        if which == "split":
            sections = field(e, "sections", where)
            names = field(e, "names", where)
            dim = e.get("split_dim", 0)
            return self.M.call_split_factory(self.M.ssm_utils._split_tensor_factory, orig, sections, names, dim)
        if which == "swiglu":
            offsets = e.get("sharded_offsets", [])
            if not isinstance(offsets, list) or not all(isinstance(t, list) and len(t) == 3 for t in offsets):
                raise BadRequest(f"{where}: sharded_offsets must be a list of [axis, rank, fragments]")
            offsets = [tuple(int_list(t, "sharded_offsets", where)) for t in offsets]
            return self.M.swiglu_factory(orig, offsets)
        raise BadRequest(f"{where}: unknown factory {which!r} (split, swiglu)")

    def prebuilt_factory(self, e, where):
        key = string(e, "key", where)
        built = field(e, "built", where)
        if not isinstance(built, list):
            raise BadRequest(f"{where}: built must be a list of {{\"path\", \"entry\"}}")
        leaves = [self.leaf(field(item, "entry", f"{where}.built[{i}]"), f"{where}.built[{i}]")
                  for i, item in enumerate(built)]

        def build_fn(key_, data, replica_id, flattened_range=None):
            return list(leaves)

        def merge_fn(loaded):
            raise RuntimeError("a prebuilt factory has no merge")

        data = None
        if isinstance(e.get("data"), dict):
            # The factory's own data identity (e.g. a GTP shard or the gathered in_proj), so that
            # retargeting a fresh layer's factory into LNP(factory.data) reports exactly that data.
            shape = e["data"].get("shape") or [0]
            data = meta_tensor(self.M.torch, tuple(int(x) for x in shape), self.dtype(e["data"].get("dtype", "float32"), where),
                               where)
            data._ih_data = e["data"]
        return self.M.ShardedTensorFactory(key, data, build_fn, merge_fn, 0)

    def leaf_json(self, x):
        M = self.M
        if isinstance(x, M.ShardedTensor):
            out = {"kind": "tensor", "key": x.key, "global_shape": list(x.global_shape),
                   "global_offset": list(x.global_offset), "local_shape": list(x.local_shape),
                   "axis_fragmentations": None if x.axis_fragmentations is None else list(x.axis_fragmentations),
                   "replica_id": self.replica_json(x.replica_id), "prepend_axis_num": x.prepend_axis_num}
            if self.dtype_name(x.dtype) != "float32":
                out["dtype"] = self.dtype_name(x.dtype)
            if x.allow_shape_mismatch:
                out["allow_shape_mismatch"] = True
            if x.data is not None and getattr(x.data, "_ih_data", None) is not None:
                out["data"] = x.data._ih_data
            return out
        if isinstance(x, M.ShardedObject):
            out = {"kind": "object", "key": x.key, "global_shape": list(x.global_shape),
                   "global_offset": list(x.global_offset), "replica_id": self.replica_json(x.replica_id)}
            if x.data is not None:
                out["data"] = _wire_payload(x.data)
            return out
        if isinstance(x, M.LocalNonpersistentObject):
            obj = x.unwrap()
            value = getattr(obj, "_ih_data", None) if isinstance(obj, M.torch.Tensor) else _wire_payload(obj)
            return {"kind": "local"} if value is None else {"kind": "local", "value": value}
        if isinstance(x, M.ShardedTensorFactory):
            built = x.build()
            return {"kind": "factory", "key": x.key, "built": self.encode(built, "nested")}
        if isinstance(x, _Plain):
            return {"kind": "plain", "value": x.value}
        if isinstance(x, M.torch.Tensor):
            return {"kind": "tensor_value", "shape": list(x.shape), "dtype": self.dtype_name(x.dtype)}
        return {"kind": "plain", "value": _jsonable(x)}

    # ---- trees ---------------------------------------------------------------------------
    def decode(self, entries, structure):
        """Builds the state dict. structure "flat": one dict keyed by the paths verbatim (the
        shape of Megatron's model.sharded_state_dict()); "nested": paths split on '.', every
        component a dict key (digits included), or a JSON list path whose integer components
        are list indices."""
        if structure not in ("flat", "nested"):
            raise BadRequest("structure must be \"flat\" or \"nested\"")
        self.path_form = structure
        if not isinstance(entries, list):
            raise BadRequest("entries must be a list of {\"path\", \"entry\"}")
        root = {}
        for i, item in enumerate(entries):
            where = f"entries[{i}]"
            path = field(item, "path", where)
            leaf = self.leaf(field(item, "entry", where), where)
            if structure == "flat":
                if not isinstance(path, str):
                    raise BadRequest(f"{where}: path must be a string")
                if path in root:
                    raise BadRequest(f"{where}: repeated path {path!r}")
                root[path] = leaf
                continue
            parts = self._parts(path, where)
            if isinstance(path, list):
                self.path_form = "list"
            node = root
            for depth, part in enumerate(parts):
                last = depth == len(parts) - 1
                node = self._step(node, part, None if last else (list if is_int(parts[depth + 1]) else dict),
                                  leaf if last else None, where, path)
        return root

    @staticmethod
    def _parts(path, where):
        if isinstance(path, str):
            if path == "":
                raise BadRequest(f"{where}: empty path")
            return path.split(".")
        if isinstance(path, list) and path and all(isinstance(p, str) or is_int(p) for p in path):
            if is_int(path[0]):
                raise BadRequest(f"{where}: the root is a dict; a path cannot start with an index")
            return path
        raise BadRequest(f"{where}: path must be a dotted string or a non-empty list of keys/indices")

    @staticmethod
    def _step(node, part, child_type, leaf, where, path):
        if isinstance(node, dict):
            if not isinstance(part, str):
                raise BadRequest(f"{where}: index {part} used on a dict in path {path!r}")
            if child_type is None:
                if part in node:
                    raise BadRequest(f"{where}: path {path!r} repeats or encloses another path")
                node[part] = leaf
                return None
            child = node.setdefault(part, child_type())
        else:
            if not is_int(part) or part > len(node):
                raise BadRequest(f"{where}: list index {part!r} out of order in path {path!r}")
            if child_type is None:
                if part < len(node):
                    raise BadRequest(f"{where}: path {path!r} repeats another path")
                node.append(leaf)
                return None
            if part == len(node):
                node.append(child_type())
            child = node[part]
        if not isinstance(child, child_type):
            raise BadRequest(f"{where}: path {path!r} passes through a leaf or a different container")
        return child

    def encode(self, tree, structure, prefix=()):
        """The tree back as [{"path", "entry"}] in traversal order."""
        return [{"path": path, "entry": self.leaf_json(leaf)} for path, leaf in leaves(tree, structure, prefix)]


def leaves(tree, structure="dotted", prefix=(), whole=frozenset()):
    """(path, leaf) of every leaf in traversal order, each path as encode writes it: what a round-trip
    worker fills and dumps is found under the path the plan names. A path in `whole` is one leaf however deep
    its value (a loaded object that carried a dict)."""
    if not isinstance(tree, (dict, list)) or (whole and prefix and _join(prefix, structure) in whole):
        yield _join(prefix, structure), tree
        return
    for k, v in (tree.items() if isinstance(tree, dict) else enumerate(tree)):
        yield from leaves(v, structure, prefix + (k,), whole)


class _Plain:
    """A plain (non-sharded) JSON value kept at its place in the tree."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _join(parts, structure):
    """A path in the form the request used: a JSON list when structure is "list"."""
    if structure == "list":
        return list(parts)
    return ".".join(str(p) for p in parts)


def _decoded_payload(wire):
    """What an object's data or a LocalNonpersistentObject's value holds once decoded: a carried value
    ({"value": X}) is X itself, as Megatron's own object holds it; the harness's identity ({"object": id}) and
    tensor data ({"blocks": ...}) stay the wire's dicts, which _wire_payload sends back as they came."""
    if isinstance(wire, dict) and set(wire) == {"value"}:
        return wire["value"]
    return wire


def _wire_payload(value):
    """An object's data or an LNP's value on the wire (harness/codec: ObjectRef, TensorValue, CarriedValue): None,
    the harness's identity or tensor data as decoded, anything else the value Megatron's own object carries,
    {"value": ...}."""
    if value is None:
        return None
    if isinstance(value, dict) and ((set(value) == {"object"} and is_int(value["object"])) or "blocks" in value):
        return value
    return {"value": _jsonable(value)}


def _jsonable(x):
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return repr(x)
