"""Where coreplane's Rust binaries are, found with `os` alone so that the fast start of
`coreplane run` (coreplane/entry.py) can use it without importing more of the library."""

import os

# src/coreplane/core/binaries.py -> repository root
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def search_dirs() -> list[str]:
    """Where binaries are looked for, in order: $COREPLANE_BIN_DIR, the checkout's
    target/release, then $PATH."""
    dirs = [os.environ["COREPLANE_BIN_DIR"]] if os.environ.get("COREPLANE_BIN_DIR") else []
    dirs.append(os.path.join(REPO_ROOT, "target", "release"))
    return dirs + [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d]


def locate(name: str) -> str | None:
    """Path of the executable `name` in the first of search_dirs() that has it, or None."""
    for directory in search_dirs():
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None
