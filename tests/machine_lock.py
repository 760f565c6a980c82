"""One test at a time may reshape this machine (cells move every process, injectors steal
CPUs): a lock shared by every pytest run on it, including other people's `make test`."""

import fcntl
from contextlib import contextmanager
from pathlib import Path

LOCK = Path("/run/coreplane-tests.lock")


@contextmanager
def machine_lock():
    with open(LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
