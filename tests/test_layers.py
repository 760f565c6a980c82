"""The import graph of src/coreplane keeps its layers (issue 17): no import cycle, no front end
imported below the top, core/ imports no area, and every area imports only areas below it.

Front ends are the package's top-level modules (cli.py, the console script) and each area's
cli.py; they sit above every area. The module graph of every Rust crate has no cycle either."""

import ast
import graphlib
import re
from pathlib import Path

import pytest

from conftest import REPO

SRC = REPO / "src"
PACKAGE = "coreplane"
# The areas, lowest first: an area may import core/ and the areas before it, never one after it.
# This list is the one statement of the order.
LAYERS = ["doctor", "graph", "map", "cell", "arbiter", "run", "bench", "profile", "model", "dse", "fullsys", "validate",
          "noise", "report", "study", "arbsim", "arbexp"]
CORE = "core"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}


def imported(name: str, path: Path) -> set[str]:
    """Every coreplane module `name` imports, at any depth of its code (imports inside functions
    count): `from a import b` names the module a.b where there is one, else a."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


IMPORTS = {name: imported(name, path) for name, path in MODULES.items()}


def area(name: str) -> str | None:
    """The area (or core) a module belongs to; None for the package itself and its top-level modules."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (SRC / PACKAGE / parts[1]).is_dir()) else None


def is_top_level(name: str) -> bool:
    return name != PACKAGE and area(name) is None


def is_front_end(name: str) -> bool:
    return is_top_level(name) or (name.endswith(".cli") and area(name) is not None)


def test_the_order_names_every_area_once():
    areas = {p.name for p in (SRC / PACKAGE).iterdir() if (p / "__init__.py").is_file()} - {CORE}
    assert len(LAYERS) == len(set(LAYERS)) and set(LAYERS) == areas


def test_no_import_cycle():
    try:
        graphlib.TopologicalSorter({m: IMPORTS[m] & MODULES.keys() for m in MODULES}).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_only_top_level_modules_import_a_front_end():
    wrong = sorted(f"{m} imports {t}" for m, ts in IMPORTS.items() for t in ts
                   if is_front_end(t) and not is_top_level(m))
    assert not wrong, wrong


def test_core_imports_no_area():
    wrong = sorted(f"{m} imports {t}" for m, ts in IMPORTS.items() if area(m) == CORE
                   for t in ts if area(t) != CORE)
    assert not wrong, wrong


def test_areas_import_only_areas_below_them():
    rank = {name: i for i, name in enumerate(LAYERS)}
    wrong = sorted(f"{m} ({area(m)}) imports {t} ({area(t)})" for m, ts in IMPORTS.items()
                   if area(m) in rank and not is_front_end(m)
                   for t in ts if area(t) in rank and rank[area(t)] > rank[area(m)])
    assert not wrong, wrong


def rust_module_trees() -> dict[str, list[Path]]:
    """Each Rust crate root's module files: a crate's src/ (its binaries under src/bin/ apart),
    and every binary with a module tree of its own (src/bin/NAME/main.rs)."""
    trees = {}
    for src in sorted((REPO / "crates").glob("*/src")):
        trees[str(src.relative_to(REPO))] = [p for p in src.rglob("*.rs") if "bin" not in p.relative_to(src).parts[:-1]]
        for main in src.glob("bin/*/main.rs"):
            trees[str(main.parent.relative_to(REPO))] = sorted(main.parent.rglob("*.rs"))
    return trees


@pytest.mark.parametrize("root,files", rust_module_trees().items())
def test_no_rust_module_cycle(root, files):
    """`crate::m`, `crate::{a, b}` and `super::m` name the module a file depends on."""
    modules = {p.stem for p in files} - {"main", "lib"}
    deps = {}
    for path in files:
        code = re.sub(r"//[^\n]*", "", path.read_text())
        named = set(re.findall(r"(?:crate|super)::(\w+)", code))
        named |= {m for group in re.findall(r"crate::\{([^}]*)\}", code) for m in re.findall(r"\w+", group)}
        deps[path.stem] = (named & modules) - {path.stem}
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"{root}: module cycle: {' -> '.join(exc.args[1])}")
