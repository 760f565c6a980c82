"""Conformance corpus (issue 12): programs nobody tuned for, run natively and under `coreplane run`
with `--delegate none` and `--delegate all`, compared on exit status and, where two native runs
print the same bytes, on output; `make conformance` writes docs/conformance.md."""
