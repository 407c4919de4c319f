"""``GraphData``, one model for every graph. One type: ``GraphData.from_pyg`` reads a PyG
``Data`` in memory (no store written) with the CSC, edge order and arrays the store written by
``graphpipe.from_pyg`` has; tensors are viewed. Several types: from dicts and from PyG's
``HeteroData``, CSC per relation against the edge lists, edge order, features/labels/splits,
reverse relations against PyG's ``ToUndirected``, one-line errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data, HeteroData

from graphpipe import from_pyg
from graphpipe.ingest.csc_builder import reference_csc
from graphpipe.loaders.graph_data import GraphData, coo_to_csc, resolve_graph_data


def sample_data(n: int = 50, e: int = 400) -> Data:
    g = torch.Generator().manual_seed(1)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[:20] = True
    edge_index = torch.randint(0, n, (2, e), generator=g)
    edge_index[:, 1::7] = edge_index[:, ::7][:, :edge_index[:, 1::7].shape[1]]  # duplicate edges
    return Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 3, (n,), generator=g),
                edge_index=edge_index, edge_attr=torch.randn(e, 2, generator=g),
                train_mask=mask, val_mask=~mask, node_year=torch.arange(n) + 2000,
                edge_time=torch.arange(e) * 10, title="graph-level values are left out")


def test_from_pyg_is_the_builders_csc_and_views_the_tensors() -> None:
    data = sample_data()
    gd = GraphData.from_pyg(data)
    src, dst = data.edge_index.numpy()
    indptr, indices, edge_id = reference_csc(src, dst, data.num_nodes)
    assert np.array_equal(gd.indptr, indptr) and np.array_equal(gd.indices, indices)
    assert gd.indices.dtype == indices.dtype
    assert np.array_equal(gd.attrs.edge_order, edge_id)
    assert np.shares_memory(gd.feature_chunks[0], data.x.numpy())   # no copy of x
    assert set(gd.attrs.node_attrs) == {"train_mask", "val_mask", "node_year"}
    assert set(gd.attrs.edge_attrs) == {"edge_time"}
    assert gd.splits["_N"]["train"].tolist() == gd.split("train").tolist() == list(range(20))
    assert gd.store is None


def test_from_pyg_equals_the_store_written_from_it(tmp_path) -> None:
    data = sample_data()
    stored = resolve_graph_data(from_pyg(data, tmp_path / "s"))
    gd = resolve_graph_data(data)                 # what NeighborLoader(data, ...) reads
    assert np.array_equal(gd.indptr, stored.indptr) and np.array_equal(gd.indices, stored.indices)
    assert np.array_equal(gd.attrs.edge_order, np.asarray(stored.attrs.edge_order))
    assert np.array_equal(gd.typed_labels("_N"), np.asarray(stored.typed_labels("_N")))
    assert gd.split("valid").tolist() == stored.split("valid").tolist()


def test_coo_to_csc_refuses_ids_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"Data.edge_index: dst IDs must lie in \[0, 3\)"):
        coo_to_csc([0, 1], [1, 3], 3, 3, "Data.edge_index")
    with pytest.raises(ValueError, match="edge_index"):
        GraphData.from_pyg(Data(x=torch.zeros(2, 2)))


def test_from_pyg_reads_a_heterodata_and_a_data_answers_the_typed_face() -> None:
    """One entry point for both PyG classes; a one-relation graph answers the typed read face
    (type _N, relation (_N, _E, _N)) with its own arrays."""
    from graphpipe.loaders.graph_data import HeteroGraphData

    hetero = HeteroData()
    hetero["paper"].x = torch.eye(3)
    hetero["author"].num_nodes = 2
    hetero["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 1], [2, 0, 2]])
    typed = GraphData.from_pyg(hetero)
    assert HeteroGraphData is GraphData and typed.is_typed
    assert [a.tolist() for a in typed.typed_csc(("author", "writes", "paper"))] == [[0, 1, 1, 3], [1, 0, 1]]
    data = sample_data()
    graph = GraphData.from_pyg(data)
    (etype,) = graph.edge_types
    assert graph.node_types == ["_N"] and graph.num_nodes_dict == {"_N": 50}
    assert graph.typed_csc(etype)[0] is graph.indptr and graph.typed_labels("_N") is graph.labels["_N"]
    assert not graph.is_typed and graph.num_nodes == 50
    assert np.shares_memory(graph.typed_features("_N"), data.x.numpy())
    assert graph.typed_split("_N", "train").tolist() == list(range(20))
    with pytest.raises(ValueError, match="no type 'paper'"):
        graph.typed_features("paper")


COUNTS = {"paper": 50, "author": 30, "field": 4}
RELS = [("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "has", "field")]


def edge_lists(seed: int = 0, num_edges: int = 200) -> dict:
    rng = np.random.default_rng(seed)
    return {et: (rng.integers(0, COUNTS[et[0]], num_edges), rng.integers(0, COUNTS[et[2]], num_edges))
            for et in RELS}


def hetero_data(edges: dict) -> HeteroData:
    """The PyG ``HeteroData`` of ``COUNTS`` nodes and ``edges``."""
    pyg = HeteroData()
    for t, n in COUNTS.items():
        pyg[t].num_nodes = n
    for et, (s, d) in edges.items():
        pyg[et].edge_index = torch.from_numpy(np.stack([s, d]))
    return pyg


def test_from_dicts_builds_each_relations_csc():
    edges = edge_lists()
    data = GraphData.from_dicts(COUNTS, edges)
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
    data = GraphData.from_dicts(COUNTS, edges, y=y, splits={"paper": {"train": [1, 2]}})
    assert data.edge_types == RELS and data.target_type == "paper"
    assert data.typed_split_names("paper") == ["train"] and data.typed_split_names("author") == []
    assert np.array_equal(data.typed_labels("paper"), y["paper"])
    with pytest.raises(ValueError, match="no split 'valid'"):
        data.typed_split("paper", "valid")


def test_from_pyg_matches_from_dicts():
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
    data = GraphData.from_pyg(pyg)
    ref = GraphData.from_dicts(COUNTS, edges)
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
        GraphData.from_dicts(COUNTS, bad)
    with pytest.raises(ValueError, match="node type not in 'num_nodes'"):
        GraphData.from_dicts(COUNTS, {("venue", "r", "paper"): ([0], [0])})
    with pytest.raises(ValueError, match=r"x\['paper'\] must have 50 rows"):
        GraphData.from_dicts(COUNTS, edges, x={"paper": np.zeros((49, 2))})
    with pytest.raises(ValueError, match="unknown node types"):
        GraphData.from_dicts(COUNTS, edges, y={"venue": np.zeros(3)})
    with pytest.raises(ValueError, match="differ in length"):
        GraphData.from_dicts(COUNTS, {RELS[0]: ([0, 1], [0])})
    with pytest.raises(ValueError, match=r"splits\['paper'\]\['train'\]"):
        GraphData.from_dicts(COUNTS, edges, splits={"paper": {"train": [50]}})


def test_reverse_relations_equal_pygs_to_undirected():
    """with_reverse_relations() adds what PyG's ToUndirected(merge=False) adds: the reverse of
    every relation, the same edges, and e_id of a reverse edge = its forward edge's index."""
    import torch_geometric.transforms as T

    edges = edge_lists(3, 120)
    pyg = T.ToUndirected(merge=False)(hetero_data(edges))
    data = GraphData.from_dicts(COUNTS, edges).with_reverse_relations()
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

    edges = edge_lists(4, 100)
    pyg = T.ToUndirected()(hetero_data(edges))
    data = GraphData.from_dicts(COUNTS, edges).with_reverse_relations(merge=True)
    assert sorted(data.edge_types) == sorted(pyg.edge_types)
    for et in data.edge_types:
        indptr, indices = data.typed_csc(et)
        dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
        assert set(zip(indices.tolist(), dst.tolist())) == set(map(tuple, pyg[et].edge_index.t().tolist()))


