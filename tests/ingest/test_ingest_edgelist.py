"""Edge-list / node-table reader: round trips, ID mapping, chunking, and every bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphpipe.ingest.edgelist import read_edge_list
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.idmap_build import (
    DuplicateIdError,
    IntIdIndex,
    StringIdIndex,
    UniqueCollector,
    lookup_reference,
)

DATA = Path(__file__).parent.parent / "data"


# ---------------------------------------------------------------------------
# helpers


def write_csv(path: Path, header: list[str] | None, rows, delimiter: str = ",") -> Path:
    lines = [delimiter.join(header)] if header else []
    lines += [delimiter.join(str(v) for v in row) for row in rows]
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def collect(source):
    chunks = list(source.edge_chunks())
    src = np.concatenate([c.src for c in chunks]) if chunks else np.zeros(0, np.int64)
    dst = np.concatenate([c.dst for c in chunks]) if chunks else np.zeros(0, np.int64)
    return src, dst, chunks


def external_of(source, dense: np.ndarray) -> list:
    if source.external_ids is None:
        return dense.tolist()
    return source.external_ids.take(pa.array(dense)).to_pylist()


def check_chunk_positions(chunks, first_data_line: int = 2) -> None:
    """Chunks tile the edge list: first_row continues, first_line = data line of that row."""
    position = 0
    for chunk in chunks:
        assert chunk.src.dtype == np.int64 and chunk.dst.dtype == np.int64
        assert chunk.first_row == position
        position += len(chunk)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


# ---------------------------------------------------------------------------
# round trips


def test_dense_int_csv_round_trip(tmp_path, rng):
    src, dst = rng.integers(0, 50, 200), rng.integers(0, 50, 200)
    path = write_csv(tmp_path / "e.csv", ["src", "dst"], zip(src, dst))
    source = read_edge_list(path)
    got_src, got_dst, chunks = collect(source)
    np.testing.assert_array_equal(got_src, src)
    np.testing.assert_array_equal(got_dst, dst)
    assert source.num_nodes == max(src.max(), dst.max()) + 1
    assert source.num_input_edges == 200
    assert source.external_ids is None
    assert source.source_format == "edge-list" and source.name == "e"
    assert chunks[0].first_line == 2 and chunks[0].source == str(path)


def test_block_rows_do_not_change_results(tmp_path, rng):
    ids = np.array([f"n{i}" for i in rng.permutation(40)])
    src, dst = ids[rng.integers(0, 40, 101)], ids[rng.integers(0, 40, 101)]
    weight = rng.random(101).round(4)
    path = write_csv(tmp_path / "e.csv", ["src", "dst", "w"], zip(src, dst, weight))
    small = read_edge_list(path, weight="w", block_rows=3)
    large = read_edge_list(path, weight="w")
    s_src, s_dst, s_chunks = collect(small)
    l_src, l_dst, _ = collect(large)
    np.testing.assert_array_equal(s_src, l_src)
    np.testing.assert_array_equal(s_dst, l_dst)
    assert small.external_ids.equals(large.external_ids)
    assert all(len(c) <= 3 for c in s_chunks)
    check_chunk_positions(s_chunks)
    for chunk in s_chunks:                        # no blank lines: line = row + header + 1
        assert chunk.first_line == chunk.first_row + 2
    blocks = list(small.edge_features())
    assert all(b.values.shape[0] <= 3 and b.values.dtype == np.float32 for b in blocks)
    np.testing.assert_allclose(np.concatenate([b.values[:, 0] for b in blocks]), weight, rtol=1e-6)
    assert [b.first_row for b in blocks] == [c.first_row for c in s_chunks]


def test_string_ids_map_both_ways(tmp_path, rng):
    names = np.array(["alice", "bob", "carol", "dave", "émile", "z", "a b"])
    src, dst = names[rng.integers(0, 7, 60)], names[rng.integers(0, 7, 60)]
    path = write_csv(tmp_path / "e.csv", ["from", "to"], zip(src, dst))
    source = read_edge_list(path, src="from", dst="to")
    got_src, got_dst, _ = collect(source)
    assert external_of(source, got_src) == src.tolist()
    assert external_of(source, got_dst) == dst.tolist()
    used = sorted(set(src) | set(dst), key=lambda s: s.encode())
    assert source.external_ids.to_pylist() == used        # dense ID = rank in byte order
    assert source.num_nodes == len(used)
    assert source.extra["id_type"] == "string"


def test_sparse_negative_int_ids_are_mapped(tmp_path, rng):
    ids = np.array([-7, 3, 10**12, -(2**40), 55, 0])
    src, dst = ids[rng.integers(0, 6, 50)], ids[rng.integers(0, 6, 50)]
    path = write_csv(tmp_path / "e.csv", ["src", "dst"], zip(src, dst))
    source = read_edge_list(path, block_rows=4)
    got_src, got_dst, _ = collect(source)
    assert source.external_ids.type == pa.int64()
    assert source.external_ids.to_pylist() == sorted(set(src) | set(dst))
    assert external_of(source, got_src) == src.tolist()
    assert external_of(source, got_dst) == dst.tolist()


def test_map_ids_true_compacts_sparse_non_negative_ids(tmp_path):
    path = write_csv(tmp_path / "e.csv", ["src", "dst"], [(10**9, 5), (5, 7)])
    kept = read_edge_list(path, map_ids=False)      # dense as asked (issue 14: no longer the default)
    assert kept.num_nodes == 10**9 + 1 and kept.external_ids is None
    auto = read_edge_list(path)                     # sparse: 10**9 + 1 > max(2**20, 8 * 2 * 2)
    assert auto.num_nodes == 3 and auto.external_ids.to_pylist() == [5, 7, 10**9]
    mapped = read_edge_list(path, map_ids=True)
    assert mapped.num_nodes == 3
    src, dst, _ = collect(mapped)
    assert external_of(mapped, src) == [10**9, 5] and external_of(mapped, dst) == [5, 7]


def test_id_type_string_keeps_leading_zeros(tmp_path):
    path = write_csv(tmp_path / "e.csv", ["src", "dst"], [("001", "1"), ("1", "01")])
    as_int = read_edge_list(path)
    assert as_int.num_nodes == 2 and as_int.external_ids is None
    as_text = read_edge_list(path, id_type="string")
    src, dst, _ = collect(as_text)
    assert external_of(as_text, src) == ["001", "1"] and external_of(as_text, dst) == ["1", "01"]


def test_auto_falls_back_to_strings_whatever_the_block_size(tmp_path):
    rows = [(i, i + 1) for i in range(30)] + [("x", 3)]
    path = write_csv(tmp_path / "e.csv", ["src", "dst"], rows)
    for block_rows in (2, 1 << 20):
        source = read_edge_list(path, block_rows=block_rows)
        assert source.extra["id_type"] == "string"
        src, _, _ = collect(source)
        assert external_of(source, src)[-1] == "x"
        assert external_of(source, src)[:3] == ["0", "1", "2"]


def test_several_files_form_one_edge_list(tmp_path):
    a = write_csv(tmp_path / "a.csv", ["src", "dst"], [(0, 1), (1, 2)])
    b = write_csv(tmp_path / "b.csv.gz", ["src", "dst"], [(2, 3), (3, 0), (4, 4)])
    pq.write_table(pa.table({"src": [5], "dst": [0]}), tmp_path / "c.parquet")
    source = read_edge_list([a, b, tmp_path / "c.parquet"], block_rows=2)
    src, dst, chunks = collect(source)
    assert src.tolist() == [0, 1, 2, 3, 4, 5] and dst.tolist() == [1, 2, 3, 0, 4, 0]
    assert [(Path(c.source).name, c.first_row, c.first_line) for c in chunks] == [
        ("a.csv", 0, 2), ("b.csv.gz", 2, 2), ("b.csv.gz", 4, 4), ("c.parquet", 5, 1)]
    assert source.num_input_edges == 6 and source.num_nodes == 6


def test_parquet_with_weight_and_edge_features(tmp_path, rng):
    n = 37
    table = pa.table({"s": pa.array(rng.integers(-5, 5, n), pa.int32()),
                      "d": pa.array(rng.integers(-5, 5, n), pa.int64()),
                      "w": rng.random(n), "f1": rng.integers(0, 9, n), "f2": rng.random(n).astype(np.float32)})
    pq.write_table(table, tmp_path / "e.parquet", row_group_size=10)
    source = read_edge_list(tmp_path / "e.parquet", src="s", dst="d", weight="w",
                            edge_feature_columns=["f1", "f2"], block_rows=4)
    src, dst, chunks = collect(source)
    assert external_of(source, src) == table["s"].to_pylist()
    assert external_of(source, dst) == table["d"].to_pylist()
    assert [c.first_line for c in chunks] == [c.first_row + 1 for c in chunks]
    feats = np.concatenate([b.values for b in source.edge_features()])
    # the source's types (float64, int64, float32) in their common type: nothing rounded
    assert source.edge_feature_dim == 3 and feats.shape == (n, 3) and feats.dtype == np.float64
    expected = np.stack([table[c].to_numpy() for c in ("w", "f1", "f2")], axis=1).astype(np.float64)
    np.testing.assert_array_equal(feats, expected)


def test_parquet_string_and_dictionary_ids(tmp_path):
    table = pa.table({"src": pa.array(["b", "a", "c"]).dictionary_encode(), "dst": ["a", "c", "b"]})
    pq.write_table(table, tmp_path / "e.parquet")
    source = read_edge_list(tmp_path / "e.parquet")
    src, dst, _ = collect(source)
    assert external_of(source, src) == ["b", "a", "c"] and external_of(source, dst) == ["a", "c", "b"]


def test_snap_style_text_file_without_header(tmp_path):
    path = tmp_path / "web.txt"
    path.write_text("# Directed graph\n# Nodes: 4 Edges: 3\n0\t1\n2\t3\n3\tx1\n")
    with pytest.raises(IngestError, match=r"web\.txt: line 5: column 'f1'"):
        read_edge_list(path, header=False, id_type="int")
    source = read_edge_list(path, header=False)
    _src, dst, chunks = collect(source)
    assert external_of(source, dst) == ["1", "3", "x1"]
    assert chunks[0].first_line == 3


def test_tsv_gz_and_positions(tmp_path):
    path = write_csv(tmp_path / "e.tsv.gz", None, [(4, 2), (1, 3)], delimiter="\t")
    source = read_edge_list(path, header=False)
    src, dst, chunks = collect(source)
    assert src.tolist() == [4, 1] and dst.tolist() == [2, 3] and chunks[0].first_line == 1
    by_position = read_edge_list(path, header=False, src=1, dst=0)
    assert collect(by_position)[0].tolist() == [2, 3]


def test_blank_lines_are_skipped_and_lines_stay_exact(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("src,dst\n0,1\n1,2\n\n2,3\n\n\n3,0\n\n")
    source = read_edge_list(path)
    src, dst, chunks = collect(source)
    assert src.tolist() == [0, 1, 2, 3] and dst.tolist() == [1, 2, 3, 0]
    assert [(c.first_row, c.first_line, len(c)) for c in chunks] == [(0, 2, 2), (2, 5, 1), (3, 8, 1)]
    assert source.num_input_edges == 4


def test_shipped_tiny_files():
    source = read_edge_list(DATA / "edgelist_tiny.csv", nodes=DATA / "edgelist_tiny_nodes.csv",
                            feature_columns=["f0", "f1"], label="label", weight="weight")
    src, dst, _ = collect(source)
    assert external_of(source, src) == ["paris", "rome", "oslo", "paris"]
    assert external_of(source, dst) == ["rome", "oslo", "paris", "lima"]
    assert source.num_nodes == 4 and source.external_ids.to_pylist() == ["rome", "paris", "oslo", "lima"]
    assert source.labels.tolist() == [1, 0, 1, 2] and source.num_classes == 3
    assert {k: v.tolist() for k, v in source.splits.items()} == {"train": [0, 1], "valid": [2], "test": [3]}
    feats = np.concatenate([b.values for b in source.node_features()])
    np.testing.assert_allclose(feats, [[0.5, 1.0], [1.5, 2.0], [2.5, 3.0], [3.5, 4.0]])


# ---------------------------------------------------------------------------
# node tables


def test_node_table_order_defines_dense_ids(tmp_path, rng):
    order = [f"k{i}" for i in rng.permutation(12)]
    features = rng.random((12, 3)).round(5)
    labels = rng.integers(0, 4, 12)
    splits = np.array(["train"] * 6 + ["val"] * 3 + ["test"] * 2 + [""])
    color = np.array(["red", "blue", "green"])[rng.integers(0, 3, 12)]
    rows = [(order[i], *features[i], labels[i], splits[i], color[i], i * 10) for i in range(12)]
    nodes = write_csv(tmp_path / "nodes.csv", ["id", "a", "b", "c", "y", "split", "color", "year"], rows)
    edges_src = rng.choice(order, 30)
    edges_dst = rng.choice(order, 30)
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], zip(edges_src, edges_dst))
    source = read_edge_list(edges, nodes=nodes, feature_columns=["a", "b", "c"], label="y", block_rows=5)
    src, dst, _ = collect(source)
    assert src.tolist() == [order.index(s) for s in edges_src]
    assert dst.tolist() == [order.index(d) for d in edges_dst]
    assert source.external_ids.to_pylist() == order and source.num_nodes == 12
    blocks = list(source.node_features())
    assert [b.first_row for b in blocks] == [0, 5, 10] and [b.first_line for b in blocks] == [2, 7, 12]
    feats = np.concatenate([b.values for b in blocks])
    assert feats.dtype == np.float32 and source.feature_dim == 3
    np.testing.assert_allclose(feats, features, rtol=1e-6)
    assert source.labels.dtype == np.int64 and source.labels.tolist() == labels.tolist()
    assert source.task_type == "multiclass classification" and source.num_classes == labels.max() + 1
    assert source.splits["train"].tolist() == list(range(6))
    assert source.splits["valid"].tolist() == [6, 7, 8] and source.splits["test"].tolist() == [9, 10]
    assert source.split_sources["train"] == str(nodes)
    assert source.node_table.column_names == ["color", "year"]
    assert source.node_table["color"].to_pylist() == color.tolist()
    assert source.node_table["year"].type == pa.int64()


def test_node_table_with_int_ids_and_int_features(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id", "f0", "f1"], [(0, 1, 0), (1, 0, 1), (2, 1, 1)])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(0, 2), (2, 1)])
    source = read_edge_list(edges, nodes=nodes, feature_columns=["f0", "f1"])
    assert source.external_ids is None                         # IDs 0..N-1 in row order
    feats = np.concatenate([b.values for b in source.node_features()])
    assert feats.dtype == np.int64 and feats.tolist() == [[1, 0], [0, 1], [1, 1]]
    assert source.labels is None and source.splits == {}
    shuffled = write_csv(tmp_path / "n2.csv", ["id", "f0"], [(2, 0.5), (0, 1), (1, 2)])
    source = read_edge_list(edges, nodes=shuffled, feature_columns="f0")
    src, dst, _ = collect(source)
    assert src.tolist() == [1, 0] and dst.tolist() == [0, 2]
    assert source.external_ids.to_pylist() == [2, 0, 1] and source.feature_dim == 1
    assert np.concatenate([b.values for b in source.node_features()]).dtype == np.float32


@pytest.mark.parametrize("layout", ["list", "fixed"])
def test_parquet_node_table_list_features(tmp_path, rng, layout):
    n, dim = 9, 4
    feats = rng.random((n, dim)).astype(np.float32)
    flat = pa.array(feats.reshape(-1))
    column = pa.FixedSizeListArray.from_arrays(flat, dim) if layout == "fixed" else \
        pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32)), flat)
    ids = rng.permutation(n) * 3 - 7
    pq.write_table(pa.table({"node": ids, "emb": column, "score": rng.random(n)}), tmp_path / "n.parquet",
                   row_group_size=4)
    pq.write_table(pa.table({"src": ids[:5], "dst": ids[4:]}), tmp_path / "e.parquet")
    source = read_edge_list(tmp_path / "e.parquet", nodes=tmp_path / "n.parquet", node_id="node",
                            feature_columns="emb", label="score", block_rows=2)
    src, dst, _ = collect(source)
    assert src.tolist() == list(range(5)) and dst.tolist() == list(range(4, 9))
    blocks = list(source.node_features())
    assert source.feature_dim == dim and [b.first_line for b in blocks] == [1, 3, 5, 7, 9]
    np.testing.assert_array_equal(np.concatenate([b.values for b in blocks]), feats)
    assert source.task_type == "regression" and source.labels.dtype == np.float64
    assert source.external_ids.to_pylist() == ids.tolist()


def test_text_labels_and_missing_labels(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id", "kind"], [("a", "dog"), ("b", "cat"), ("c", ""), ("d", "dog")])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [("a", "b")])
    source = read_edge_list(edges, nodes=nodes, label="kind")
    assert source.extra["label_classes"] == ["cat", "dog"] and source.num_classes == 2
    assert source.labels.dtype == np.float64
    np.testing.assert_array_equal(source.labels, [1, 0, np.nan, 1])


def test_multi_task_labels(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id", "t0", "t1"], [(0, 1, 0), (1, 0, 0), (2, 1, 1)])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(0, 1)])
    source = read_edge_list(edges, nodes=nodes, label=["t0", "t1"])
    assert source.labels.shape == (3, 2) and source.task_type == "binary classification"


def test_isolated_nodes_from_node_table_and_no_edges(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id"], [("x",), ("y",)])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [])
    source = read_edge_list(edges, nodes=nodes)
    assert source.num_nodes == 2 and source.num_input_edges == 0 and collect(source)[2] == []


# ---------------------------------------------------------------------------
# bad inputs


def test_missing_file(tmp_path):
    with pytest.raises(IngestError, match=r"nope\.csv: no such file"):
        read_edge_list(tmp_path / "nope.csv")
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(0, 1)])
    with pytest.raises(IngestError, match=r"gone\.csv: no such file"):
        read_edge_list(edges, nodes=tmp_path / "gone.csv")
    with pytest.raises(IngestError, match="no file matches"):
        read_edge_list(str(tmp_path / "part-*.csv"))


def test_missing_column_lists_columns_present(tmp_path):
    edges = write_csv(tmp_path / "e.csv", ["source", "target"], [(0, 1)])
    with pytest.raises(IngestError, match=r"e\.csv: no source column 'src'; columns present: \['source', 'target'\]"):
        read_edge_list(edges)
    with pytest.raises(IngestError, match=r"no edge feature column 'w'"):
        read_edge_list(edges, src="source", dst="target", weight="w")
    nodes = write_csv(tmp_path / "n.csv", ["node", "f"], [(0, 1)])
    with pytest.raises(IngestError, match=r"n\.csv: no node ID column 'id'; columns present: \['node', 'f'\]"):
        read_edge_list(edges, src="source", dst="target", nodes=nodes)
    with pytest.raises(IngestError, match=r"n\.csv: no feature column 'g'"):
        read_edge_list(edges, src="source", dst="target", nodes=nodes, node_id="node", feature_columns=["g"])
    with pytest.raises(IngestError, match=r"n\.csv: no split column 'part'"):
        read_edge_list(edges, src="source", dst="target", nodes=nodes, node_id="node", split_column="part")
    pq.write_table(pa.table({"a": [1], "b": [2]}), tmp_path / "e.parquet")
    with pytest.raises(IngestError, match=r"e\.parquet: no destination column 'dst'; columns present: \['a', 'b'\]"):
        read_edge_list(tmp_path / "e.parquet", src="a")


def test_non_numeric_id_names_line_across_blocks(tmp_path):
    rows = [(i, i + 1) for i in range(30000)]
    rows[24997] = (5, "12x")                   # data row 24997 → line 24999 (after the header)
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], rows)
    with pytest.raises(IngestError, match=r"e\.csv: line 24999: column 'dst': cannot read '12x'"):
        read_edge_list(edges, id_type="int", block_rows=1000)


def test_non_numeric_weight_names_line(tmp_path):
    edges = write_csv(tmp_path / "e.csv", ["src", "dst", "w"], [(0, 1, 0.5), (1, 2, 1), (2, 0, "heavy")])
    with pytest.raises(IngestError, match=r"e\.csv: line 4: column 'w': cannot read 'heavy'"):
        read_edge_list(edges, weight="w")


def test_non_integer_edge_id_against_int_node_table(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id"], [(1,), (2,)])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(1, 2), (2, 1.5)])
    with pytest.raises(IngestError, match=r"e\.csv: line 3: column 'dst': cannot read '1\.5'"):
        read_edge_list(edges, nodes=nodes)


def test_non_numeric_node_feature_names_line(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id", "f"], [(0, 1), (1, 2), (2, "n/a"), (3, 4)])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(0, 1)])
    with pytest.raises(IngestError, match=r"n\.csv: line 4: column 'f': cannot read 'n/a' as a number"):
        read_edge_list(edges, nodes=nodes, feature_columns=["f"])


def test_unknown_endpoint_names_file_line_and_id(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id"], [("a",), ("b",)])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [("a", "b"), ("b", "a"), ("a", "zed")])
    with pytest.raises(IngestError, match=r"e\.csv: line 4: column 'dst': unknown node ID 'zed' .*n\.csv"):
        read_edge_list(edges, nodes=nodes, block_rows=2)
    int_nodes = write_csv(tmp_path / "ni.csv", ["id"], [(10,), (20,)])
    int_edges = write_csv(tmp_path / "ei.csv", ["src", "dst"], [(10, 20), (30, 10)])
    with pytest.raises(IngestError, match=r"ei\.csv: line 3: column 'src': unknown node ID 30"):
        read_edge_list(int_edges, nodes=int_nodes)


def test_duplicate_node_id_names_rows(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id"], [("a",), ("b",), ("c",), ("b",)])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [("a", "b")])
    with pytest.raises(IngestError, match=r"n\.csv: line 5: duplicate node ID 'b' \(first at line 3\)"):
        read_edge_list(edges, nodes=nodes)
    pq.write_table(pa.table({"id": [5, 9, 5]}), tmp_path / "n.parquet")
    with pytest.raises(IngestError, match=r"n\.parquet: row 3: duplicate node ID 5 \(first at row 1\)"):
        read_edge_list(write_csv(tmp_path / "ei.csv", ["src", "dst"], [(5, 9)]), nodes=tmp_path / "n.parquet")
    with pytest.raises(IngestError, match=r"n\.parquet: row 3: duplicate node ID '5' \(first at row 1\)"):
        read_edge_list(edges, nodes=tmp_path / "n.parquet", id_type="string")


def test_empty_fields_and_wrong_column_count(tmp_path):
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(0, 1), (1, "")])
    with pytest.raises(IngestError, match=r"e\.csv: line 3: column 'dst': empty node ID"):
        read_edge_list(edges)
    ragged = tmp_path / "r.csv"
    ragged.write_text("src,dst\n0,1\n1,2,3\n")
    with pytest.raises(IngestError, match=r"r\.csv: line 3: Expected 2 columns, got 3"):
        read_edge_list(ragged)
    pq.write_table(pa.table({"src": [0, None, 2], "dst": [1, 2, 0]}), tmp_path / "e.parquet")
    with pytest.raises(IngestError, match=r"e\.parquet: row 2: column 'src': empty node ID"):
        read_edge_list(tmp_path / "e.parquet")


def test_empty_edge_list_without_node_table(tmp_path):
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [])
    with pytest.raises(IngestError, match=r"e\.csv: no edges"):
        read_edge_list(edges)
    empty = tmp_path / "z.csv"
    empty.write_text("")
    with pytest.raises(IngestError, match=r"z\.csv: empty file"):
        read_edge_list(empty)


def test_negative_ids_refused_when_mapping_is_off(tmp_path):
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(0, 1), (2, -3)])
    with pytest.raises(IngestError, match=r"e\.csv: line 3: column 'dst': negative node ID -3"):
        read_edge_list(edges, map_ids=False)


def test_bad_split_value_and_bad_parquet_types(tmp_path):
    nodes = write_csv(tmp_path / "n.csv", ["id", "split"], [(0, "train"), (1, "holdout")])
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [(0, 1)])
    with pytest.raises(IngestError, match=r"n\.csv: line 3: column 'split': unknown split 'holdout'"):
        read_edge_list(edges, nodes=nodes)
    pq.write_table(pa.table({"src": [0.0, 1.0], "dst": [1.0, 0.0]}), tmp_path / "f.parquet")
    with pytest.raises(IngestError, match=r"f\.parquet: column 'src' has type double; IDs must be integers"):
        read_edge_list(tmp_path / "f.parquet")
    ragged = pa.ListArray.from_arrays(pa.array([0, 2, 3], pa.int32()), pa.array([1.0, 2.0, 3.0]))
    pq.write_table(pa.table({"id": [0, 1], "emb": ragged}), tmp_path / "n.parquet")
    with pytest.raises(IngestError, match=r"n\.parquet: row 2: column 'emb': list of 1 values, expected 2"):
        read_edge_list(edges, nodes=tmp_path / "n.parquet", feature_columns="emb")
    pq.write_table(pa.table({"id": [0, 1], "name": ["x", "y"]}), tmp_path / "s.parquet")
    with pytest.raises(IngestError, match=r"s\.parquet: feature column 'name' has type string"):
        read_edge_list(edges, nodes=tmp_path / "s.parquet", feature_columns=["name"])


def test_not_a_parquet_file(tmp_path):
    bogus = tmp_path / "e.parquet"
    bogus.write_text("src,dst\n0,1\n")
    with pytest.raises(IngestError, match=r"e\.parquet: not a readable Parquet file"):
        read_edge_list(bogus)


# ---------------------------------------------------------------------------
# the ID indexes


def test_string_index_matches_reference(rng):
    keys = list(dict.fromkeys(["", "a", "ab", "b", "é", "日本", "a\x00b"] +
                              [f"k{i}" for i in rng.integers(0, 10**6, 3000)]))
    index = StringIdIndex(pa.array(keys))
    queries = keys[::-1] + ["missing", "k-1", "abc"]
    sliced = pa.array(["pad"] + queries).slice(1)            # an Arrow slice with an offset
    np.testing.assert_array_equal(index.lookup(sliced), lookup_reference(keys, queries))
    with pytest.raises(DuplicateIdError) as info:
        StringIdIndex(pa.array(["x", "y", "z", "y"]))
    assert (info.value.first_row, info.value.duplicate_row, info.value.value) == (1, 3, "y")


def test_int_index_and_unique_collector(rng):
    keys = rng.choice(np.arange(-10**6, 10**6), 500, replace=False)
    index = IntIdIndex(keys)
    queries = np.concatenate([keys, [10**7, -10**7]])
    np.testing.assert_array_equal(index.lookup(queries), lookup_reference(keys.tolist(), queries.tolist()))
    with pytest.raises(DuplicateIdError) as info:
        IntIdIndex(np.array([4, 8, 4, 8]))
    assert (info.value.first_row, info.value.duplicate_row) == (0, 2)
    collector = UniqueCollector("int")
    values = rng.integers(-50, 10**5, 200_000)
    for part in np.array_split(values, 97):
        collector.add(part)
    np.testing.assert_array_equal(collector.result(), np.unique(values))
    strings = UniqueCollector("string")
    for part in (["b", "a"], ["c", "a"], ["é", "B"]):
        strings.add(pa.array(part))
    assert strings.result().to_pylist() == ["B", "a", "b", "c", "é"]


# ---------------------------------------------------------------------------
# end to end: edge list → store → edge list


def store_edges(store) -> tuple[list, list, np.ndarray | None]:
    """External (src, dst) of every stored edge in CSC order, and its input position (edge_id,
    None when the store keeps none)."""
    indptr = np.asarray(store.indptr)
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    src = np.asarray(store.indices).astype(np.int64)
    id_map = store.id_map
    return (id_map.to_external(src).to_pylist(), id_map.to_external(dst).to_pylist(),
            np.asarray(store.edge_id) if store.has_edge_ids else None)


def test_end_to_end_string_ids_through_the_store(tmp_path, rng):
    from collections import Counter

    from graphpipe.ingest import ingest

    names = np.array([f"u{i:03d}" for i in rng.permutation(60)])
    src, dst = names[rng.integers(0, 60, 400)], names[rng.integers(0, 60, 400)]
    weight = rng.random(400).astype(np.float32)
    pq.write_table(pa.table({"a": src[:150], "b": dst[:150], "w": weight[:150]}), tmp_path / "p0.parquet")
    write_csv(tmp_path / "p1.csv.gz", ["a", "b", "w"], zip(src[150:], dst[150:], weight[150:].tolist()))
    nodes = write_csv(tmp_path / "n.csv", ["id", "f"], [(n, i) for i, n in enumerate(names)])
    source = read_edge_list([tmp_path / "p0.parquet", tmp_path / "p1.csv.gz"], src="a", dst="b", weight="w",
                            nodes=nodes, feature_columns=["f"], block_rows=64)
    store = ingest(source, tmp_path / "store")
    got_src, got_dst, edge_id = store_edges(store)
    assert Counter(zip(got_src, got_dst)) == Counter(zip(src.tolist(), dst.tolist()))
    assert got_src == src[edge_id].tolist() and got_dst == dst[edge_id].tolist()
    np.testing.assert_allclose(np.asarray(store.edge_features)[:, 0], weight, rtol=1e-6)
    assert store.id_map.external_ids.to_pylist() == names.tolist()
    np.testing.assert_array_equal(np.asarray(store.feat)[:, 0], np.arange(60))


def test_end_to_end_dense_ids_through_open_source(tmp_path, rng):
    from collections import Counter

    from graphpipe.ingest import ingest

    src, dst = rng.integers(0, 30, 200), rng.integers(0, 30, 200)
    path = write_csv(tmp_path / "e.tsv", ["s", "d"], zip(src, dst), delimiter="\t")
    store = ingest(path, tmp_path / "store", reader_options={"src": "s", "dst": "d", "block_rows": 50})
    got_src, got_dst, edge_id = store_edges(store)
    assert edge_id is None  # --edge-ids auto: no edge features, so no csc/edge_id
    assert store.id_map.is_identity and store.num_nodes == max(src.max(), dst.max()) + 1
    assert Counter(zip(got_src, got_dst)) == Counter(zip(src.tolist(), dst.tolist()))


def test_crlf_bom_and_truncated_gzip(tmp_path):
    crlf = tmp_path / "w.csv"
    crlf.write_bytes(b"\xef\xbb\xbfsrc,dst\r\n0,1\r\n1,2\r\n")
    src, dst, _ = collect(read_edge_list(crlf))
    assert src.tolist() == [0, 1] and dst.tolist() == [1, 2]
    body = ("src,dst\n" + "".join(f"{i},{i + 1}\n" for i in range(50000))).encode()
    packed = gzip.compress(body)
    truncated = tmp_path / "t.csv.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(IngestError, match=r"t\.csv\.gz: after line \d+: .*[Tt]runcated"):
        read_edge_list(truncated)


def test_node_table_blank_lines_keep_rows_and_lines_aligned(tmp_path):
    nodes = tmp_path / "n.csv"
    nodes.write_text("id,f\na,1\n\nb,2\nc,3\n\n")
    edges = write_csv(tmp_path / "e.csv", ["src", "dst"], [("a", "c")])
    source = read_edge_list(edges, nodes=nodes, feature_columns=["f"])
    assert source.external_ids.to_pylist() == ["a", "b", "c"]
    blocks = list(source.node_features())
    assert [(b.first_row, b.first_line, b.values[:, 0].tolist()) for b in blocks] == [(0, 2, [1]), (1, 4, [2, 3])]
    nodes.write_text("id,f\na,1\n\nb,2\na,3\n")
    with pytest.raises(IngestError, match=r"n\.csv: line 5: duplicate node ID 'a' \(first at line 2\)"):
        read_edge_list(edges, nodes=nodes)
    nodes.write_text("id,f\na,1\n,2\n")
    with pytest.raises(IngestError, match=r"n\.csv: line 3: column 'id': empty node ID"):
        read_edge_list(edges, nodes=nodes)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(st.none(), st.tuples(st.integers(-20, 20), st.integers(-20, 20),
                                                    st.integers(0, 9))), min_size=1, max_size=40),
       block_rows=st.integers(1, 7), as_text=st.booleans())
def test_any_block_size_gives_the_same_edges(tmp_path, rows, block_rows, as_text):
    """Blank lines (None) anywhere, any block size: same edges, weights, lines, ID map."""
    edges = [r for r in rows if r is not None]
    if not edges:
        return
    lines = ["src,dst,w"] + ["" if r is None else ",".join(
        (f"id{v}" if as_text and k < 2 else str(v)) for k, v in enumerate(r)) for r in rows]
    path = tmp_path / f"h{block_rows}.csv"
    path.write_text("\n".join(lines) + "\n")
    source = read_edge_list(path, weight="w", block_rows=block_rows)
    src, dst, chunks = collect(source)
    expect = [(f"id{s}", f"id{d}") if as_text else (s, d) for s, d, _ in edges]
    assert list(zip(external_of(source, src), external_of(source, dst))) == expect
    line_of_edge = [i + 2 for i, r in enumerate(rows) if r is not None]
    for chunk in chunks:
        span = line_of_edge[chunk.first_row:chunk.first_row + len(chunk)]
        assert span == list(range(chunk.first_line, chunk.first_line + len(chunk)))
    weights = np.concatenate([b.values[:, 0] for b in source.edge_features()])
    assert weights.tolist() == [w for _, _, w in edges]
    reference = read_edge_list(path, weight="w")
    assert (source.external_ids is None) == (reference.external_ids is None)
    if source.external_ids is not None:
        assert source.external_ids.equals(reference.external_ids)
