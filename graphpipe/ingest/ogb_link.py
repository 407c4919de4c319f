"""Reader for OGB link-property folders (ogbl-collab, ogbl-ppa, ogbl-citation2, ogbl-ddi
layouts) as OGB ships them.

Layout of ``folder``::

    raw/edge.csv.gz            "src,dst" per edge (the message-passing graph)
    raw/num-node-list.csv.gz   N          raw/num-edge-list.csv.gz   E
    raw/node-feat.csv.gz       optional, F floats per node
    raw/edge_weight.csv.gz     optional, one value per edge (ogbl-collab)
    raw/edge_year.csv.gz       optional, one year per edge (ogbl-collab)
    raw/node_year.csv.gz       optional, one year per node (ogbl-citation2)
    split/<name>/{train,valid,test}.pt

Each ``.pt`` file is a dict read by torch's weights-only loader and nothing else
(:func:`graphpipe.ingest.safe_load.load_torch_file`): ``{'edge': (n, 2), 'edge_neg':
(m, 2), 'weight': (n,), 'year': (n,)}`` (collab/ppa/ddi style) or ``{'source_node': (n,),
'target_node': (n,), 'target_node_neg': (n, K)}`` (citation2 style), tensors or NumPy
arrays. Keys, dtypes, shapes and node ID ranges are checked before anything is written;
a bad file is one :class:`IngestError` naming the file and key.

What the store gets (:mod:`graphpipe.store.link`): the graph of ``raw/edge.csv.gz``,
with the inverse of every edge when OGB adds them (``add_inverse_edge``: from OGB's
``master.csv`` when the folder is named like an OGB dataset, else True for the
``'edge'`` style and False for the ``source_node`` style), in OGB's order (edge ``i``,
then its inverse), so ``csc/edge_id`` is the column of OGB's ``graph['edge_index']``;
``csc/weight`` and ``csc/time`` (edge years) in CSC order; ``nodes/time`` (node years);
and ``link/<split>/*`` for each ``.pt`` file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.ogb import (
    OgbRawFolder,
    _first_line_columns,
    _read_count_list,
    iter_csv_rows,
    read_csv_table,
)
from graphpipe.ingest.safe_load import load_torch_file
from graphpipe.ingest.source import DatasetSource, RowBlock
from graphpipe.ingest.timestamps import as_year_values
from graphpipe.store.link import LinkSplit, write_link_split

__all__ = ["is_ogb_link_folder", "read_link_pt", "read_ogb_link"]

SPLIT_FILES = ("train", "valid", "test")
_PAIR_KEYS = {"edge": "positive", "edge_neg": "negative"}
_STYLE_KEYS = {"edge": {"edge", "edge_neg", "weight", "year"},
               "source_node": {"source_node", "target_node", "target_node_neg"}}


def is_ogb_link_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` has ``split/<name>/train.pt`` (OGB's link-property layout)."""
    split = Path(path) / "split"
    return split.is_dir() and any((d / "train.pt").is_file() for d in split.iterdir() if d.is_dir())


def _as_array(value: Any, display: str, key: str) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray):
        raise IngestError(f"{display}: key {key!r}: a {type(value).__name__}, expected an array")
    return value


def _node_ids(value: Any, display: str, key: str, num_nodes: int, ndim: int,
              width: int | None = None) -> np.ndarray:
    """int64 node IDs of ``value`` (shape checked: ``ndim``, last dimension ``width``)."""
    arr = _as_array(value, display, key)
    if arr.dtype.kind not in "iu":
        raise IngestError(f"{display}: key {key!r}: dtype {arr.dtype}, expected integer node IDs")
    if arr.ndim != ndim or (width is not None and arr.shape[-1] != width):
        want = "(n, 2)" if width == 2 else ("(n,)" if ndim == 1 else "(n, K)")
        raise IngestError(f"{display}: key {key!r}: shape {tuple(arr.shape)}, expected {want}")
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise IngestError(f"{display}: key {key!r}: node id {bad} out of range [0, {num_nodes})")
    return arr.astype(np.int64, copy=False)


