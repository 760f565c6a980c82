"""The saved graph format `coreplane-graph/1`: a directory of meta.json + nodes.parquet + edges.parquet."""

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from coreplane.core import documents
from coreplane.core.errors import CoreplaneError
from coreplane.graph.model import EDGE_COLUMNS, NODE_COLUMNS, MultiLayerGraph

FORMAT = "coreplane-graph/1"


def save(graph: MultiLayerGraph, path: str | Path, extra: dict[str, Path] | None = None) -> Path:
    """Writes the graph to directory `path` (plus `extra` files: name -> source path), replacing
    an existing directory only once the new one is complete."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, source in (extra or {}).items():
        shutil.copyfile(source, tmp / name)
    graph.nodes.to_parquet(tmp / "nodes.parquet", index=False)
    graph.edges.to_parquet(tmp / "edges.parquet", index=False)
    (tmp / "meta.json").write_text(json.dumps({"format": FORMAT, **graph.meta}, indent=2, default=str) + "\n")
    if path.exists():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        path.rename(old)
        tmp.rename(path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(path)
    return path


def _table(path: Path, columns: dict[str, str]) -> pd.DataFrame:
    if not path.is_file():
        raise CoreplaneError(f"{path}: missing (a {FORMAT} graph directory holds meta.json, nodes.parquet, edges.parquet)")
    try:
        names = set(pq.read_schema(path).names)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise CoreplaneError(f"{path}: not a Parquet file ({exc})") from None
    missing = [c for c in columns if c not in names]
    if missing:
        raise CoreplaneError(f"{path}: column '{missing[0]}' missing")
    return pd.read_parquet(path)


def load(path: str | Path) -> MultiLayerGraph:
    """Reads a graph directory written by `save` (or by any tool following docs/formats.md)."""
    path = Path(path)
    if not path.is_dir():
        raise CoreplaneError(f"{path}: not a graph directory (expected {FORMAT}: meta.json, nodes.parquet, edges.parquet)")
    try:
        meta = json.loads((path / "meta.json").read_text())
    except OSError:
        raise CoreplaneError(f"{path / 'meta.json'}: missing") from None
    except json.JSONDecodeError as exc:
        raise CoreplaneError(f"{path / 'meta.json'}: line {exc.lineno}: {exc.msg}") from None
    if meta.get("format") != FORMAT:
        raise CoreplaneError(f"{path / 'meta.json'}: field 'format' is {meta.get('format')!r}, expected {FORMAT!r}")
    nodes = _table(path / "nodes.parquet", NODE_COLUMNS)
    edges = _table(path / "edges.parquet", EDGE_COLUMNS)
    meta.pop("format")
    return MultiLayerGraph(nodes=nodes, edges=edges, meta=meta)


PARTITION = "partition.json"


def save_partition(path: str | Path, doc: dict) -> None:
    """Keeps `coreplane graph partition`'s result in the graph directory, where `coreplane map`
    finds the number of threads it proposes."""
    documents.write(Path(path) / PARTITION, doc)


def proposed_threads(path: str | Path) -> int | None:
    """The number of threads the graph's last partition proposes (None: not partitioned yet)."""
    target = Path(path) / PARTITION
    if not target.is_file():
        return None
    doc = documents.read_json(target)
    threads = doc.get("threads") if isinstance(doc, dict) else None
    if not isinstance(threads, int) or threads < 1:
        raise CoreplaneError(f"{target}: field 'threads' is {threads!r}, expected a positive integer")
    return threads
