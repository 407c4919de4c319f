"""LoaderStats.batches counts the batches handed out, not those prefetched and left."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ingest import ingest
from graphpipe.loaders import NeighborLoader


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stats")
    rng = np.random.default_rng(0)
    n = 400
    np.savez(tmp / "g.npz", edge_index=rng.integers(0, n, (2, 3000)),
             x=rng.standard_normal((n, 4)).astype(np.float32), y=rng.integers(0, 3, n),
             train_idx=np.arange(n))
    return ingest(tmp / "g.npz", tmp / "s")


@pytest.mark.parametrize("prefetch", [0, 1, 4])
def test_batches_counts_consumed_batches(store, prefetch):
    loader = NeighborLoader(store, [3, 2], batch_size=20, input_nodes="train", shuffle=True, prefetch=prefetch, seed=1)
    assert len(loader) == 20
    it = iter(loader)
    for _ in range(3):
        next(it)
    it.close()
    stats = loader.stats
    assert stats.batches == 3
    assert stats.batches_prepared >= 3
    assert stats.as_dict()["batches"] == 3


def test_a_whole_epoch_counts_every_batch(store):
    loader = NeighborLoader(store, [3, 2], batch_size=20, input_nodes="train", shuffle=True, prefetch=2, seed=1)
    assert sum(1 for _ in loader) == 20
    assert loader.stats.batches == loader.stats.batches_prepared == 20
