"""Reports and comparisons of sweeps: HTML with figures, CSV/Parquet/JSON exports, Welch comparisons."""
