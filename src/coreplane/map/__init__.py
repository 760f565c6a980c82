"""Thread-to-core mapping onto a topology (graph/topology.py): the paper's greedy O(P) mapping, baselines and NoC metrics."""
