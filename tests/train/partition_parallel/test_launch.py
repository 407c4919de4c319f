"""resolve_parts: the parts `graphpipe partition` stored are the ones used (METIS otherwise,
the same as ops.partition's); a stored array out of range is refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphpipe.derive import write_partition
from graphpipe.ingest import ingest
from graphpipe.ops.partition import metis_partition
from graphpipe.store import GraphStore
from graphpipe.synthetic import community_graph, write_ogb_raw
from graphpipe.train.partition_parallel import resolve_parts
from graphpipe.train.partition_parallel.launch import under_torchrun


@pytest.fixture()
def store(tmp_path: Path) -> GraphStore:
    write_ogb_raw(tmp_path / "raw", community_graph(300, 3, avg_degree=5, feature_dim=4, seed=4))
    return ingest(tmp_path / "raw", tmp_path / "store")


def test_stored_parts_then_metis(store: GraphStore) -> None:
    computed = resolve_parts(store, 3)
    assert np.array_equal(computed, metis_partition(*store.topology(), 3, seed=0).parts)
    assert np.array_equal(resolve_parts(store, 1), np.zeros(store.num_nodes))
    write_partition(store, 3, seed=5)
    stored = GraphStore.open(store.path)
    assert np.array_equal(resolve_parts(stored, 3), stored.array("partition/k3/part"))


def test_stored_parts_out_of_range(store: GraphStore) -> None:
    bad = np.full(store.num_nodes, 2, dtype=np.int32)  # part 2 of a 2-way partition
    store.add_derived("partition_k2", {"partition/k2/part": bad}, {"num_parts": 2})
    with pytest.raises(ValueError, match="partition/k2/part"):
        resolve_parts(GraphStore.open(store.path), 2)


def test_under_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    assert not under_torchrun()
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1234")
    assert under_torchrun()
