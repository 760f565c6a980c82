"""docs/architecture.md matches the code: every module directory has its table, and every table
lists exactly the directory's modules with their own one-line purpose (tests/doc_modules.py;
`make docs` regenerates the tables)."""

import difflib

from doc_modules import DOC, documented, packages, rewrite


def test_every_module_directory_has_a_table():
    missing = set(map(str, packages())) - documented(DOC.read_text())
    assert not missing, f"no module table in docs/architecture.md for {sorted(missing)} (see tests/doc_modules.py)"


def test_module_tables_match_the_code():
    text = DOC.read_text()
    fresh = rewrite(text)
    diff = "\n".join(difflib.unified_diff(text.splitlines(), fresh.splitlines(), "docs", "code", lineterm=""))
    assert fresh == text, f"docs/architecture.md is out of date (run `make docs`):\n{diff}"
