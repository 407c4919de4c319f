"""Folders written by ``graphpipe generate --format csv|tsv|parquet|npz`` (with ``generate.json``).

``generate.json`` names the files and their columns: the edge list (``src``, ``dst``),
the node table (ID column, label column, feature columns f0..f{F-1} or one list column)
and one split file per split. :func:`read_generated` reads them with the edge-list
reader (:func:`graphpipe.ingest.edgelist.read_edge_list`, split files through
:mod:`graphpipe.ingest.splitfiles`) or, for ``npz``, :func:`graphpipe.ingest.npz.read_npz`,
so ``graphpipe ingest FOLDER STORE`` needs no option to get back the generated graph,
features, labels and splits.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.source import DatasetSource

DESCRIPTION = "generate.json"


def is_generated_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder with a ``generate.json``."""
    return (Path(path) / DESCRIPTION).is_file()


def read_generated(folder: str | os.PathLike, *, name: str | None = None) -> DatasetSource:
    """Open a folder written by ``graphpipe generate`` (non-OGB formats) as a source.

    >>> import tempfile
    >>> from graphpipe.synthetic import community_graph
    >>> from click.testing import CliRunner
    >>> from graphpipe.cli.generate import command
    >>> out = Path(tempfile.mkdtemp()) / "g"
    >>> r = CliRunner().invoke(command, ["community", str(out), "--format", "csv",
    ...                                  "--nodes", "60", "--feature-dim", "3", "-q"])
    >>> source = read_generated(out)
    >>> source.num_nodes, source.feature_dim, sorted(source.splits)
    (60, 3, ['test', 'train', 'valid'])
    """
    folder = Path(folder)
    path = folder / DESCRIPTION
    try:
        description = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(f"{path}: not a readable generate.json ({exc})") from None
    if not isinstance(description, dict) or not isinstance(description.get("files"), dict):
        raise IngestError(f"{path}: expected an object with 'format' and 'files'")
    files = description["files"]
    fmt = description.get("format")
    if fmt == "npz":
        from graphpipe.ingest.npz import read_npz

        return read_npz(_inside(folder, files.get("graph"), path, "files.graph"),
                        name=name or folder.name)
    if fmt not in ("csv", "tsv", "parquet"):
        raise IngestError(f"{path}: 'format' must be csv, tsv, parquet or npz (got {fmt!r})")
    return _read_tables(folder, files, description, path, name or folder.name)


def _read_tables(folder: Path, files: dict, description: dict, path: Path,
                 name: str) -> DatasetSource:
    from graphpipe.ingest.edgelist import read_edge_list

    edges, nodes = _field(files, "edges", dict, path), files.get("nodes")
    columns = _field(edges, "columns", list, path, "files.edges")
    if len(columns) != 2 or not all(isinstance(c, str) for c in columns):
        raise IngestError(f"{path}: files.edges.columns must be [source, destination]")
    options: dict[str, Any] = {"src": columns[0], "dst": columns[1], "name": name}
    if description.get("id_kind") == "string":
        options["id_type"] = "string"
    if nodes is not None:
        if not isinstance(nodes, dict):
            raise IngestError(f"{path}: files.nodes must be an object")
        features = nodes.get("feature_columns") or []
        if not isinstance(features, list) or not all(isinstance(c, str) for c in features):
            raise IngestError(f"{path}: files.nodes.feature_columns must be a list of names")
        options.update(
            nodes=_inside(folder, nodes.get("path"), path, "files.nodes.path"),
            node_id=_text(nodes.get("id_column", "id"), path, "files.nodes.id_column"),
            label=_text(nodes["label_column"], path, "files.nodes.label_column")
            if nodes.get("label_column") else None,
            feature_columns=(features[0] if len(features) == 1 else features) or None,
        )
    splits = files.get("splits") or {}
    if not isinstance(splits, dict):
        raise IngestError(f"{path}: files.splits must be an object")
    if splits:
        options["split_files"] = {str(split): _inside(folder, rel, path, f"files.splits.{split}")
                                  for split, rel in splits.items()}
    return read_edge_list(_inside(folder, edges.get("path"), path, "files.edges.path"), **options)


def _field(parent: dict, key: str, kind: type, path: Path, where: str = "files") -> Any:
    value = parent.get(key)
    if not isinstance(value, kind):
        raise IngestError(f"{path}: {where}.{key} missing or not a {kind.__name__}")
    return value


def _text(value: Any, path: Path, where: str) -> str:
    if not isinstance(value, str):
        raise IngestError(f"{path}: {where} must be a string")
    return value


def _inside(folder: Path, rel: Any, path: Path, where: str) -> str:
    """``folder / rel`` for a relative path that stays inside ``folder``."""
    if not isinstance(rel, str) or not rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise IngestError(f"{path}: {where} must be a relative path inside the folder (got {rel!r})")
    return str(folder / rel)
