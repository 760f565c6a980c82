"""Discrete-event model (SimPy) of the arbiter: ROS Tables 1–2 operations at any number of compute cores, from costs measured on this machine (simulated figures)."""
