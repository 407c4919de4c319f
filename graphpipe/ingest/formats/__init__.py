"""Every dataset format ingest reads, in one ordered registry: :data:`FORMATS`, :func:`detect`.

Detection happens here and only here: :func:`detect` asks each format in turn, specific
before general, and the first that recognises the path reads it (``graphpipe ingest
--format NAME`` skips the sniffing). The order matters where layouts overlap: an OGB
heterogeneous folder also has OGB's ``raw/``, a generated folder has ``split/``, and any
file or folder is, at worst, an edge list.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.formats.base import Format, flag

_NPY = frozenset({"node_features", "name"})
_EDGELIST = _NPY | {"src", "dst", "weight", "time_column", "nodes", "node_id", "feature_columns",
                    "label", "split_dir", "header", "delimiter", "block_rows", "id_type", "map_ids",
                    "edge_feature_columns", "split_column", "split_files"}
_OGB = _NPY | {"split", "from_raw"}
FORMATS: list[Format] = [
    Format("mag240m", "OGB-LSC MAG240M (meta.pt, processed/): typed",
           "graphpipe.ingest.mag240m:is_mag240m_folder", "graphpipe.ingest.mag240m:read_mag240m",
           frozenset({"target_type"}), typed=True),
    Format("typed-edgelist", "edges/<src>__<rel>__<dst>.csv|parquet, nodes/<type>.*: typed",
           "graphpipe.ingest.typed_edgelist:is_typed_edgelist_folder",
           "graphpipe.ingest.typed_edgelist:read_typed_edgelist", frozenset({"target_type"}),
           typed=True),
    Format("ogb-hetero", "OGB's heterogeneous raw folder (ogbn-mag): typed",
           "graphpipe.ingest.ogb_hetero:is_ogb_hetero_folder", "graphpipe.ingest.ogb_hetero:read_ogb_hetero",
           frozenset({"split", "target_type"}), typed=True),
    Format("generated", "a folder written by `graphpipe generate` (generate.json)",
           "graphpipe.ingest.generated:is_generated_folder", "graphpipe.ingest.generated:read_generated", _NPY),
    Format("graphbolt", "a GraphBolt on-disk dataset (metadata.yaml)",
           "graphpipe.ingest.graphbolt:is_graphbolt_folder", "graphpipe.ingest.graphbolt:read_graphbolt",
           _NPY | {"target_type"}),
    Format("dgl-chunked", "a DGL chunked graph (metadata.json)",
           "graphpipe.ingest.dgl_chunked:is_dgl_chunked_folder", "graphpipe.ingest.dgl_chunked:read_dgl_chunked",
           _NPY | {"target_type"}),
    Format("ogb-link", "an OGB link-prediction folder (split/<name>/train.pt)",
           "graphpipe.ingest.ogb_link:is_ogb_link_folder", "graphpipe.ingest.ogb_link:read_ogb_link",
           _OGB | {"add_inverse_edge"}),
    Format("ogb", "an OGB node-property folder (raw/, processed/ or split/)",
           "graphpipe.ingest.ogb:is_ogb_folder", "graphpipe.ingest.ogb:read_ogb", _OGB),
    Format("npz", "a .npz of edge_index, x, y, train_idx, ...",
           "graphpipe.ingest.npz:is_npz_file", "graphpipe.ingest.npz:read_npz", _NPY | {"block_rows"}),
    Format("edgelist", "CSV/TSV/whitespace/Parquet edge list: a file, a glob or a folder of parts",
           "graphpipe.ingest.edgelist:is_edge_list", "graphpipe.ingest.edgelist:read_edge_list",
           _EDGELIST),
]
"""The formats, in the order :func:`detect` tries them (specific before general)."""


def names() -> list[str]:
    """The format names ``--format`` takes, in detection order.

    >>> names()[-3:]
    ['ogb', 'npz', 'edgelist']
    """
    return [fmt.name for fmt in FORMATS]


def get(name: str) -> Format:
    """The format called ``name``; an unknown name is an error listing the formats.

    >>> get("ogb").name
    'ogb'
    >>> get("csv")
    Traceback (most recent call last):
    ...
    graphpipe.ingest.errors.IngestError: unknown format 'csv'; formats: mag240m, ...
    """
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise IngestError(f"unknown format {name!r}; formats: {', '.join(names())}")


def detect(path: str | os.PathLike) -> Format:
    """The format of ``path``, sniffed once; a graphpipe store or a path nothing recognises
    is an error naming the formats.

    >>> import tempfile
    >>> detect(tempfile.gettempdir() + "/no-such-file.csv")
    Traceback (most recent call last):
    ...
    graphpipe.ingest.errors.IngestError: ...no-such-file.csv: no such file or folder (ingest reads: ...)
    """
    from graphpipe.store.atomic import is_store_dir

    path = Path(path)
    if path.is_dir() and is_store_dir(path.resolve()):
        raise IngestError(f"{path}: is a graphpipe store, not a dataset (ingest reads: {', '.join(names())})")
    for fmt in FORMATS:
        if fmt.sniff(path):
            return fmt
    raise IngestError(f"{path}: no such file or folder (ingest reads: {', '.join(names())})")


def open_source(path: str | os.PathLike, *, format: str | None = None, **reader_options: Any) -> Any:
    """Open the dataset at ``path`` with its reader (``format``: skip detection); a typed
    dataset opens to a :class:`~graphpipe.ingest.source.TypedSource`, any other to a
    :class:`~graphpipe.ingest.source.DatasetSource`.

    >>> import os, tempfile
    >>> import numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "edges.txt")
    >>> _ = open(path, "w").write("# SNAP style\\n0\\t1\\n1\\t2\\n")
    >>> source = open_source(path)
    >>> source.num_nodes, source.num_input_edges
    (3, 2)
    >>> tmp.cleanup()
    """
    fmt = get(format) if format else detect(path)
    return fmt.open(path, **reader_options)


__all__ = ["FORMATS", "Format", "detect", "flag", "get", "names", "open_source"]
