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


# -- the typed store as PyG's remote backend ------------------------------------------------

def test_backend_serves_every_type_and_relation(tmp_path) -> None:
    from graphpipe import to_pyg_backend

    data = sample_hetero()
    fs, gs = backend = to_pyg_backend(from_pyg(data, tmp_path / "h"))
    assert backend.metadata() == (data.node_types, list(from_pyg(data, tmp_path / "h2").edge_types))
    ids = torch.tensor([3, 0, 3, 39])
    for name in ("x", "y", "train_mask", "year"):
        assert torch.equal(fs["paper", name, ids], data["paper"][name][ids])
    assert torch.equal(fs["author", "x", None], data["author"].x)
    assert torch.equal(fs["author", "h_index", ids[:2]], data["author"].h_index[ids[:2]])
    assert {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()} == {
        (t, k) for t in data.node_types for k in data[t].keys() if k != "num_nodes"} | {("institution", "n_id")}  # noqa: SIM118 - a storage, no mapping
    assert torch.equal(fs["institution", "n_id", ids[:2]], ids[:2])    # featureless: the IDs
    e_ids = torch.tensor([5, 1, 0, 149])
    assert torch.equal(fs[PW, "edge_attr", e_ids], data[PW].edge_attr[e_ids])   # original edge IDs
    assert torch.equal(fs[PW, "weight", None], data[PW].weight)
    assert torch.equal(fs[PC, "edge_attr", None], data[PC].edge_attr)
    assert fs.get_tensor_size(PW, "edge_attr", e_ids) == (4, 3)
    attrs = {a.edge_type: a for a in gs.get_all_edge_attrs()}
    assert set(attrs) == set(data.edge_types)
    for etype, attr in attrs.items():
        assert attr.layout.value == "csc" and attr.size == (data[etype[0]].num_nodes, data[etype[2]].num_nodes)
    for convert in (gs.csc, gs.csr, gs.coo):     # every layout: perm = edge_index columns
        a, b, perm = convert()
        for etype in data.edge_types:
            if convert == gs.csc:
                row, col = a[etype], torch.repeat_interleave(torch.diff(b[etype]))
            elif convert == gs.csr:
                row, col = torch.repeat_interleave(torch.diff(a[etype])), b[etype]
            else:
                row, col = a[etype], b[etype]
            assert torch.equal(data[etype].edge_index[:, perm[etype]], torch.stack([row, col]))
    with pytest.raises(KeyError, match="no tensor"):
        fs["paper", "nope", None]
    with pytest.raises(TypeError, match="read-only"):
        fs.put_tensor(torch.zeros(40), group_name="paper", attr_name="z", index=None)


def _as_sets(batch: HeteroData) -> dict:
    """A batch as sets: per type the sampled nodes with every attribute row; per relation
    the edges as (global src, global dst, e_id, edge attributes)."""
    out = {}
    for t in batch.node_types:
        keys = sorted(k for k, v in batch[t].items() if torch.is_tensor(v) and v.dim() and k not in
                      ("num_sampled_nodes", "input_id"))
        out[t, "keys"] = keys
        out[t] = sorted(tuple(repr(batch[t][k][i].tolist()) for k in keys) for i in range(batch[t].num_nodes))
    for e in batch.edge_types:
        s, d = batch[e].edge_index
        src, dst = batch[e[0]].n_id[s], batch[e[2]].n_id[d]
        extra = [batch[e][k] for k in sorted(batch[e].keys()) if k in ("edge_attr", "weight")]
        out[e] = sorted(repr((int(a), int(b), int(i)) + tuple(x[j].tolist() for x in extra))
                        for j, (a, b, i) in enumerate(zip(src, dst, batch[e].e_id)))
    return out


@pytest.mark.requires_pyg_sampler
def test_pyg_hetero_neighbor_loader_gives_the_heterodata_batches(tmp_path) -> None:
    from torch_geometric.loader import NeighborLoader

    from graphpipe import to_pyg_backend

    data = sample_hetero()
    backend = to_pyg_backend(from_pyg(data, tmp_path / "h"))
    kwargs = {"num_neighbors": [-1, -1], "input_nodes": ("paper", torch.arange(40)), "batch_size": 16}
    ours = NeighborLoader(backend, transform=backend.edge_transform, **kwargs)
    theirs = NeighborLoader(data, **kwargs)
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a["paper"].n_id[:a["paper"].batch_size], b["paper"].n_id[:b["paper"].batch_size])
        assert _as_sets(a) == _as_sets(b)
        n += 1
    assert n == 3
