"""The module tables of docs/architecture.md, made from each module's own first line (a Python
docstring, a Rust `//!` comment), so the documentation cannot drift from the code.
`python tests/doc_modules.py --write` (`make docs`) rewrites them; tests/test_architecture.py
checks them."""

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
BLOCK = re.compile(r"<!-- modules (?P<dir>\S+) -->\n.*?<!-- end modules -->", re.S)


def packages() -> list[Path]:
    """Every directory holding modules: Python packages under src/coreplane, Rust module trees
    under crates/*/src (a binary's own tree under src/bin/NAME counts as its own)."""
    dirs = {p.parent for p in (ROOT / "src" / "coreplane").rglob("*.py")}
    dirs |= {p.parent for p in (ROOT / "crates").glob("*/src/**/*.rs")}
    return sorted(d.relative_to(ROOT) for d in dirs)


def first_sentence(text: str) -> str:
    """Up to the first full stop followed by a space, outside parentheses and code spans."""
    depth, code = 0, False
    for i, ch in enumerate(text):
        code ^= ch == "`"
        depth += (ch == "(") - (ch == ")") if not code else 0
        if ch == "." and not code and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            return text[:i + 1]
    return text


def purpose(path: Path) -> str:
    """The module's one-line purpose: the first sentence of its docstring or `//!` comment."""
    text = path.read_text()
    if path.suffix == ".py":
        doc = ast.get_docstring(ast.parse(text)) or ""
    else:
        doc = "\n".join(line.removeprefix("//!").strip() for line in text.splitlines() if line.startswith("//!"))
    paragraph = " ".join(doc.split("\n\n")[0].split())
    return first_sentence(paragraph).replace("|", "\\|")


def table(directory: Path) -> str:
    """The generated block for one directory."""
    files = sorted(p for p in (ROOT / directory).iterdir()
                   if p.suffix in (".py", ".rs") and p.name != "__init__.py")
    rows = [f"| `{p.name}` | {purpose(p)} |" for p in files]
    return "\n".join([f"<!-- modules {directory} -->", "| module | what it is for |", "|---|---|", *rows,
                      "<!-- end modules -->"])


def documented(text: str) -> set[str]:
    """The directories that have a block in `text`."""
    return {m["dir"] for m in BLOCK.finditer(text)}


def rewrite(text: str) -> str:
    """The document with every block regenerated (blocks of directories that no longer exist go)."""
    return BLOCK.sub(lambda m: table(Path(m["dir"])) if (ROOT / m["dir"]).is_dir() else "", text)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/doc_modules.py --write")
    DOC.write_text(rewrite(DOC.read_text()))
    missing = sorted(set(map(str, packages())) - documented(DOC.read_text()))
    for directory in missing:
        print(f"docs/architecture.md: no module table for {directory}: add `<!-- modules {directory} -->` "
              "and `<!-- end modules -->` where it belongs, then run again", file=sys.stderr)
    sys.exit(1 if missing else 0)
