"""DiskEmbedding: learnable rows in memory-mapped files with sparse updates. Oracle:
``torch.optim.SparseAdam`` on an ``nn.Embedding(sparse=True)`` holding the same table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.train.disk_embedding import DiskEmbedding, step_disk_embeddings


def test_updates_equal_sparse_adam(tmp_path):
    """Several steps over overlapping ID sets (a row used twice in one step too): the
    table equals SparseAdam's, rows never used are untouched, and the files hold it."""
    emb = DiskEmbedding(50, 6, tmp_path / "t", lr=0.05, seed=3)
    ref = torch.nn.Embedding(50, 6, sparse=True)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(np.array(emb.weight)))
    opt = torch.optim.SparseAdam(ref.parameters(), lr=0.05)
    target = torch.randn(8, 6, generator=torch.Generator().manual_seed(0))
    rng = np.random.default_rng(1)
    start = np.array(emb.weight).copy()
    for _ in range(5):
        ids = torch.from_numpy(rng.integers(0, 30, 8))
        ids[1] = ids[0]                                     # a repeated row: gradients summed
        loss = ((emb(ids) * target).sum() + (emb(ids[:3]) ** 2).sum())
        loss.backward()
        assert step_disk_embeddings(torch.nn.ModuleDict({"a": emb})) == 1
        opt.zero_grad()
        ((ref(ids) * target).sum() + (ref(ids[:3]) ** 2).sum()).backward()
        opt.step()
    assert torch.allclose(torch.from_numpy(np.array(emb.weight)), ref.weight.detach(), atol=1e-6)
    assert np.array_equal(np.array(emb.weight)[30:], start[30:])
    on_disk = np.load(tmp_path / "t" / "weight.npy", mmap_mode="r")
    assert np.array_equal(on_disk, np.array(emb.weight))


def test_no_grad_lookups_record_nothing_and_ids_are_checked():
    emb = DiskEmbedding(10, 2, seed=0)
    with torch.no_grad():
        rows = emb(torch.tensor([1, 2]))
    assert not rows.requires_grad and emb._pending == []
    emb.step()                                              # nothing pending: no-op
    assert emb.steps == 0
    with pytest.raises(IndexError, match="outside"):
        emb(torch.tensor([10]))
    with pytest.raises(ValueError, match="positive"):
        DiskEmbedding(0, 2)


def test_typed_model_with_disk_embeddings_trains(tmp_path):
    """R-GCN with its featureless types' embeddings on disk: the typed trainer steps them
    (rows change only where batches reached), and the loss falls."""
    from graphpipe.ingest import ingest
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
    from graphpipe.train.hetero_models import build_hetero_model
    from graphpipe.train.trainer import TypedTrainer, typed_model_dims, typed_training_data

    data = mag_dataset(papers=300, authors=200, institutions=10, fields=30, num_classes=3,
                       feature_dim=4, seed=4)
    store = typed_training_data(ingest(write_ogb_mag(tmp_path / "src", data), tmp_path / "s"))
    torch.manual_seed(0)
    model = build_hetero_model("rgcn", typed_model_dims(store), store.num_nodes_dict, 8, 3, 2,
                               store.edge_types, "paper", dropout=0.0, embeddings="disk", embed_dim=4)
    tables = {t: m for t, m in model.embed.items()}
    assert set(tables) == {"author", "institution", "field_of_study"}
    assert all(isinstance(m, DiskEmbedding) for m in tables.values())
    before = np.array(tables["author"].weight).copy()
    result = TypedTrainer(model, store, fanouts=[4, 4], batch_size=64, epochs=3, lr=0.02,
                          evaluation="none", quiet=True).fit()
    losses = [r["loss"] for r in result.history]
    assert tables["author"].steps == result.history[-1]["steps"] * 3 and tables["author"].lr == 0.02
    assert not np.array_equal(np.array(tables["author"].weight), before)
    assert losses[-1] < losses[0]
