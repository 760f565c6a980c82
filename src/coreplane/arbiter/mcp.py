"""Making a launched program a many-core process: the launcher joins the arbiter as one (the
program, its descendant, belongs to it) and takes its first vcores for it."""

import os
from pathlib import Path

from coreplane.arbiter.client import SOCKET_VARIABLE, Client, socket_path

# Read by coreplane's runtime: the vcores a delegating MCP asked for at launch.
FOLLOW_VARIABLE = "COREPLANE_RT_MCP"


def become_mcp(provision: int, max_vcores: int | None, state_dir: Path, delegates: bool = False) -> dict:
    """Makes this process an MCP (provisioned `provision` cores: root or a trusted user; with no
    provision, a best-effort one that only borrows) and asks for `max_vcores` vcores, else for
    its provision, so an unmodified program runs on them; cooperating programs find the arbiter
    through $COREPLANE_ARBITER_SOCKET and ask for more or yield. Its threads run only on the
    cores it holds, except with `delegates` (the program delegates to the control cores under
    coreplane's runtime, which keeps the program's own threads on the compute cores it holds,
    yields a vcore as soon as it is warned, and asks again for what it asked for here when cores
    are free)."""
    path = socket_path(state_dir)
    with Client(path) as client:
        if provision:
            client.checked("provision", pid=os.getpid(), cores=provision, max=max_vcores, delegates=delegates)
        else:
            client.checked("register", max=max_vcores, delegates=delegates)
        wanted = max_vcores if max_vcores is not None else provision
        granted = client.checked("request", n=wanted)
    os.environ[SOCKET_VARIABLE] = str(path)
    if delegates:
        # The runtime follows the MCP's cores (crates/runtime/src/bin/rt/mcp.rs) and asks again
        # for what was asked here whenever the arbiter has cores free.
        os.environ[FOLLOW_VARIABLE] = str(wanted)
    return {"pid": os.getpid(), "provision": provision, "granted": granted["granted"], "pending": granted["pending"]}
