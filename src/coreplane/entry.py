"""The `coreplane` console script: old option spellings are modernised, a plain `coreplane run`
becomes coreplane-exec at once (a Python start and nothing more), everything else goes to the
full command line interface (coreplane/cli.py)."""

import sys

from coreplane.core.vocabulary import modernise


def main() -> None:
    """Runs `coreplane ARGS...`."""
    args = modernise(sys.argv[1:])
    if args[:1] == ["run"]:
        from coreplane.run.direct import run

        run(args[1:])
    from coreplane.cli import main as full

    full(args)
