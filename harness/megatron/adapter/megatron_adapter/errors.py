"""Error values and request-field readers shared by the Megatron adapter modules.

An OpError becomes the reply {"ok": false, "error": {"kind", "message", ...}}; its kind is
either an adapter kind (bad_request, unsupported, internal, megatron_import, ...) or a
Megatron kind derived from the exception Megatron raised (see docs/adapter-protocol.md).
"""


class OpError(Exception):
    """A request that cannot be answered with a result."""

    def __init__(self, kind, message, **extra):
        super().__init__(message)
        self.kind = kind
        self.message = str(message)
        self.extra = extra

    def to_json(self):
        out = {"kind": self.kind, "message": self.message}
        out.update(self.extra)
        return out


class BadRequest(OpError):
    def __init__(self, message):
        super().__init__("bad_request", message)


class Unsupported(OpError):
    """The installed Megatron lacks what the op needs."""

    def __init__(self, message):
        super().__init__("unsupported", message)


_INT64 = 1 << 63


def is_int(value):
    """A JSON integer that fits int64 (what torch and the C++ harness can represent)."""
    return isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64


def field(req, name, where="request"):
    if not isinstance(req, dict):
        raise BadRequest(f"{where} must be a JSON object")
    if name not in req:
        raise BadRequest(f"{where} lacks field {name!r}")
    return req[name]


def opt(req, name, default=None):
    value = req.get(name, default) if isinstance(req, dict) else default
    return default if value is None else value


def string(req, name, where="request", nullable=False):
    value = field(req, name, where)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{where} field {name!r} must be a string{' or null' if nullable else ''}")
    return value


def integer(req, name, where="request", nullable=False, minimum=None):
    value = field(req, name, where)
    if value is None and nullable:
        return None
    if not is_int(value):
        raise BadRequest(f"{where} field {name!r} must be a 64-bit integer{' or null' if nullable else ''}")
    if minimum is not None and value < minimum:
        raise BadRequest(f"{where} field {name!r} must be >= {minimum}")
    return value


def int_list(value, name, where="request", minimum=None):
    if not isinstance(value, list) or not all(is_int(v) for v in value):
        raise BadRequest(f"{where} field {name!r} must be a list of 64-bit integers")
    if minimum is not None and any(v < minimum for v in value):
        raise BadRequest(f"{where} field {name!r} must hold integers >= {minimum}")
    return value


def str_list_field(req, name, where="request", nullable=False):
    value = field(req, name, where)
    if value is None and nullable:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{where} field {name!r} must be a list of strings")
    return value


def boolean(req, name, default, where="request"):
    if not isinstance(req, dict) or name not in req:
        return default
    value = req[name]
    if not isinstance(value, bool):
        raise BadRequest(f"{where} field {name!r} must be true or false")
    return value


def meta_tensor(torch, shape, dtype, where="request"):
    """An allocation-free tensor of the given shape (device "meta"), or bad_request when torch
    cannot represent the shape."""
    try:
        return torch.empty(tuple(shape), dtype=dtype, device="meta")
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
        raise BadRequest(f"{where}: torch cannot make a tensor of shape {list(shape)}: {exc}")
