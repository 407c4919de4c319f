"""The typed batch's fields read one at a time (PyG's layout per type; ``e_id`` looked up
only when asked for) and the typed loader's recycled row buffers (a held batch's ``x`` is
never overwritten; released ones are reused)."""

from __future__ import annotations

import numpy as np

from graphpipe.loaders import GraphData, NeighborLoader

COUNTS = {"paper": 400, "author": 300}
RELS = [("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "rev_writes", "author")]


def make_data(seed: int = 0) -> tuple[GraphData, dict]:
    rng = np.random.default_rng(seed)
    writes = (rng.integers(0, 300, 2500), rng.integers(0, 400, 2500))
    edges = {RELS[0]: writes, RELS[1]: (rng.integers(0, 400, 2000), rng.integers(0, 400, 2000)),
             RELS[2]: writes[::-1]}
    x = {"paper": rng.standard_normal((400, 16)).astype(np.float32),
         "author": rng.standard_normal((300, 4)).astype(np.float16)}
    data = GraphData.from_dicts(COUNTS, edges, x=x, y={"paper": rng.integers(0, 3, 400)})
    return data, {"edges": edges, "x": x}


def test_reading_other_fields_looks_no_edge_ids_up() -> None:
    """``batch[et].edge_index``, ``keys()``, ``num_sampled_edges_dict`` read one field each:
    ``e_id`` stays unread (LazyEdgeIds) until asked for, then equals the edge lists'."""
    data, raw = make_data()
    for batch in NeighborLoader(data, [5, 3], input_nodes="paper", batch_size=64, seed=1):
        for et in RELS:
            ei = batch[et].edge_index.numpy()
            assert ei.shape == (2, batch.num_sampled_edges_dict[et][0] + batch.num_sampled_edges_dict[et][1])
            assert batch[et].keys() == ["edge_index", "e_id", "num_sampled_edges"] and "e_id" in batch[et]
        assert batch["paper"].keys() == ["x", "y", "n_id", "num_sampled_nodes", "batch_size", "input_id"]
        assert batch["author"].get("y", "none") == "none" and batch.collect("batch_size") == {"paper": batch.batch_size}
        assert batch.e_id.pending == RELS
        for et in RELS:
            src, dst = raw["edges"][et]
            e, ei = batch[et].e_id.numpy(), batch.edge_index[et].numpy()
            assert np.array_equal(batch.n_id[et[0]].numpy()[ei[0]], src[e])
            assert np.array_equal(batch.n_id[et[2]].numpy()[ei[1]], dst[e])
        assert batch.e_id.pending == []


def test_typed_rows_in_recycled_buffers_never_overwrite_held_batches() -> None:
    data, raw = make_data(2)
    loader = NeighborLoader(data, [6, 4], input_nodes="paper", batch_size=40, seed=3, shuffle=True)
    kept, seen = [], set()
    for epoch in range(2):
        for i, batch in enumerate(loader):
            for t, x in raw["x"].items():
                want = x[batch.n_id[t].numpy()]
                assert np.array_equal(batch.x[t].numpy().view(np.uint8), want.view(np.uint8))
            seen.add(batch.x["paper"].numpy().ctypes.data)
            if i % 4 == 0:  # hold a view of some batches' rows: their buffers must stay untouched
                kept.append((batch.x["paper"][:5], raw["x"]["paper"][batch.n_id["paper"].numpy()[:5]]))
            del batch
    assert len(seen) < 2 * len(loader)  # released buffers were reused
    assert all(len(pool.buffers) <= pool.size for pool in loader.gather._buffers.values())
    for rows, want in kept:
        assert np.array_equal(rows.numpy(), want)
