"""The files of a round trip's checkpoint as this rank sees them: which file wrote which chunk (the DCP metadata),
whether every chunk it reads lies inside its file, its local checkpoint (MCoreTensorAwareStateDict, written whole),
what it loaded (loaded_rank_<r>.pt for the C++ verifier), and the fault that kills a rank mid-write."""

import os
import signal
import threading
import time

from megatron_adapter.roundtrip.failures import staged


def kill_when_writing(ckpt, rank):
    """Fault: SIGKILL this rank as soon as it has started writing its checkpoint files."""
    prefix = f"__{rank}_"

    def watch():
        while True:
            try:
                if any(n.startswith(prefix) for n in os.listdir(ckpt)):
                    os.kill(os.getpid(), signal.SIGKILL)
            except OSError:
                pass
            time.sleep(0.002)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def read_dcp_metadata(ckpt):
    from torch.distributed.checkpoint import FileSystemReader
    return FileSystemReader(ckpt).read_metadata()


def list_writers(ckpt):
    """[key, chunk offsets, file] for every tensor chunk in the checkpoint's metadata."""
    md = read_dcp_metadata(ckpt)
    out = []
    for idx, info in md.storage_data.items():
        if idx.offset is None:
            continue  # a byte item (ShardedObject, common state)
        out.append([idx.fqn, list(idx.offset), info.relative_path])
    return out


def write_stored_chunks(ckpt, sdir, torch):
    """What the checkpoint stores, read back with PyTorch DCP's own reader: its metadata, then every tensor key
    loaded by FileSystemReader and cut at each of its stored chunks; written to sdir/stored_chunks.json as facts
    ({"chunks": [{key, offset, sizes, values}]}) for the C++ side, which judges them against the reference's
    layout (harness/roundtrip/stored_layout.h). Byte items (objects, common state) are not tensors: left out."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    from megatron_adapter.roundtrip.plan import write_atomic
    reader = dcp.FileSystemReader(ckpt)
    tensors = {fqn: m for fqn, m in reader.read_metadata().state_dict_metadata.items()
               if isinstance(m, TensorStorageMetadata)}
    # NaN where no chunk lands: a stored chunk never holds it, so an element read wrongly cannot pass.
    whole = {fqn: torch.full(tuple(m.size), float("nan"), dtype=m.properties.dtype) for fqn, m in tensors.items()}
    dcp.load(whole, storage_reader=dcp.FileSystemReader(ckpt), no_dist=True)
    chunks = []
    for fqn, m in tensors.items():
        for c in m.chunks:
            part = whole[fqn][tuple(slice(o, o + n) for o, n in zip(c.offsets, c.sizes))]
            chunks.append({"key": fqn, "offset": list(c.offsets), "sizes": list(c.sizes),
                           "values": part.reshape(-1).tolist()})
    write_atomic(os.path.join(sdir, "stored_chunks.json"), {"chunks": chunks})
    return len(chunks)


def check_files(ckpt, needed_keys):
    """Every stored chunk of a key this rank reads lies inside its file; raises a typed error
    naming the file, the key and the byte range otherwise."""
    md = read_dcp_metadata(ckpt)
    sizes = {}
    for idx, info in md.storage_data.items():
        if idx.fqn not in needed_keys:
            continue
        path = os.path.join(ckpt, info.relative_path)
        if path not in sizes:
            sizes[path] = os.path.getsize(path) if os.path.exists(path) else -1
        end = info.offset + info.length
        if sizes[path] < end:
            have = "is missing" if sizes[path] < 0 else f"has {sizes[path]} bytes"
            raise ValueError(f"checkpoint file {info.relative_path} {have}; key {idx.fqn} chunk "
                             f"{list(idx.offset) if idx.offset is not None else '(bytes)'} needs bytes "
                             f"{info.offset}..{end}")


def write_dump(sdir, rank, dump, torch):
    out = os.path.join(sdir, f"loaded_rank_{rank}.pt")
    torch.save(dump, out + ".tmp")
    os.replace(out + ".tmp", out)  # never a half-written file under the final name


def local_path(sdir, rank):
    return os.path.join(sdir, f"local_rank_{rank}.pt")


def save_local(world, sdir, sd):
    """This rank's local checkpoint, as Megatron's local checkpointing keeps it: the state dict
    turned into an MCoreTensorAwareStateDict (its factories built, tensors held) and written whole
    (torch.save, under a temporary name first)."""
    from megatron.core.dist_checkpointing.tensor_aware_state_dict import MCoreTensorAwareStateDict
    stage = world.stage("save: local checkpoint (MCoreTensorAwareStateDict.from_state_dict)")
    try:
        tasd, _ = MCoreTensorAwareStateDict.from_state_dict(sd, algo="atomic")
    except BaseException as exc:
        raise staged(exc, stage)
    path = local_path(sdir, world.rank)
    world.torch.save(tasd, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_local(world, sdir, sd):
    """The request `sd` filled from this rank's local checkpoint by to_state_dict."""
    stage = world.stage("load: local checkpoint (MCoreTensorAwareStateDict.to_state_dict)")
    path = local_path(sdir, world.rank)
    if not os.path.exists(path):
        raise staged(ValueError(f"local checkpoint {path} of rank {world.rank} is missing"), stage,
                     "checkpoint_truncated")
    try:
        tasd = world.torch.load(path, weights_only=False)
        return tasd.to_state_dict(sd, algo="atomic")
    except BaseException as exc:
        raise staged(exc, stage)
