"""Making a launched program a many-core process: the launcher joins the arbiter as one (the
program, its descendant, belongs to it) and takes its first vcores for it."""

import os
from pathlib import Path

from coreplane.arbiter.client import SOCKET_VARIABLE, Client, socket_path


def become_mcp(provision: int, max_vcores: int | None, state_dir: Path) -> dict:
    """Makes this process an MCP (provisioned `provision` cores: root or a trusted user; with no
    provision, a best-effort one that only borrows) and asks for `max_vcores` vcores, else for
    its provision, so an unmodified program runs on them; cooperating programs find the arbiter
    through $COREPLANE_ARBITER_SOCKET and ask for more or yield."""
    path = socket_path(state_dir)
    with Client(path) as client:
        if provision:
            client.checked("provision", pid=os.getpid(), cores=provision, max=max_vcores)
        else:
            client.checked("register", max=max_vcores)
        granted = client.checked("request", n=max_vcores if max_vcores is not None else provision)
    os.environ[SOCKET_VARIABLE] = str(path)
    return {"pid": os.getpid(), "provision": provision, "granted": granted["granted"], "pending": granted["pending"]}
