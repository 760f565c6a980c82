"""NetworkedOS multi-layer graphs of real programs: building the layers, saving them, partitioning by quality T."""
