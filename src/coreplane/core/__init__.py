"""Pieces every area shares: output for people and scripts (text and figures), errors, native binaries, CPU lists, the machine's description."""