def _per_edge(value: Any, display: str, key: str, n: int, integer: bool) -> np.ndarray:
    arr = _as_array(value, display, key)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.shape != (n,):
        raise IngestError(f"{display}: key {key!r}: shape {tuple(arr.shape)}, expected ({n},)")
    if arr.dtype.kind not in ("iu" if integer else "iuf"):
        raise IngestError(f"{display}: key {key!r}: dtype {arr.dtype}, expected "
                          f"{'integers' if integer else 'numbers'}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise IngestError(f"{display}: key {key!r}: non-finite value")
    return arr.astype(np.int64) if arr.dtype.kind in "iu" else arr.astype(np.float32)


def read_link_pt(path: str | os.PathLike, num_nodes: int, display: str | None = None) -> LinkSplit:
    """One OGB link split file (``train.pt`` ...) as a :class:`LinkSplit`, checked.

    >>> import tempfile, torch
    >>> tmp = tempfile.TemporaryDirectory()
    >>> torch.save({"edge": torch.tensor([[0, 1], [1, 2]]), "edge_neg": torch.tensor([[0, 2]])},
    ...            tmp.name + "/valid.pt")
    >>> s = read_link_pt(tmp.name + "/valid.pt", 3)
    >>> s.src.tolist(), s.dst.tolist(), s.neg_src.tolist(), s.neg_dst.tolist()
    ([0, 1], [1, 2], [0], [2])
    >>> torch.save({"edge": torch.tensor([[0, 7]])}, tmp.name + "/bad.pt")
    >>> read_link_pt(tmp.name + "/bad.pt", 3, "bad.pt")
    Traceback (most recent call last):
    ...
    graphpipe.ingest.errors.IngestError: bad.pt: key 'edge': node id 7 out of range [0, 3)
    >>> tmp.cleanup()
    """
    return _read_styled(path, num_nodes, display or str(path))[0]


def _read_styled(path: str | os.PathLike, num_nodes: int, display: str) -> tuple[LinkSplit, str]:
    """``(split, style)``: style ``"edge"`` (collab/ppa) or ``"source_node"`` (citation2)."""
    loaded = load_torch_file(path, display)
    if not isinstance(loaded, dict):
        raise IngestError(f"{display}: expected a dict of arrays, found {type(loaded).__name__}")
    style = "edge" if "edge" in loaded else "source_node" if "source_node" in loaded else None
    if style is None:
        raise IngestError(f"{display}: no key 'edge' or 'source_node' (found {sorted(map(str, loaded))})")
    unknown = sorted(set(map(str, loaded)) - _STYLE_KEYS[style])
    if unknown:
        raise IngestError(f"{display}: unexpected key(s) {unknown} for the {style!r} layout "
                          f"(known: {sorted(_STYLE_KEYS[style])})")
    if style == "edge":
        return _edge_style(loaded, display, num_nodes), style
    return _source_style(loaded, display, num_nodes), style


def _edge_style(loaded: dict, display: str, num_nodes: int) -> LinkSplit:
    edge = _node_ids(loaded["edge"], display, "edge", num_nodes, 2, 2)
    n = edge.shape[0]
    link = LinkSplit(np.ascontiguousarray(edge[:, 0]), np.ascontiguousarray(edge[:, 1]))
    if "edge_neg" in loaded:
        neg = _node_ids(loaded["edge_neg"], display, "edge_neg", num_nodes, 2, 2)
        link.neg_src, link.neg_dst = np.ascontiguousarray(neg[:, 0]), np.ascontiguousarray(neg[:, 1])
    if "weight" in loaded:
        link.weight = _per_edge(loaded["weight"], display, "weight", n, integer=False)
    if "year" in loaded:
        link.year = as_year_values(_per_edge(loaded["year"], display, "year", n, integer=True),
                                   f"{display}: key 'year'", unit="row")
    return link


def _source_style(loaded: dict, display: str, num_nodes: int) -> LinkSplit:
    if "target_node" not in loaded:
        raise IngestError(f"{display}: key 'source_node' without 'target_node'")
    src = _node_ids(loaded["source_node"], display, "source_node", num_nodes, 1)
    dst = _node_ids(loaded["target_node"], display, "target_node", num_nodes, 1)
    if src.shape != dst.shape:
        raise IngestError(f"{display}: key 'target_node': {dst.shape[0]} entries, but "
                          f"'source_node' has {src.shape[0]}")
    link = LinkSplit(src, dst)
    if "target_node_neg" in loaded:
        neg = _node_ids(loaded["target_node_neg"], display, "target_node_neg", num_nodes, 2)
        if neg.shape[0] != src.shape[0]:
            raise IngestError(f"{display}: key 'target_node_neg': {neg.shape[0]} rows, but "
                              f"'source_node' has {src.shape[0]}")
        link.neg_dst2d = neg
    return link


def _split_folder(ogb: OgbRawFolder, split: str | None) -> Path:
    base = ogb.folder / "split"
    names = sorted(d.name for d in base.iterdir() if d.is_dir() and (d / "train.pt").is_file())
    if split is None:
        if len(names) != 1:
            raise IngestError(f"{base}: several splits {names}; choose one with --split NAME")
        split = names[0]
    if split not in names:
        raise IngestError(f"{base}: no link split {split!r} with train.pt (found {names})")
    return base / split


def _master_inverse(name: str) -> bool | None:
    """OGB's ``add_inverse_edge`` for a folder named like an OGB dataset (``ogbl_collab``)."""
    import csv
    import importlib.util

    # the file only: importing ogb.linkproppred imports PyG, scikit-learn and pandas (seconds)
    spec = importlib.util.find_spec("ogb")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'ogb'", name="ogb")
    master = Path(next(iter(spec.submodule_search_locations))) / "linkproppred" / "master.csv"
    with open(master, newline="") as fh:
        rows = {row[0]: row[1:] for row in csv.reader(fh)}
    names = rows.get("", [])
    wanted = name.replace("_", "-")
    if wanted in names and "add_inverse_edge" in rows:
        return rows["add_inverse_edge"][names.index(wanted)] == "True"
    return None


def _raw_years(ogb: OgbRawFolder, name: str, rows: int) -> np.ndarray | None:
    """``raw/<name>``: one year per line (none negative), or None when absent."""
    values = _raw_values(ogb, name, rows, integer=True)
    return None if values is None else as_year_values(values, ogb.rel(ogb.raw / name))


def _raw_values(ogb: OgbRawFolder, name: str, rows: int, integer: bool) -> np.ndarray | None:
    """``raw/<name>`` (one value per line, ``rows`` lines) or None when absent; integral
    values become int64 (as OGB's pandas read does), others float32."""
    path = ogb.raw / name
    if not path.is_file():
        return None
    values = read_csv_table(path, np.float64, display=ogb.rel(path), ncols=1)[:, 0]
    if values.shape[0] != rows:
        raise IngestError(f"{ogb.rel(path)}: {values.shape[0]} rows, expected {rows}")
    if not np.isfinite(values).all():
        raise IngestError(f"{ogb.rel(path)}: line {int(np.flatnonzero(~np.isfinite(values))[0]) + 1}: "
                          f"non-finite value")
    if integer or (values == np.round(values)).all():
        if integer and not (values == np.round(values)).all():
            bad = int(np.flatnonzero(values != np.round(values))[0])
            raise IngestError(f"{ogb.rel(path)}: line {bad + 1}: {values[bad]} is not an integer")
        return values.astype(np.int64)
    return values.astype(np.float32)


def _edge_chunks(ogb: OgbRawFolder, num_nodes: int, inverse: bool):
    """Edge chunks of ``raw/edge.csv.gz`` (IDs checked here, with their line), each edge
    followed by its inverse when ``inverse`` (OGB's ``edge_index`` order)."""
    path = ogb.raw / "edge.csv.gz"
    display = ogb.rel(path)

    def chunks() -> Iterator[EdgeChunk]:
        row = 0
        for first_line, rows in iter_csv_rows(path, np.int64, ncols=2, display=display):
            bad = np.flatnonzero((rows < 0).any(1) | (rows >= num_nodes).any(1))
            if bad.size:
                value = rows[bad[0]][(rows[bad[0]] < 0) | (rows[bad[0]] >= num_nodes)][0]
                raise IngestError(f"{display}: line {first_line + int(bad[0])}: node id {value} out "
                                  f"of range [0, {num_nodes})")
            src, dst = rows[:, 0], rows[:, 1]
            if inverse:
                src, dst = np.stack([src, dst], 1).ravel(), np.stack([dst, src], 1).ravel()
            yield EdgeChunk(np.ascontiguousarray(src), np.ascontiguousarray(dst),
                            row, display, first_line)
            row += src.shape[0]

    return chunks


def _feature_blocks(ogb: OgbRawFolder):
    path = ogb.raw / "node-feat.csv.gz"
    if not path.is_file():
        return None, None
    display = ogb.rel(path)

    def blocks() -> Iterator[RowBlock]:
        row = 0
        for first_line, rows in iter_csv_rows(path, np.float32, display=display):
            yield RowBlock(row, rows, display, first_line)
            row += rows.shape[0]

    return blocks, _first_line_columns(path)


def read_ogb_link(folder: str | os.PathLike, *, split: str | None = None, name: str | None = None,
                  from_raw: bool = False, add_inverse_edge: bool | None = None) -> DatasetSource:
    """Open an OGB link-property folder as a :class:`DatasetSource` whose ingest also writes
    the link splits (see the module docstring). Every split file is read and checked here,
    before any store is written. ``from_raw`` is accepted for symmetry with
    :func:`graphpipe.ingest.ogb.read_ogb` (only ``raw/`` is ever read).

    >>> import tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.store.link import read_link_split
    >>> from graphpipe.synthetic.link import link_dataset, write_ogb_link
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = write_ogb_link(tmp.name + "/ogbl", link_dataset(100, pool=10), num_neg=20)
    >>> source = read_ogb_link(folder)
    >>> source.num_nodes, source.extra["add_inverse_edge"], source.num_input_edges > 0
    (100, 1, True)
    >>> store = ingest(source, tmp.name + "/store")
    >>> store.num_edges == source.num_input_edges, read_link_split(store, "test").neg_src.shape
    (True, (20,))
    >>> tmp.cleanup()
    """
    ogb = OgbRawFolder(folder, from_raw=True)
    if not (ogb.raw / "edge.csv.gz").is_file():
        raise IngestError(f"{ogb.folder}: not an OGB link-property folder: raw/edge.csv.gz not found")
    num_nodes = _read_count_list(ogb, "num-node-list.csv.gz")
    num_edges = _read_count_list(ogb, "num-edge-list.csv.gz")
    split_dir = _split_folder(ogb, split)
    links: dict[str, LinkSplit] = {}
    styles: set[str] = set()
    for part in SPLIT_FILES:
        path = split_dir / f"{part}.pt"
        if part != "train" and not path.is_file():
            continue
        links[part], style = _read_styled(path, num_nodes, ogb.rel(path))
        styles.add(style)
    if len(styles) > 1:
        raise IngestError(f"{ogb.rel(split_dir)}: split files mix the 'edge' and 'source_node' layouts")
    inverse = add_inverse_edge
    if inverse is None:
        inverse = _master_inverse(ogb.folder.name)
    if inverse is None:
        inverse = styles == {"edge"}
    weight = _raw_values(ogb, "edge_weight.csv.gz", num_edges, integer=False)
    year, node_year = (_raw_years(ogb, name, rows) for name, rows in
                       (("edge_year.csv.gz", num_edges), ("node_year.csv.gz", num_nodes)))
    features, dim = _feature_blocks(ogb)
    factor = 2 if inverse else 1
    source = DatasetSource(
        name=name or ogb.folder.name, source_format="ogb-link", source_path=str(ogb.folder),
        num_nodes=num_nodes, num_input_edges=factor * num_edges,
        edge_chunks=_edge_chunks(ogb, num_nodes, inverse), node_features=features, feature_dim=dim,
        extra={"edge_file": ogb.rel(ogb.raw / "edge.csv.gz"),
               "num_nodes_file": ogb.rel(ogb.raw / "num-node-list.csv.gz"),
               "num_edges_file": f"{ogb.rel(ogb.raw / 'num-edge-list.csv.gz')} (x{factor})",
               "link_split": split_dir.name, "add_inverse_edge": int(inverse),
               **({"edge_time_file": ogb.rel(ogb.raw / "edge_year.csv.gz")} if year is not None else {}),
               **({"node_time_file": ogb.rel(ogb.raw / "node_year.csv.gz")} if node_year is not None
                  else {})},
        node_time=node_year, edge_time=None if year is None else _per_input_edge(year, factor),
        needs_edge_ids=weight is not None)
    source.finish = _finisher(links, num_nodes, factor, weight)
    return source


def _per_input_edge(values: np.ndarray, factor: int):
    """Row blocks of ``values`` per input edge (each value twice with inverse edges)."""
    def blocks() -> Iterator[RowBlock]:
        yield RowBlock(0, np.repeat(values, factor).reshape(-1, 1), "raw/edge_year.csv.gz", 1)

    return blocks


def _finisher(links: dict[str, LinkSplit], num_nodes: int, factor: int, weight):
    """What the ingest writes into the store before its commit: the link splits and the
    edge weights in CSC order (through ``csc/edge_id``). Edge and node years go through
    the pipeline's timestamps (``csc/time``, ``nodes/time``)."""

    def finish(writer: Any) -> None:
        from graphpipe.store import arrays as _arrays

        for part, link in links.items():
            write_link_split(writer, part, link, num_nodes)
        if weight is not None:
            rows = np.asarray(_arrays.read_array(writer.path, "csc/edge_id")) // factor
            writer.write_array("csc/weight", weight[rows])
        writer.manifest.setdefault("link", {})["source"] = "ogb"
        # OGB's add_inverse_edge, added by this reader (edge i is input edges 2i and 2i + 1)
        writer.manifest["graph"]["ogb_inverse_edges"] = factor == 2

    return finish
