"""A stand-in of a checkpoint module: what the gate's coverage reader is tested on."""


def save(state):
    keys = sorted(state)
    return keys


def load(path):
    if not path:
        raise ValueError("no path")
    return {"path": path}


class Loader:
    def load_state_dict(self, state):
        self.state = state
        return True

    def sharded_state_dict(self):
        return {}
