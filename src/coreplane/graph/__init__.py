"""NetworkedOS multi-layer graphs of real programs: the layers (cores from a topology), saving them, partitioning by quality T."""
