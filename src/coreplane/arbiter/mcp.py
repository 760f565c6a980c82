"""Making a launched program a many-core process: the launcher joins the arbiter as one (the
program, its descendant, belongs to it) and takes its first vcores for it."""

import os
from pathlib import Path

from coreplane.arbiter.client import SOCKET_VARIABLE, Client, socket_path


def become_mcp(provision: int, max_vcores: int | None, state_dir: Path, delegates: bool = False) -> dict:
    """Makes this process an MCP (provisioned `provision` cores: root or a trusted user; with no
    provision, a best-effort one that only borrows) and asks for `max_vcores` vcores, else for
    its provision, so an unmodified program runs on them; cooperating programs find the arbiter
    through $COREPLANE_ARBITER_SOCKET and ask for more or yield. Its threads run only on the
    cores it holds, except with `delegates` (the program delegates to the control cores under
    coreplane's runtime, which keeps the program's own threads on the compute cores)."""
    path = socket_path(state_dir)
    with Client(path) as client:
        if provision:
            client.checked("provision", pid=os.getpid(), cores=provision, max=max_vcores, delegates=delegates)
        else:
            client.checked("register", max=max_vcores, delegates=delegates)
        granted = client.checked("request", n=max_vcores if max_vcores is not None else provision)
    os.environ[SOCKET_VARIABLE] = str(path)
    return {"pid": os.getpid(), "provision": provision, "granted": granted["granted"], "pending": granted["pending"]}
