"""Derived arrays through the store's public API (``GraphStore.add_derived``): atomic,
manifest and checksums updated, the open handle up to date, other derivations kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphpipe.store import GraphStore, StoreError, StoreWriter
from graphpipe.store.derived import (
    DEGREE_ORDER_KEY,
    partition_keys,
    read_degree_order,
    write_derived,
)


def _tiny_store(path: Path) -> GraphStore:
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", np.array([0, 0, 1, 3, 6], dtype=np.int64))
        w.write_array("csc/indices", np.array([0, 0, 1, 0, 1, 2], dtype=np.int32))
        w.write_array("csc/edge_id", np.arange(6, dtype=np.int64))
        w.manifest["num_nodes"], w.manifest["num_edges"] = 4, 6
        w.commit()
    return GraphStore.open(path)


def test_add_derived_updates_the_handle_and_the_files(tmp_path: Path) -> None:
    store = _tiny_store(tmp_path / "s")
    assert read_degree_order(store) is None
    entry = store.add_derived("centrality", {DEGREE_ORDER_KEY: np.array([3, 2, 1, 0])},
                              {"method": "x"})
    assert entry == {"method": "x"}
    assert store.manifest["derived"]["centrality"] == entry
    assert read_degree_order(store).tolist() == [3, 2, 1, 0]  # cached now
    store.add_derived("centrality", {DEGREE_ORDER_KEY: np.array([0, 1, 2, 3])},
                      {"method": "y"}, replace=True)
    assert read_degree_order(store).tolist() == [0, 1, 2, 3]  # cache invalidated
    reopened = GraphStore.open(tmp_path / "s")
    assert reopened.manifest["derived"]["centrality"] == {"method": "y"}
    assert DEGREE_ORDER_KEY in reopened.manifest["arrays"]
    assert reopened.array(DEGREE_ORDER_KEY).tolist() == [0, 1, 2, 3]


def test_existing_key_without_replace_changes_nothing(tmp_path: Path) -> None:
    store = _tiny_store(tmp_path / "s")
    keys = partition_keys(2)
    store.add_derived("partition_k2", {keys["part"]: np.array([0, 0, 1, 1], np.int32)},
                      {"num_parts": 2})
    before = (tmp_path / "s" / "manifest.json").read_bytes()
    with pytest.raises(StoreError, match="already exists"):
        store.add_derived("partition_k2", {keys["part"]: np.array([1, 1, 0, 0], np.int32)},
                          {"num_parts": 2, "other": 1})
    assert (tmp_path / "s" / "manifest.json").read_bytes() == before
    assert GraphStore.open(tmp_path / "s").array(keys["part"]).tolist() == [0, 0, 1, 1]
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".pending")]


def test_other_derivations_are_kept(tmp_path: Path) -> None:
    _tiny_store(tmp_path / "s")
    write_derived(tmp_path / "s", "a", {"derived/a": np.arange(4)}, {"k": 1})
    manifest = write_derived(tmp_path / "s", "b", {"derived/b": np.arange(4) * 2}, {"k": 2})
    assert manifest["derived"] == {"a": {"k": 1}, "b": {"k": 2}}
    reopened = GraphStore.open(tmp_path / "s")
    assert reopened.array("derived/a").tolist() == [0, 1, 2, 3]
    assert reopened.array("derived/b").tolist() == [0, 2, 4, 6]


def test_partition_keys() -> None:
    assert partition_keys(4) == {"part": "partition/k4/part", "perm": "partition/k4/perm",
                                 "inverse": "partition/k4/inverse"}
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="'num_parts'"):
            partition_keys(bad)
