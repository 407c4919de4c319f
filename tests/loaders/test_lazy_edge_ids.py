"""LazyEdgeIds: a typed batch's e_id is looked up in the edge order only when read, with
the eager lookup's values (the input edge lists are the oracle); moving or pinning a batch
keeps it unread; a loader that never reads e_id leaves the edge order untouched."""

from __future__ import annotations

import numpy as np
import torch

from graphpipe.loaders import GraphData, NeighborLoader
from graphpipe.loaders.lazy_edge_ids import LazyEdgeIds

COUNTS = {"paper": 120, "author": 80}
RELS = [("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "rev_writes", "author")]


def _edges(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    w = (rng.integers(0, 80, 600), rng.integers(0, 120, 600))
    c = (rng.integers(0, 120, 500), rng.integers(0, 120, 500))
    return {RELS[0]: w, RELS[1]: c, RELS[2]: w[::-1]}


def test_lookup_equals_the_eager_lookup_and_map_applies_at_lookup():
    rng = np.random.default_rng(1)
    order = {RELS[0]: rng.permutation(1000), RELS[1]: rng.permutation(50)}
    slots = {RELS[0]: rng.integers(0, 1000, 300), RELS[1]: rng.integers(0, 50, 40),
             RELS[2]: rng.integers(0, 9, 5)}
    lazy = LazyEdgeIds(slots, order)
    assert lazy.pending == RELS[:2] and list(lazy) == RELS and len(lazy) == 3
    assert RELS[0] in lazy and ("x", "y", "z") not in lazy and lazy.pending == RELS[:2]
    doubled = lazy.map(lambda t: t * 2)          # nothing looked up by the map
    assert doubled.pending == RELS[:2] and lazy.pending == RELS[:2]
    for et in RELS:
        want = order[et][slots[et]] if et in order else slots[et]
        assert lazy[et].dtype == torch.int64 and np.array_equal(lazy[et].numpy(), want)
        assert np.array_equal(doubled[et].numpy(), 2 * want)
    assert lazy.pending == [] and doubled.pending == []
    copy = lazy.copy()
    del copy[RELS[0]]
    copy[RELS[1]] = torch.zeros(2, dtype=torch.int64)
    assert list(copy) == RELS[1:] and RELS[0] in lazy and lazy[RELS[1]].numel() == 40


def test_loader_batches_leave_e_id_unread_and_equal_the_edge_lists():
    edges = _edges()
    x = np.random.default_rng(2).standard_normal((120, 4)).astype(np.float32)
    data = GraphData.from_dicts(COUNTS, edges, x={"paper": x},
                                splits={"paper": {"train": np.arange(0, 120, 2)}})
    assert set(data.edge_order) == set(RELS)    # each relation's CSC is a permutation of its list
    loader = NeighborLoader(data, [4, 3], input_nodes=("paper", "train"), batch_size=16, shuffle=True,
                            seed=0)
    batches = 0
    for batch in loader:
        assert batch.e_id.pending == RELS             # the loader looked nothing up
        assert set(batch.n_id_dict) == set(COUNTS) and set(batch.num_sampled_edges_dict) == set(RELS)
        assert all(batch[et].edge_index.shape[0] == 2 and "e_id" in batch[et] for et in RELS)
        assert batch[RELS[0]].keys() == ["edge_index", "e_id", "num_sampled_edges"]
        assert batch.e_id.pending == RELS             # nor did reading the other attributes
        moved, some = batch.to("cpu"), batch.to("cpu", "x")
        assert moved.e_id.pending == RELS and some.e_id.pending == RELS
        pyg = batch.to_pyg() if _has_pyg() else None
        for et, ei in batch.edge_index.items():
            src, dst = edges[et]
            e = moved.e_id[et].numpy()
            assert np.array_equal(batch.n_id[et[0]][ei[0]].numpy(), src[e])
            assert np.array_equal(batch.n_id[et[2]][ei[1]].numpy(), dst[e])
            assert torch.equal(batch[et].e_id, moved.e_id[et]) and torch.equal(batch.e_id_dict[et], moved.e_id[et])
            if pyg is not None:
                assert torch.equal(pyg[et].e_id, moved.e_id[et])
        assert torch.equal(batch.x["paper"], torch.from_numpy(x)[batch.n_id["paper"]])
        batches += 1
    assert batches == len(loader) == 4


def _has_pyg() -> bool:
    try:
        import torch_geometric  # noqa: F401
    except ImportError:
        return False
    return True
