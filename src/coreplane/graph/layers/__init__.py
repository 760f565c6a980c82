"""One module per layer: 0 instructions, 1 threads/processes, 2 frames, 3 cores (coreplane.graph.topology)."""
