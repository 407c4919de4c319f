"""Node labels checked and normalised before they are stored (every ingest path).

Semantics (``task_type`` comes from the reader):

- Classification (``"... classification"``): labels are stored as int64. ``-1`` and, in
  float labels, ``NaN`` mean *unlabelled* (OGB marks unlabelled nodes with NaN, e.g.
  ogbn-papers100M): NaN becomes ``-1`` and the task stays classification. Any other
  negative label, a non-integral or infinite value, a binary label other than 0/1, or a
  class count above :data:`MAX_CLASSES` is refused with the file and row.
  ``num_classes`` is ``max label + 1`` (or the reader's count of class names when larger);
  the manifest's ``labels.unlabeled`` counts the ``-1`` entries.
- Regression: float64; NaN (a missing target) is kept, ``±inf`` is refused.

Loaders that care (the cluster loader, the sequence trainer) treat negative labels
as unlabelled; the splits of a well-formed dataset hold labelled nodes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.source import DatasetSource

if TYPE_CHECKING:
    from graphpipe.ingest.npz_stream import NpyMember

UNLABELED = -1
"""The stored label of an unlabelled node (classification)."""
MAX_CLASSES = 1 << 20
"""Most classes a multiclass label column may imply (a larger label is refused: 1e9 would
make every consumer allocate a billion-wide output)."""


@dataclass
class NormalizedLabels:
    """Labels ready to store: ``values`` ``(N,)`` or ``(N, T)``, and their manifest entry."""

    values: np.ndarray
    task_type: str | None
    num_classes: int | None
    unlabeled: int

    def manifest_entry(self) -> dict[str, Any]:
        entry = {"shape": list(self.values.shape), "dtype": str(self.values.dtype),
                 "task_type": self.task_type, "num_classes": self.num_classes}
        if self.unlabeled:
            entry["unlabeled"] = int(self.unlabeled)
            entry["unlabeled_value"] = UNLABELED
        return entry


def _where(source: DatasetSource) -> str:
    return str(source.extra.get("label_file") or f"{source.source_path}: labels")


def _refuse(where: str, values: np.ndarray, flat: int, why: str) -> None:
    row = int(np.unravel_index(int(flat), values.shape)[0])
    raise IngestError(f"{where}: row {row + 1}: label {values.reshape(-1)[flat]} {why}")


def _classification(values: np.ndarray, where: str) -> np.ndarray:
    """int64 labels with ``-1`` for unlabelled (NaN); refuses what is not a class index."""
    if values.dtype.kind == "b":
        return values.astype(np.int64)
    if values.dtype.kind == "f":
        bad = np.flatnonzero(~np.isnan(values).reshape(-1)
                             & ~(np.isfinite(values) & (values == np.round(values))).reshape(-1))
        if bad.size:
            _refuse(where, values, bad[0], "is not a class index (an integer, or NaN for unlabelled)")
        too_big = np.flatnonzero((np.abs(np.nan_to_num(values)) > MAX_CLASSES).reshape(-1))
        if too_big.size:
            _refuse(where, values, too_big[0], f"is beyond {MAX_CLASSES:,} classes")
        return np.where(np.isnan(values), UNLABELED, values).astype(np.int64)
    if values.dtype.kind not in "iu":
        raise IngestError(f"{where}: labels of dtype {values.dtype}, expected integers for classification")
    return values.astype(np.int64, copy=False)


def class_labels(values: np.ndarray, where: str) -> np.ndarray:
    """One type's class labels as int64 (NaN: -1, unlabelled); what is not a class index, or
    a class below -1, is refused naming ``where`` and the row.

    >>> class_labels(np.array([2.0, np.nan, 0.0]), "y.npy").tolist()
    [2, -1, 0]
    >>> class_labels(np.array([1, -3]), "y.csv")
    Traceback (most recent call last):
    ...
    graphpipe.ingest.errors.IngestError: y.csv: row 2: label -3 is not a class (classes are >= 0; -1 or NaN: unlabelled)
    """
    labels = _classification(np.asarray(values).reshape(-1), where)
    bad = np.flatnonzero(labels < UNLABELED)
    if bad.size:
        _refuse(where, labels, bad[0], "is not a class (classes are >= 0; -1 or NaN: unlabelled)")
    return labels


def normalize_labels(source: DatasetSource) -> NormalizedLabels | None:
    """Check ``source.labels`` (``(N,)`` or ``(N, T)``) against ``source.num_nodes`` and the
    rules of the module docstring; returns what to store, or None without labels."""
    if source.labels is None:
        return None
    values = np.asarray(source.labels)
    where = _where(source)
    if values.ndim not in (1, 2) or values.shape[0] != source.num_nodes:
        raise IngestError(f"{where}: labels of shape {values.shape}, but the graph has "
                          f"{source.num_nodes} nodes")
    task = source.task_type
    if task is None or "classification" not in task:
        values = np.ascontiguousarray(values)
        if values.dtype.kind == "f":
            bad = np.flatnonzero(np.isinf(values).reshape(-1))
            if bad.size:
                _refuse(where, values, bad[0], "is infinite (NaN marks a missing target)")
        return NormalizedLabels(values, task, source.num_classes, 0)
    labels = np.ascontiguousarray(_classification(values, where))
    negative = np.flatnonzero((labels < UNLABELED).reshape(-1))
    if negative.size:
        _refuse(where, labels, negative[0], f"is negative (only {UNLABELED} or NaN: unlabelled)")
    known_max = int(labels.max()) if labels.size else UNLABELED
    if task.startswith("binary") and known_max > 1:
        _refuse(where, labels, int(np.argmax(labels.reshape(-1))), "is not 0 or 1 (binary classification)")
    if known_max + 1 > MAX_CLASSES:
        _refuse(where, labels, int(np.argmax(labels.reshape(-1))),
                f"implies {known_max + 1:,} classes, more than the {MAX_CLASSES:,} allowed")
    num_classes = 2 if task.startswith("binary") else max(known_max + 1, int(source.num_classes or 0))
    if num_classes > MAX_CLASSES:
        raise IngestError(f"{where}: {num_classes:,} classes, more than the {MAX_CLASSES:,} allowed")
    return NormalizedLabels(labels, task, num_classes, int(np.count_nonzero(labels == UNLABELED)))


def stream_labels(member: NpyMember, num_nodes: int) -> np.ndarray:
    """The ``(N,)`` / ``(N, T)`` labels of an ``.npz`` member (OGB's ``node_label``), read in
    row blocks with at most ``N * 8`` bytes held: float labels whose known values are all
    integers become int64 classes with NaN as :data:`UNLABELED` (OGB's unlabelled nodes);
    other floats stay float64 (regression); integer labels are kept. A ``(N, 1)`` column
    becomes ``(N,)``.

    >>> import os, tempfile
    >>> from graphpipe.ingest.npz_stream import list_members
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "node-label.npz")
    >>> np.savez_compressed(path, node_label=np.array([[3.0], [np.nan], [0.0]], dtype=np.float32))
    >>> stream_labels(list_members(path)["node_label"], 3).tolist()
    [3, -1, 0]
    >>> tmp.cleanup()
    """
    from graphpipe.ingest.npz_stream import iter_row_blocks

    if len(member.shape) not in (1, 2) or member.shape[0] != num_nodes:
        raise IngestError(f"{member.display}: labels of shape {member.shape}, but the graph has "
                          f"{num_nodes} nodes")
    shape = member.shape if len(member.shape) == 1 or member.shape[1] != 1 else member.shape[:1]
    if member.dtype.kind != "f":
        out = np.empty(shape, dtype=member.dtype)
        for first, rows in iter_row_blocks(member):
            out[first:first + rows.shape[0]] = rows.reshape((rows.shape[0],) + shape[1:])
        return out
    out = np.empty(shape, dtype=np.int64)
    known = False
    for first, rows in iter_row_blocks(member):
        rows = rows.reshape((rows.shape[0],) + shape[1:])
        missing = np.isnan(rows)
        values = rows[~missing]
        if values.size and not (np.isfinite(values).all() and (values == np.round(values)).all()
                                and np.abs(values).max() <= 2.0 ** 53):
            return _float_labels(member, shape)
        known = known or bool(values.size)
        out[first:first + rows.shape[0]] = np.where(missing, UNLABELED, rows)
    return out if known else _float_labels(member, shape)


def _float_labels(member: NpyMember, shape: tuple[int, ...]) -> np.ndarray:
    """float64 labels (regression targets, NaN kept), read in row blocks."""
    from graphpipe.ingest.npz_stream import iter_row_blocks

    out = np.empty(shape, dtype=np.float64)
    for first, rows in iter_row_blocks(member):
        out[first:first + rows.shape[0]] = rows.reshape((rows.shape[0],) + shape[1:])
    return out
