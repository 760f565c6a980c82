"""The arbiter's experiments (issue 14: ROS Tables 1-2, Fig. 6, the adaptive pool) run as DSE sweeps with repetitions, summarised against their goals and drawn."""
