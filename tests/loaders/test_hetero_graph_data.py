"""HeteroGraphData from dicts and from PyG's HeteroData: CSC per relation against the edge
lists, edge order, features/labels/splits, and one-line errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.loaders import HeteroGraphData

COUNTS = {"paper": 50, "author": 30, "field": 4}
RELS = [("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "has", "field")]


def edge_lists(seed: int = 0, num_edges: int = 200) -> dict:
    rng = np.random.default_rng(seed)
    return {et: (rng.integers(0, COUNTS[et[0]], num_edges), rng.integers(0, COUNTS[et[2]], num_edges))
            for et in RELS}


def test_from_dicts_builds_each_relations_csc():
    edges = edge_lists()
    data = HeteroGraphData.from_dicts(COUNTS, edges)
    assert data.edge_types == RELS and data.node_types == list(COUNTS)
    for et, (src, dst) in edges.items():
        indptr, indices = data.typed_csc(et)
        order = data.edge_order[et]
        assert np.array_equal(indices, src[order])              # slot -> input edge
        rows = np.repeat(np.arange(COUNTS[et[2]]), np.diff(indptr))
        assert np.array_equal(rows, dst[order])                 # CSC by destination
        want = sorted(zip(dst.tolist(), src.tolist()))
        assert list(zip(rows.tolist(), indices.tolist())) == want  # sources ascending per row
        assert np.array_equal(np.sort(order), np.arange(src.shape[0]))
    assert data.num_edges_dict == {et: 200 for et in RELS}
    deg = data.in_degrees("paper")
    want = np.bincount(edges[RELS[0]][1], minlength=50) + np.bincount(edges[RELS[1]][1], minlength=50)
    assert np.array_equal(deg, want)


def test_string_edge_types_and_target():
    edges = {"___".join(et): v for et, v in edge_lists().items()}
    y = {"paper": np.arange(50) % 3}
    data = HeteroGraphData.from_dicts(COUNTS, edges, y=y, splits={"paper": {"train": [1, 2]}})
    assert data.edge_types == RELS and data.target_type == "paper"
    assert data.typed_split_names("paper") == ["train"] and data.typed_split_names("author") == []
    assert np.array_equal(data.typed_labels("paper"), y["paper"])
    with pytest.raises(ValueError, match="no split 'valid'"):
        data.typed_split("paper", "valid")


def test_from_pyg_matches_from_dicts():
    from torch_geometric.data import HeteroData

    edges = edge_lists(1)
    pyg = HeteroData()
    x = {"paper": torch.randn(50, 3), "author": torch.randn(30, 5)}
    for t, n in COUNTS.items():
        if t in x:
            pyg[t].x = x[t]
        else:
            pyg[t].num_nodes = n
    pyg["paper"].y = torch.arange(50) % 4
    pyg["paper"].train_mask = torch.arange(50) < 10
    pyg["paper"].val_mask = (torch.arange(50) >= 10) & (torch.arange(50) < 20)
    for et, (s, d) in edges.items():
        pyg[et].edge_index = torch.from_numpy(np.stack([s, d]))
    data = HeteroGraphData.from_pyg(pyg)
    ref = HeteroGraphData.from_dicts(COUNTS, edges)
    assert data.num_nodes_dict == COUNTS and data.target_type == "paper"
    for et in RELS:
        for a, b in zip(data.typed_csc(et), ref.typed_csc(et)):
            assert np.array_equal(a, b)
        assert np.array_equal(data.edge_order[et], ref.edge_order[et])
    assert np.array_equal(data.typed_features("author"), x["author"].numpy())
    assert data.typed_features("field") is None
    assert data.typed_split("paper", "train").tolist() == list(range(10))
    assert data.typed_split("paper", "valid").tolist() == list(range(10, 20))


def test_bad_input_is_one_line_value_error():
    edges = edge_lists()
    bad = dict(edges)
    bad[RELS[0]] = (np.array([0, 30]), np.array([0, 1]))
    with pytest.raises(ValueError, match=r"relation 'author___writes___paper': src IDs must lie in \[0, 30\)"):
        HeteroGraphData.from_dicts(COUNTS, bad)
    with pytest.raises(ValueError, match="node type not in 'num_nodes'"):
        HeteroGraphData.from_dicts(COUNTS, {("venue", "r", "paper"): ([0], [0])})
    with pytest.raises(ValueError, match=r"x\['paper'\] must have 50 rows"):
        HeteroGraphData.from_dicts(COUNTS, edges, x={"paper": np.zeros((49, 2))})
    with pytest.raises(ValueError, match="unknown node types"):
        HeteroGraphData.from_dicts(COUNTS, edges, y={"venue": np.zeros(3)})
    with pytest.raises(ValueError, match="differ in length"):
        HeteroGraphData.from_dicts(COUNTS, {RELS[0]: ([0, 1], [0])})
    with pytest.raises(ValueError, match=r"splits\['paper'\]\['train'\]"):
        HeteroGraphData.from_dicts(COUNTS, edges, splits={"paper": {"train": [50]}})


def test_reverse_relations_equal_pygs_to_undirected():
    """with_reverse_relations() adds what PyG's ToUndirected(merge=False) adds: the reverse of
    every relation, the same edges, and e_id of a reverse edge = its forward edge's index."""
    import torch_geometric.transforms as T
    from torch_geometric.data import HeteroData

    edges = edge_lists(3, 120)
    pyg = HeteroData()
    for t, n in COUNTS.items():
        pyg[t].num_nodes = n
    for et, (s, d) in edges.items():
        pyg[et].edge_index = torch.from_numpy(np.stack([s, d]))
    pyg = T.ToUndirected(merge=False)(pyg)
    data = HeteroGraphData.from_dicts(COUNTS, edges).with_reverse_relations()
    assert sorted(data.edge_types) == sorted(pyg.edge_types)
    for et in data.edge_types:
        indptr, indices = data.typed_csc(et)
        dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
        ours = sorted(zip(indices.tolist(), dst.tolist()))
        assert ours == sorted(map(tuple, pyg[et].edge_index.t().tolist())), et
        order = data.edge_order[et]                      # slot -> column of pyg[et].edge_index
        assert np.array_equal(pyg[et].edge_index[0].numpy()[order], indices)
        assert np.array_equal(pyg[et].edge_index[1].numpy()[order], dst)
        assert np.all(np.diff(indptr) >= 0) and np.all(indices < COUNTS[et[0]])
    with pytest.raises(ValueError, match="exists already"):
        data.with_reverse_relations(prefix="")  # ('paper', 'cites', 'paper') reversed is itself


