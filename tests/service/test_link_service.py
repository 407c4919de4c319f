"""Link batches over the service: LinkNeighborLoader with a RemoteSampler equals the local one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.loaders import LinkNeighborLoader
from graphpipe.service import RemoteSampler, SamplingServer


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_remote_link_loader_equals_the_local_one(tmp_path, mode):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 200, 1500), rng.integers(0, 200, 1500)
    np.savez(tmp_path / "g.npz", src=src, dst=dst, x=rng.standard_normal((200, 4)).astype(np.float32))
    store = ingest(tmp_path / "g.npz", tmp_path / "g")
    server = SamplingServer(store, "grpc://127.0.0.1:0", threads=1)
    edges = (src[:300], dst[:300])
    kw = {"edge_label_index": edges, "neg_sampling": mode, "batch_size": 64, "shuffle": True,
          "seed": 4, "exclude_seed_edges": True}
    remote = RemoteSampler(f"grpc://127.0.0.1:{server.port}", shared_memory=False)
    try:
        local = list(LinkNeighborLoader(store, [5, 3], **kw))
        over = list(LinkNeighborLoader(store, [5, 3], sampler=remote, **kw))
    finally:
        server.close()
    assert len(local) == len(over) == 5
    for a, b in zip(local, over):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.x, b.x)
        for name in ("edge_label_index", "edge_label", "src_index", "dst_pos_index", "dst_neg_index"):
            va, vb = getattr(a, name, None), getattr(b, name, None)
            assert (va is None and vb is None) or torch.equal(va, vb), name
