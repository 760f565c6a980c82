"""Cells: exclusive compute cores, the machine's other work on control cores (cgroup v1/v2)."""

from coreplane.cell.cell import Cell
from coreplane.cell.spec import CellSpec

__all__ = ["Cell", "CellSpec"]