def test_merged_reverse_relations_equal_pygs_default_to_undirected():
    import torch_geometric.transforms as T
    from torch_geometric.data import HeteroData

    edges = edge_lists(4, 100)
    pyg = HeteroData()
    for t, n in COUNTS.items():
        pyg[t].num_nodes = n
    for et, (s, d) in edges.items():
        pyg[et].edge_index = torch.from_numpy(np.stack([s, d]))
    pyg = T.ToUndirected()(pyg)
    data = HeteroGraphData.from_dicts(COUNTS, edges).with_reverse_relations(merge=True)
    assert sorted(data.edge_types) == sorted(pyg.edge_types)
    for et in data.edge_types:
        indptr, indices = data.typed_csc(et)
        dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
        assert set(zip(indices.tolist(), dst.tolist())) == set(map(tuple, pyg[et].edge_index.t().tolist()))


def test_store_face_extras(tmp_path):
    from graphpipe.store.writer import TypedStoreWriter

    edges = edge_lists(5, 60)
    y = np.arange(50) % 3
    data = HeteroGraphData.from_dicts(COUNTS, edges, y={"paper": y})
    assert data.typed_num_classes("paper") == 3 and data.typed_num_classes("author") is None
    assert np.array_equal(data.typed_edge_ids(RELS[0]), data.edge_order[RELS[0]])
    assert data.typed_node_time("paper") is None and data.typed_edge_time(RELS[0]) is None
    with TypedStoreWriter(tmp_path / "s", COUNTS, target_type="paper") as w:
        for et, (s, d) in edges.items():
            w.add_relation(et, s, d, time=np.arange(60) + 2000)
        w.write_node_array("paper", "label", y)
        w.write_node_array("paper", "time", np.arange(50))
        w.commit()
    stored = HeteroGraphData.open(tmp_path / "s").with_reverse_relations()
    assert stored.typed_num_classes("paper") == 3
    assert stored.typed_node_time("paper").tolist() == list(range(50))
    order = stored.typed_edge_ids(RELS[0])
    assert np.array_equal(stored.typed_edge_time(RELS[0]), np.arange(60)[order] + 2000)
    assert stored.typed_edge_time(("paper", "rev_writes", "author")) is None