def test_store_face_extras(tmp_path):
    from graphpipe.store.writer import TypedStoreWriter

    edges = edge_lists(5, 60)
    y = np.arange(50) % 3
    data = GraphData.from_dicts(COUNTS, edges, y={"paper": y})
    assert data.typed_num_classes("paper") == 3 and data.typed_num_classes("author") is None
    assert np.array_equal(data.typed_edge_ids(RELS[0]), data.edge_order[RELS[0]])
    assert data.typed_node_time("paper") is None and data.typed_edge_time(RELS[0]) is None
    with TypedStoreWriter(tmp_path / "s", COUNTS, target_type="paper") as w:
        for et, (s, d) in edges.items():
            w.add_relation(et, s, d, time=np.arange(60) + 2000)
        w.write_node_array("paper", "label", y)
        w.write_node_array("paper", "time", np.arange(50))
        w.commit()
    stored = GraphData.open(tmp_path / "s").with_reverse_relations()
    assert stored.typed_num_classes("paper") == 3
    assert stored.typed_node_time("paper").tolist() == list(range(50))
    order = stored.typed_edge_ids(RELS[0])
    assert np.array_equal(stored.typed_edge_time(RELS[0]), np.arange(60)[order] + 2000)
    assert stored.typed_edge_time(("paper", "rev_writes", "author")) is None
