"""``graphpipe.from_pyg(HeteroData)`` / ``graphpipe.interop.pyg_hetero``: every node type,
relation and attribute of a ``HeteroData`` is in the typed store, equal array for array
(relations: the CSC holds the same edges as ``edge_index``, edge attributes following
their edges)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import HeteroData

from graphpipe import from_pyg

PW, AW, PC = ("author", "writes", "paper"), ("paper", "rev_writes", "author"), ("paper", "cites", "paper")


def sample_hetero(n_paper: int = 40, n_author: int = 25, e: int = 150) -> HeteroData:
    """Papers (features, labels, masks, years), authors (features, an int node array),
    institutions (no attributes but a count), three relations with edge attributes;
    duplicate edges included."""
    g = torch.Generator().manual_seed(3)
    data = HeteroData()
    mask = torch.zeros(n_paper, dtype=torch.bool)
    mask[:15] = True
    data["paper"].x = torch.randn(n_paper, 4, generator=g)
    data["paper"].y = torch.randint(0, 3, (n_paper,), generator=g)
    data["paper"].train_mask, data["paper"].val_mask = mask, ~mask
    data["paper"].year = torch.arange(n_paper) + 2000
    data["author"].x = torch.randn(n_author, 2, generator=g).half()
    data["author"].h_index = torch.randint(0, 50, (n_author,), generator=g, dtype=torch.int32)
    data["institution"].num_nodes = 7
    src, dst = torch.randint(0, n_author, (e,), generator=g), torch.randint(0, n_paper, (e,), generator=g)
    src[1], dst[1] = src[0], dst[0]                 # a duplicate edge
    data[PW].edge_index = torch.stack([src, dst])
    data[PW].edge_attr = torch.randn(e, 3, generator=g)
    data[PW].weight = torch.rand(e, generator=g)
    data[AW].edge_index = torch.stack([dst, src])
    data[PC].edge_index = torch.randint(0, n_paper, (2, 60), generator=g)
    data[PC].edge_attr = torch.arange(60)
    data["author", "affiliated_with", "institution"].edge_index = torch.stack(
        [torch.arange(n_author), torch.arange(n_author) % 7])
    data.title = "graph-level values are left out"
    return data


def _edges(edge_index: np.ndarray, *attrs: np.ndarray) -> list[tuple]:
    """Edges (with their attribute rows) as a sorted multiset."""
    rows = [tuple(edge_index[:, i]) + tuple(np.asarray(a[i]).reshape(-1).tolist() for a in attrs)
            for i in range(edge_index.shape[1])]
    return sorted(rows, key=repr)


def test_round_trip_keeps_every_type_relation_and_attribute(tmp_path) -> None:
    data = sample_hetero()
    store = from_pyg(data, tmp_path / "h")
    assert store.is_typed and store.node_types == data.node_types
    assert store.num_nodes_dict == {t: data[t].num_nodes for t in data.node_types}
    assert set(store.edge_types) == set(data.edge_types)
    assert store.target_type == "paper"
    np.testing.assert_array_equal(store.typed_features("paper"), data["paper"].x.numpy())
    np.testing.assert_array_equal(store.typed_labels("paper"), data["paper"].y.numpy())
    for name in ("train_mask", "val_mask", "year"):
        np.testing.assert_array_equal(store.array(f"typed/paper/{name}"), data["paper"][name].numpy())
    assert store.typed_split("paper", "train").tolist() == list(range(15))
    assert store.typed_split("paper", "valid").tolist() == list(range(15, 40))
    feat = store.typed_features("author")
    assert feat.dtype == np.float16 and np.array_equal(feat, data["author"].x.numpy())
    h_index = store.array("typed/author/h_index")
    assert h_index.dtype == np.int32 and np.array_equal(h_index, data["author"].h_index.numpy())
    assert store.typed_features("institution") is None
    for etype in data.edge_types:
        indptr, indices = store.typed_csc(etype)
        edge_id = store.typed_edge_ids(etype)
        dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
        edge_index = data[etype].edge_index.numpy()
        np.testing.assert_array_equal(edge_index[:, edge_id], np.stack([indices, dst]))
        stored, given = [np.stack([indices, dst])], [edge_index]
        if "edge_attr" in data[etype]:
            stored.append(store.typed_edge_features(etype))
            given.append(data[etype].edge_attr.numpy())
        if etype == PW:
            stored.append(store.array("rel/author___writes___paper/weight"))
            given.append(data[PW].weight.numpy())
        assert _edges(*stored) == _edges(*given)     # same edges, attributes following them
    assert store.typed_edge_features(PC).dtype == np.int64


def test_refuses_a_reserved_or_unsafe_name(tmp_path) -> None:
    data = sample_hetero()
    data["paper"].split = torch.zeros(40)
    with pytest.raises(ValueError, match="reserved"):
        from_pyg(data, tmp_path / "r")
    bad = HeteroData()
    bad["../up"].x = torch.zeros(2, 2)
    with pytest.raises(Exception, match="node type"):
        from_pyg(bad, tmp_path / "u")
    assert not (tmp_path / "r").exists() and not (tmp_path / "u").exists()
