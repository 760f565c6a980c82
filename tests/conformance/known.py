"""Why each known difference differs, with a minimal reproducer: the explanations
docs/conformance.md prints beside the measured differences (edited by hand as they are found)."""

EXPLANATIONS: dict[str, str] = {}
