"""A seeded random node split (train / valid / test), at ingest or into an existing store.

The semantics are PyG's ``RandomNodeSplit(split="train_rest")``: the candidate nodes are
permuted once, the first ``round(n * valid)`` become ``valid``, the next
``round(n * test)`` ``test``, and ``train`` takes the rest when the three fractions sum to
1 (else ``round(n * train)`` of it). The candidates are the labelled nodes when the
store has labels (``-1`` or NaN: unlabelled), else every node. IDs are stored sorted, like
any split, so ``graphpipe split STORE --random 0.8,0.1,0.1`` gives a store that trains.
The permutation is NumPy's (``default_rng(seed)``), so a seed gives the same split on
every machine.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from graphpipe.ingest.errors import IngestError

SPLIT_NAMES = ("train", "valid", "test")


def parse_fractions(text: str | tuple[float, ...] | list[float]) -> tuple[float, float, float]:
    """``"0.8,0.1,0.1"`` → ``(0.8, 0.1, 0.1)``: three fractions in [0, 1] summing to at most 1.

    >>> parse_fractions("0.8,0.1,0.1")
    (0.8, 0.1, 0.1)
    >>> parse_fractions("0.8,0.3")
    Traceback (most recent call last):
    ...
    ValueError: --random-split takes three fractions train,valid,test such as 0.8,0.1,0.1 (got '0.8,0.3')
    """
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or not all(0 <= v <= 1 for v in values) or sum(values) > 1 + 1e-9:
        raise ValueError(f"--random-split takes three fractions train,valid,test such as 0.8,0.1,0.1 "
                         f"(got {text!r})")
    return values  # type: ignore[return-value]


def labelled_nodes(labels: np.ndarray | None, num_nodes: int) -> np.ndarray:
    """The nodes a split draws from: those with a label (``(N,)`` or ``(N, T)``; ``-1`` or
    NaN is none; with several tasks, one known target is enough), or all without labels.

    >>> labelled_nodes(np.array([3, -1, 0]), 3).tolist(), labelled_nodes(None, 2).tolist()
    ([0, 2], [0, 1])
    """
    if labels is None:
        return np.arange(num_nodes, dtype=np.int64)
    labels = np.asarray(labels)
    known = ~np.isnan(labels) if labels.dtype.kind == "f" else labels >= 0
    if known.ndim == 2:
        known = known.any(axis=1)
    return np.flatnonzero(known).astype(np.int64)


def random_split(candidates: np.ndarray | int, fractions: tuple[float, float, float] | str,
                 seed: int = 0) -> dict[str, np.ndarray]:
    """``{"train", "valid", "test": sorted node IDs}`` drawn from ``candidates`` (IDs, or a
    count ``n`` for ``0..n-1``), disjoint, as PyG's ``RandomNodeSplit`` sizes them.

    >>> split = random_split(10, (0.8, 0.1, 0.1), seed=0)
    >>> {name: len(ids) for name, ids in split.items()}
    {'train': 8, 'valid': 1, 'test': 1}
    >>> sorted(np.concatenate(list(split.values())).tolist()) == list(range(10))
    True
    """
    train, valid, test = parse_fractions(fractions) if isinstance(fractions, str) else fractions
    ids = np.arange(candidates, dtype=np.int64) if np.isscalar(candidates) else \
        np.asarray(candidates, dtype=np.int64)
    n = len(ids)
    n_valid, n_test = round(n * valid), round(n * test)
    rest = n - n_valid - n_test
    n_train = rest if abs(train + valid + test - 1) < 1e-9 else min(rest, round(n * train))
    perm = ids[np.random.default_rng(seed).permutation(n)]
    parts = {"valid": perm[:n_valid], "test": perm[n_valid:n_valid + n_test],
             "train": perm[n_valid + n_test:n_valid + n_test + n_train]}
    return {name: np.sort(parts[name]) for name in SPLIT_NAMES}


def write_random_split(path: str | os.PathLike, fractions: tuple[float, float, float] | str,
                       seed: int = 0, *, node_type: str | None = None,
                       replace: bool = False) -> dict[str, int]:
    """Store a random split in the existing store at ``path``, atomically (the store
    editor); a typed store takes it for ``node_type`` (default: its target type). Existing
    splits are refused unless ``replace``. Returns the split sizes.

    >>> import os, tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.store import GraphStore
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "g.npz")
    >>> np.savez(npz, edge_index=np.array([[0, 1, 2, 3], [1, 2, 3, 0]]), y=np.array([0, 1, -1, 1]))
    >>> _ = ingest(npz, os.path.join(tmp.name, "s"))
    >>> write_random_split(os.path.join(tmp.name, "s"), "0.34,0.33,0.33", seed=0)
    {'train': 1, 'valid': 1, 'test': 1}
    >>> GraphStore.open(os.path.join(tmp.name, "s")).split_names
    ['train', 'valid', 'test']
    >>> tmp.cleanup()
    """
    from graphpipe.store import GraphStore

    fractions = parse_fractions(fractions)
    store = GraphStore.open(path)
    if store.is_typed:
        return _write_typed(store, fractions, seed, node_type, replace)
    if node_type is not None:
        raise IngestError(f"{path}: --node-type applies to typed stores (this one has one node type)")
    existing = list(store.manifest.get("splits", {}))
    _refuse_existing(path, existing, replace)
    labels = store.labels if store.manifest.get("labels") else None
    splits = random_split(labelled_nodes(labels, store.num_nodes), fractions, seed)
    from graphpipe.store import tables

    with store.edit() as editor:
        editor.write_table(tables.SPLITS_TABLE, tables.splits_table(splits), replace=bool(existing))
        editor.manifest["splits"] = {name: int(ids.size) for name, ids in splits.items()}
        record_random_split(editor.manifest, fractions, seed, None)
        editor.commit()
    return {name: int(ids.size) for name, ids in splits.items()}


def _refuse_existing(path: Any, existing: list[str], replace: bool) -> None:
    if existing and not replace:
        raise IngestError(f"{path}: has splits {', '.join(existing)} already; pass --replace to "
                          f"replace them with a random split")


def record_random_split(manifest: dict[str, Any], fractions: tuple[float, ...], seed: int,
                        node_type: str | None = None) -> None:
    """Note in the manifest's provenance how the splits were drawn."""
    entry = {"fractions": list(fractions), "seed": int(seed),
             "method": "permutation of the labelled nodes (PyG RandomNodeSplit sizes)"}
    if node_type is not None:
        entry["node_type"] = node_type
    manifest.setdefault("provenance", {})["random_split"] = entry


