"""The stored chunks a save world's rank 0 reads back with DCP's own reader (checkpoint_files.write_stored_chunks):
facts only, every tensor chunk with its key, offsets, sizes and values; torch only, no Megatron."""

import json
import os

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")

from megatron_adapter.roundtrip import checkpoint_files  # noqa: E402


def test_every_tensor_chunk_is_reported_with_its_values_and_bytes_are_left_out(tmp_path):
    ckpt = tmp_path / "checkpoint"
    w = torch.arange(12, dtype=torch.float64).reshape(3, 4) + 256.0
    dcp.save({"w": w, "note": "not a tensor"}, storage_writer=dcp.FileSystemWriter(str(ckpt)), no_dist=True)
    assert checkpoint_files.write_stored_chunks(str(ckpt), str(tmp_path), torch) == 1
    stored = json.load(open(os.path.join(tmp_path, "stored_chunks.json")))
    assert stored == {"chunks": [{"key": "w", "offset": [0, 0], "sizes": [3, 4], "values": w.reshape(-1).tolist()}]}


def test_a_damaged_file_is_an_error_not_a_report(tmp_path):
    ckpt = tmp_path / "checkpoint"
    dcp.save({"w": torch.ones(64, dtype=torch.float64)}, storage_writer=dcp.FileSystemWriter(str(ckpt)), no_dist=True)
    for name in os.listdir(ckpt):
        if name.endswith(".distcp"):
            os.truncate(ckpt / name, 8)
    with pytest.raises(BaseException):  # DCP raises CheckpointException, a BaseException
        checkpoint_files.write_stored_chunks(str(ckpt), str(tmp_path), torch)
    assert not os.path.exists(os.path.join(tmp_path, "stored_chunks.json"))
