"""Reading a spec file, whichever of the two formats it is in: TOML (spec.py) or paper 001's INFOFILE (infofile.py)."""

from pathlib import Path

from coreplane.core.documents import read_text
from coreplane.dse.infofile import parse_infofile
from coreplane.dse.spec import Spec, parse_toml


def load(path: str | Path) -> Spec:
    """Reads a spec file: `.toml` as TOML, anything else as an INFOFILE."""
    path = Path(path)
    text = read_text(path, "the spec")
    if path.suffix == ".toml":
        spec = parse_toml(text, str(path))
    else:
        spec = parse_infofile(text, str(path))
    spec.text = text
    return spec
