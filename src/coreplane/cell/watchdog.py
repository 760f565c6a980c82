"""The cell watchdog: a detached process that destroys a cell once its owner has died,
whatever the cause (SIGKILL included). Run as `python -m coreplane.cell.watchdog NAME`."""

import os
import select
import signal
import sys

from coreplane.cell import state
from coreplane.cell.cell import teardown_if_owner_dead


def wait_for_owner(owner: dict) -> None:
    """Blocks until the owner process exits (a pidfd becomes readable when it does)."""
    try:
        fd = os.pidfd_open(owner["pid"])
    except ProcessLookupError:
        return
    if state.start_time(owner["pid"]) != owner["start_time"]:
        return  # the pid was reused: the owner is already gone
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.poll()


def main(name: str) -> None:
    child = os.fork()
    if child:
        print(child, flush=True)  # the creator records this pid; this parent ends here
        os._exit(0)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    record = state.load(name)
    if record is None or not record.get("owner"):
        return
    wait_for_owner(record["owner"])
    teardown_if_owner_dead(name)


if __name__ == "__main__":
    main(sys.argv[1])
