"""Pieces every area shares: output for people and scripts, errors, native binaries."""
