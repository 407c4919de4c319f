"""DGL output of the NeighborLoader: ``fanout_order="dgl"`` (here, without DGL) and real
``DGLBlock``s checked against DGL 2.1 itself in the DGL environment
(``dgl_blocks_child.py``; skipped without one)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.loaders import NeighborLoader
from graphpipe.loaders.dgl_blocks import seed_first_fanouts
from graphpipe.store import GraphStore
from graphpipe.synthetic import community_graph, write_npz

CHILD = str(Path(__file__).with_name("dgl_blocks_child.py"))
HAS_DGL = importlib.util.find_spec("dgl") is not None


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    """1500 nodes, average in-degree 20 (most above every fanout used here); ``csc/edge_id``
    kept (``edge_ids="always"``): the DGL side rebuilds the graph in input edge order."""
    tmp = tmp_path_factory.mktemp("dgl")
    graph = community_graph(1500, 5, feature_dim=6, avg_degree=20, seed=4)
    write_npz(os.path.join(tmp, "g.npz"), graph)
    return ingest(os.path.join(tmp, "g.npz"), os.path.join(tmp, "store"), IngestOptions(edge_ids="always"))


def _epoch(loader: NeighborLoader) -> list:
    return [(b.n_id.tolist(), [(blk.indptr.tolist(), blk.indices.tolist()) for blk in b.blocks])
            for b in loader]


def test_dgl_order_samples_as_the_reversed_seed_order(store: GraphStore) -> None:
    dgl_order = NeighborLoader(store, [2, 4, 9], batch_size=100, fanout_order="dgl", seed=1)
    seed_order = NeighborLoader(store, [9, 4, 2], batch_size=100, seed=1, frontier="all")
    assert dgl_order.fanouts == [9, 4, 2]
    assert _epoch(dgl_order) == _epoch(seed_order)
    degree = np.diff(store.indptr)
    batch = next(iter(NeighborLoader(store, [2, 4, 9], batch_size=100, fanout_order="dgl", seed=1)))
    for layer, fanout in enumerate([2, 4, 9]):  # blocks input layer first, like the list
        block = batch.blocks[layer]
        dst = batch.n_id[:block.num_dst].numpy()
        assert np.array_equal(np.diff(block.indptr.numpy()), np.minimum(degree[dst], fanout))


def test_seed_order_of_an_asymmetric_list_differs(store: GraphStore) -> None:
    batch = next(iter(NeighborLoader(store, [2, 4, 9], batch_size=100, seed=1)))
    degree = np.diff(store.indptr)
    seeds = batch.seeds.numpy()
    assert (np.diff(batch.blocks[-1].indptr.numpy()) <= 2).all()
    assert (np.minimum(degree[seeds], 9) > 2).any()


def test_bad_options_are_refused(store: GraphStore) -> None:
    with pytest.raises(ValueError, match="fanout_order"):
        NeighborLoader(store, [2], batch_size=10, fanout_order="pyg")
    with pytest.raises(ValueError, match="'output'"):
        NeighborLoader(store, [2], batch_size=10, output="blocks")
    assert seed_first_fanouts([1, 2, 3], "dgl") == [3, 2, 1]


@pytest.mark.skipif(HAS_DGL, reason="checks the message given without DGL")
def test_dgl_output_without_dgl_says_how_to_get_it(store: GraphStore) -> None:
    with pytest.raises(ImportError, match="graphpipe beside DGL"):
        NeighborLoader(store, [2], batch_size=10, output="dgl")
    batch = next(iter(NeighborLoader(store, [2], batch_size=10)))
    with pytest.raises(ImportError, match="needs dgl"):
        batch.to_dgl()
    assert isinstance(batch.x, torch.Tensor)


def test_blocks_against_dgl(store: GraphStore, numpy1_env) -> None:
    assert numpy1_env(CHILD, "blocks", str(store.path)).strip() == "ok"


def test_fanout_order_against_dgl_neighbor_sampler(store: GraphStore, numpy1_env) -> None:
    assert numpy1_env(CHILD, "fanout_order", str(store.path)).strip() == "ok"
