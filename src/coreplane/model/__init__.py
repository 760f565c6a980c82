"""Speedup models of paper 002 (naive, refined, queueing), policies, parameter estimation and their figures."""
