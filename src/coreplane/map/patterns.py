"""Standard communication patterns for mapping experiments: ring, 2-D stencil, all-to-all, butterfly, master-worker."""

import numpy as np

from coreplane.core.errors import CoreplaneError
from coreplane.map.comm import CommGraph

PATTERNS = ("ring", "stencil", "alltoall", "butterfly", "masterworker")


def _grid(p: int) -> tuple[int, int]:
    """The most square factorisation X*Y = p with X >= Y."""
    y = int(np.sqrt(p))
    while p % y:
        y -= 1
    return p // y, y


def pattern(name: str, p: int, message_bytes: float = 1024.0, grid: tuple[int, int] | None = None) -> CommGraph:
    """P processes exchanging `message_bytes` in each direction of every pattern edge.

    Processes are numbered as an MPI program would number its ranks (row-major for the stencil).
    """
    pairs: list[tuple[int, int]] = []
    if name == "ring":
        pairs = [(i, (i + 1) % p) for i in range(p)] if p > 2 else [(0, 1)][: p - 1]
    elif name == "stencil":
        X, Y = grid or _grid(p)
        if X * Y != p:
            raise CoreplaneError(f"stencil: grid {X}x{Y} does not hold {p} processes")
        for i in range(p):
            x, y = i % X, i // X
            if x + 1 < X:
                pairs.append((i, i + 1))
            if y + 1 < Y:
                pairs.append((i, i + X))
    elif name == "alltoall":
        pairs = [(i, j) for i in range(p) for j in range(i + 1, p)]
    elif name == "butterfly":
        if p & (p - 1):
            raise CoreplaneError(f"butterfly: {p} processes is not a power of two")
        pairs = [(i, i ^ (1 << s)) for s in range(p.bit_length() - 1) for i in range(p) if i < i ^ (1 << s)]
    elif name == "masterworker":
        pairs = [(0, i) for i in range(1, p)]
    else:
        raise CoreplaneError(f"pattern '{name}': unknown, expected one of {', '.join(PATTERNS)}")
    a = np.array([u for u, _ in pairs] + [v for _, v in pairs], dtype=np.int64)
    b = np.array([v for _, v in pairs] + [u for u, _ in pairs], dtype=np.int64)
    return CommGraph(names=[f"{name}{i}" for i in range(p)], src=a, dst=b,
                     weight=np.full(len(a), float(message_bytes)))
