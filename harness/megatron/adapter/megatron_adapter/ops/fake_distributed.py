"""One-process stand-ins for torch.distributed, for Megatron code that only asks for ranks."""

import contextlib


class FakeGroup:
    """Stands for a process group: rank()/size() only."""

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


@contextlib.contextmanager
def fake_distributed(torch):
    """Lets Megatron code that asks torch.distributed for ranks run in one process: reports
    an initialized job in which this process is global rank 0 and FakeGroup answers for its
    own group. Restored on exit."""
    td = torch.distributed
    saved = (td.is_initialized, td.get_rank, td.get_world_size)
    td.is_initialized = lambda: True
    td.get_rank = lambda group=None: group.rank() if isinstance(group, FakeGroup) else 0
    td.get_world_size = lambda group=None: group.size() if isinstance(group, FakeGroup) else 1
    try:
        yield
    finally:
        td.is_initialized, td.get_rank, td.get_world_size = saved
