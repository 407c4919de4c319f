"""Node and edge timestamps into a store: ``nodes/time`` (int64 ``(N,)``) and ``csc/time``
(int64 ``(E,)``, CSC order, like ``csc/indices``).

Readers hand timestamps over in their own order: node times as one ``(N,)`` array
(:attr:`DatasetSource.node_time`), edge times as row blocks in edge-list order
(:attr:`DatasetSource.edge_time`, like edge features). The edge times are permuted into
CSC order through ``csc/edge_id``, exactly as a CSC slot finds its edge features: slot
``s`` gets the time of input edge ``edge_id[s]``, and a reverse edge added at ingest
(``edge_id >= E_input``) the time of the edge it reverses. Timestamps are integers
(years, seconds since the epoch, ...): a float, boolean or text value is refused with
the file and row named. The edge times are staged in edge-list order in a hidden file of
the store's temporary tree (8 bytes per edge, removed before commit), so the permutation
never holds more than one block in memory besides the memory maps.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import numpy as np

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.source import DatasetSource, RowBlock
from graphpipe.store import arrays as _arrays
from graphpipe.store.writer import StoreWriter

__all__ = ["as_time_values", "as_year_values", "write_edge_time", "write_node_time", "write_times"]

_GATHER_BLOCK = 1 << 22


def as_time_values(values: np.ndarray, where: str, first_line: int = 1) -> np.ndarray:
    """``values`` (one column) as int64 timestamps; anything but integers is an
    :class:`IngestError` naming ``where`` and the line of the first bad value."""
    values = np.asarray(values)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise IngestError(f"{where}: timestamps must be one value per row (got shape {values.shape})")
    if values.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
        if bad.size:
            raise IngestError(f"{where}: line {first_line + int(bad[0])}: timestamp {values[bad[0]].item()!r} "
                              f"is not an integer (years, seconds since the epoch, ...)")
        if values.size and np.abs(values).max() >= 2.0 ** 63:
            raise IngestError(f"{where}: timestamps beyond the int64 range")
        return values.astype(np.int64)
    if values.dtype.kind not in "iu":
        raise IngestError(f"{where}: timestamps must be integers (got dtype {values.dtype})")
    if values.dtype == np.uint64 and values.size and int(values.max()) >= 1 << 63:
        raise IngestError(f"{where}: timestamps beyond the int64 range")
    return values.astype(np.int64, copy=False)


def as_year_values(values: np.ndarray, where: str, first_line: int = 1, unit: str = "line") -> np.ndarray:
    """``values`` as int64 years (:func:`as_time_values`); a negative year is an
    :class:`IngestError` naming ``where`` and its ``unit`` (line, row) (OGB's ``node_year``,
    MAG240M's ``node_year.npy``, a link split's ``year``).

    >>> as_year_values(np.array([2019.0, 2020.0]), "node_year.npy").tolist()
    [2019, 2020]
    >>> as_year_values(np.array([2019, -5]), "node_year.npy")
    Traceback (most recent call last):
    graphpipe.ingest.errors.IngestError: node_year.npy: line 2: year -5 is negative
    """
    years = as_time_values(values, where, first_line)
    bad = np.flatnonzero(years < 0)
    if bad.size:
        raise IngestError(f"{where}: {unit} {first_line + int(bad[0])}: year {int(years[bad[0]])} "
                          f"is negative")
    return years


def _range(times: np.ndarray) -> list[int] | None:
    return [int(times.min()), int(times.max())] if times.size else None


def write_node_time(writer: StoreWriter, values: np.ndarray, num_nodes: int, where: str) -> list[int] | None:
    """``nodes/time`` from ``values`` (``(N,)`` integers); returns their ``[min, max]``."""
    times = as_time_values(values, where)
    if times.shape[0] != num_nodes:
        raise IngestError(f"{where}: {times.shape[0]} node timestamps, but the graph has {num_nodes} nodes")
    writer.write_array("nodes/time", times)
    return _range(times)


def _stage_edge_times(path: str, blocks: Iterator[RowBlock], num_input: int, where: str) -> np.ndarray:
    """The edge times in edge-list order in a memory-mapped ``.npy`` at ``path``."""
    staged = np.lib.format.open_memmap(path, mode="w+", dtype=np.int64, shape=(num_input,))
    done = 0
    for block in blocks:
        times = as_time_values(block.values, block.source, block.first_line)
        if done + times.shape[0] > num_input:
            raise IngestError(f"{block.source}: line {block.first_line + num_input - done}: more edge "
                              f"timestamps than the {num_input} edges")
        staged[done:done + times.shape[0]] = times
        done += times.shape[0]
    if done != num_input:
        raise IngestError(f"{where}: {done} edge timestamps, but there are {num_input} edges")
    return staged


def write_edge_time(writer: StoreWriter, blocks: Iterator[RowBlock], num_input: int, where: str
                    ) -> list[int] | None:
    """``csc/time`` from edge times in edge-list order; needs ``csc/edge_id`` in ``writer``.
    Returns the ``[min, max]`` of the stored (CSC) times."""
    spill = os.path.join(writer.path, f".time-spill-{uuid.uuid4().hex}.npy")
    try:
        staged = _stage_edge_times(spill, blocks, num_input, where)
        edge_id = _arrays.read_array(writer.path, "csc/edge_id")
        out = writer.create_raw_array("csc/time", (edge_id.shape[0],), np.int64)
        lo = hi = None
        for start in range(0, edge_id.shape[0], _GATHER_BLOCK):
            eid = np.asarray(edge_id[start:start + _GATHER_BLOCK])
            rows = np.where(eid >= num_input, eid - num_input, eid)  # a reverse edge: its edge's time
            part = staged[rows]
            out[start:start + rows.shape[0]] = part
            if part.size:
                lo = int(part.min()) if lo is None else min(lo, int(part.min()))
                hi = int(part.max()) if hi is None else max(hi, int(part.max()))
        if hasattr(out, "flush"):
            out.flush()
        del out, staged, edge_id
        return None if lo is None else [lo, hi]
    finally:
        if os.path.exists(spill):
            os.remove(spill)


def write_times(writer: StoreWriter, source: DatasetSource, num_input: int) -> dict | None:
    """Write the source's node and edge timestamps (if any); returns the manifest entry
    (``{"node": bool, "edge": bool, "dtype": "int64", "node_range" / "edge_range": [min, max]}``)
    or None when there are none."""
    if source.node_time is None and source.edge_time is None:
        return None
    entry: dict = {"node": source.node_time is not None, "edge": source.edge_time is not None,
                   "dtype": "int64", "edge_order": "csc"}
    if source.node_time is not None:
        entry["node_range"] = write_node_time(writer, source.node_time, source.num_nodes,
                                              source.extra.get("node_time_file", "node timestamps"))
    if source.edge_time is not None:
        entry["edge_range"] = write_edge_time(writer, source.edge_time(), num_input,
                                              source.extra.get("edge_time_file", "edge timestamps"))
    return entry