def _write_typed(store: Any, fractions: tuple[float, float, float], seed: int,
                 node_type: str | None, replace: bool) -> dict[str, int]:
    from graphpipe.store import schema as ts

    ntype = node_type or store.target_type
    if ntype is None:
        raise IngestError(f"{store.path}: a typed store without a target type; pass --node-type "
                          f"(one of {', '.join(store.node_types)})")
    if ntype not in store.node_types:
        raise IngestError(f"{store.path}: no node type {ntype!r}; node types: {', '.join(store.node_types)}")
    existing = list(store.manifest.get("typed_splits", {}).get(ntype, {}))
    _refuse_existing(f"{store.path} ({ntype})", existing, replace)
    others = sorted(set(existing) - set(SPLIT_NAMES))
    if others:
        raise IngestError(f"{store.path} ({ntype}): has splits {', '.join(others)}, which a random "
                          f"split would not replace; it writes train, valid and test only")
    labels = store.typed_labels(ntype)
    splits = random_split(labelled_nodes(labels, store.num_nodes_dict[ntype]), fractions, seed)
    with store.edit() as editor:
        for name, ids in splits.items():
            editor.write_array(ts.split_key(ntype, name), ids, replace=name in existing)
        editor.manifest.setdefault("typed_splits", {})[ntype] = {
            name: int(ids.size) for name, ids in splits.items()}
        if editor.manifest.get("target_type") is None:
            editor.manifest["target_type"] = ntype
        record_random_split(editor.manifest, fractions, seed, ntype)
        editor.commit()
    return {name: int(ids.size) for name, ids in splits.items()}
