"""A seeded random node split (issue 28, point 5): PyG's RandomNodeSplit sizes, labelled
nodes only, disjoint, the same for a seed, stored like any split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphpipe.ingest import IngestError, IngestOptions, ingest
from graphpipe.ingest.random_split import labelled_nodes, random_split, write_random_split
from graphpipe.store import GraphStore
from graphpipe.store.validate import validate


@pytest.mark.parametrize("n", [1, 7, 10, 333, 2708])
@pytest.mark.parametrize("fractions", [(0.8, 0.1, 0.1), (0.6, 0.2, 0.2), (0.5, 0.25, 0.25)])
def test_sizes_are_pyg_random_node_split_sizes(n: int, fractions) -> None:
    import torch
    from torch_geometric.data import Data
    from torch_geometric.transforms import RandomNodeSplit

    data = RandomNodeSplit(num_val=fractions[1], num_test=fractions[2])(Data(y=torch.zeros(n), num_nodes=n))
    split = random_split(n, fractions, seed=3)
    for name, mask in (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask)):
        assert len(split[name]) == int(torch.as_tensor(mask).sum()), name


def test_disjoint_cover_and_seeded() -> None:
    candidates = np.array([2, 3, 5, 7, 11, 13, 17, 19, 23, 29], dtype=np.int64)
    split = random_split(candidates, (0.6, 0.2, 0.2), seed=1)
    together = np.concatenate(list(split.values()))
    assert sorted(together.tolist()) == candidates.tolist()
    for ids in split.values():
        assert np.all(np.diff(ids) > 0)  # sorted, each once
    again = random_split(candidates, (0.6, 0.2, 0.2), seed=1)
    assert all(np.array_equal(split[k], again[k]) for k in split)
    other = random_split(candidates, (0.6, 0.2, 0.2), seed=2)
    assert any(not np.array_equal(split[k], other[k]) for k in split)


def test_fractions_below_one_leave_nodes_out() -> None:
    split = random_split(100, (0.5, 0.1, 0.1), seed=0)
    assert {k: len(v) for k, v in split.items()} == {"train": 50, "valid": 10, "test": 10}


def test_only_labelled_nodes_are_drawn() -> None:
    assert labelled_nodes(np.array([1, -1, 0, -1]), 4).tolist() == [0, 2]
    assert labelled_nodes(np.array([0.5, np.nan]), 2).tolist() == [0]
    assert labelled_nodes(np.array([[np.nan, 1.0], [np.nan, np.nan]]), 2).tolist() == [0]


def _npz(tmp_path: Path, **extra) -> Path:
    path = tmp_path / "g.npz"
    n = 50
    ring = np.arange(n)
    y = np.where(ring % 5 == 0, -1, ring % 3)
    np.savez(path, edge_index=np.stack([ring, (ring + 1) % n]), y=y, **extra)
    return path


def test_ingest_random_split(tmp_path: Path) -> None:
    store = ingest(_npz(tmp_path), tmp_path / "s", IngestOptions(random_split=(0.8, 0.1, 0.1), seed=4))
    labelled = np.flatnonzero(np.asarray(store.labels) >= 0)
    expected = random_split(labelled, (0.8, 0.1, 0.1), seed=4)
    for name, ids in expected.items():
        np.testing.assert_array_equal(store.split(name), ids)
    assert store.manifest["provenance"]["random_split"]["seed"] == 4
    assert validate(tmp_path / "s") == []


def test_ingest_refuses_a_random_split_over_the_sources_own(tmp_path: Path) -> None:
    path = _npz(tmp_path, train_idx=np.array([1, 2]))
    with pytest.raises(IngestError, match=r"has its own splits \(train\); drop --random-split"):
        ingest(path, tmp_path / "s", IngestOptions(random_split="0.8,0.1,0.1"))
    assert not (tmp_path / "s").exists()


def test_split_an_existing_store(tmp_path: Path) -> None:
    ingest(_npz(tmp_path), tmp_path / "s")
    assert GraphStore.open(tmp_path / "s").split_names == []
    sizes = write_random_split(tmp_path / "s", "0.8,0.1,0.1", seed=0)
    store = GraphStore.open(tmp_path / "s")
    labelled = np.flatnonzero(np.asarray(store.labels) >= 0)
    assert sizes == {"train": 32, "valid": 4, "test": 4} and len(labelled) == 40
    for name, ids in random_split(labelled, (0.8, 0.1, 0.1), seed=0).items():
        np.testing.assert_array_equal(store.split(name), ids)
    assert validate(tmp_path / "s") == []
    with pytest.raises(IngestError, match="has splits train, valid, test already; pass --replace"):
        write_random_split(tmp_path / "s", "0.8,0.1,0.1", seed=1)
    write_random_split(tmp_path / "s", "0.6,0.2,0.2", seed=1, replace=True)
    assert len(GraphStore.open(tmp_path / "s").split("valid")) == 8
    assert validate(tmp_path / "s") == []
