"""The store of tests/dgl (1200 nodes, splits, edge IDs) for the GraphBolt tests."""

from __future__ import annotations

import os

import pytest

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.store import GraphStore
from graphpipe.synthetic import community_graph, write_npz


@pytest.fixture(scope="session")
def gb_store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    """1200 nodes, 5 classes, 6 features, average in-degree 12, train/valid/test splits."""
    tmp = tmp_path_factory.mktemp("gb_store")
    write_npz(os.path.join(tmp, "g.npz"), community_graph(1200, 5, feature_dim=6, avg_degree=12, seed=3))
    return ingest(os.path.join(tmp, "g.npz"), os.path.join(tmp, "store"), IngestOptions(edge_ids="always"))
