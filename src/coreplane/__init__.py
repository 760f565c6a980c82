"""coreplane: cells, syscall delegation, OS-noise measurement and speedup models on stock Linux."""

__version__ = "0.1.0"
