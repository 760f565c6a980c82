"""Thread-to-core mapping: topologies (layer 3), the paper's greedy O(P) mapping, baselines and NoC metrics."""
