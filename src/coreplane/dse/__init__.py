"""The experiment engine (design-space exploration): sweeps, runs, store, statistics, executors.

Python API, for scripts and other coreplane areas:

    from coreplane import dse
    spec = dse.load_spec("sweep.toml")          # or dse.spec_from_dict({...})
    summary = dse.run_sweep(spec, "sweeps/x")   # resume=True, executor="slurm", parallel=2, ...
    df = dse.load_metrics("sweeps/x")           # long format: parameters, metric, value
    stats = dse.summary("sweeps/x")             # n, mean, sd, median, min, max, CI, cv per point
"""

import importlib

# Resolved on first use, so `coreplane --help` does not pay for pandas and scipy.
_EXPORTS = {
    "load_spec": ("coreplane.dse.specfile", "load"),
    "spec_from_dict": ("coreplane.dse.spec", "from_dict"),
    "run_sweep": ("coreplane.dse.sweep", "run_sweep"),
    "load_runs": ("coreplane.dse.results", "load_runs"),
    "load_metrics": ("coreplane.dse.results", "load_metrics"),
    "summary": ("coreplane.dse.results", "summary"),
    "describe": ("coreplane.dse.stats", "describe"),
    "welch": ("coreplane.dse.stats", "welch"),
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'coreplane.dse' has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    return getattr(importlib.import_module(module), attr)
