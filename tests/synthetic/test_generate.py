"""Synthetic dataset generators and writers (graphpipe.synthetic, `graphpipe generate`)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from graphpipe.cli.generate import command as generate_command

from graphpipe.synthetic import (
    SyntheticGraph,
    as_synthetic_graph,
    community_graph,
    external_ids,
    ogb_meta_dict,
    random_normal,
    random_splits,
    rmat_edges,
    rmat_graph,
    rmat_vertex_permutation,
    write_edge_list,
    write_node_table,
    write_npz,
    write_ogb_raw,
)
from graphpipe.synthetic.text import (
    ParallelGzipWriter,
    format_rows,
    format_rows_reference,
    write_csv,
)

# ---------------------------------------------------------------------------
# text output


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["%.6f", "%.3f", "%.0f", "%.9f"])
def test_format_rows_floats_match_printf(dtype, fmt):
    rng = np.random.default_rng(0)
    values = (rng.standard_normal((300, 5)) * rng.choice([1e-6, 1, 1e4], (300, 5))).astype(dtype)
    values[0, :4] = [np.nan, np.inf, -np.inf, -1e-12]
    values[1, :3] = [0.0, -0.0, 1.0]
    assert format_rows(values, float_format=fmt).tobytes() == format_rows_reference(
        values, float_format=fmt)


def test_format_rows_ints_and_delimiters():
    rng = np.random.default_rng(1)
    values = rng.integers(-(2**62), 2**62, (500, 3))
    values[0] = [0, np.iinfo(np.int64).max, -1]
    for delimiter in (",", "\t"):
        assert format_rows(values, delimiter=delimiter).tobytes() == format_rows_reference(
            values, delimiter=delimiter)
    values[1, 0] = np.iinfo(np.int64).min  # takes the slow path, same text
    assert format_rows(values).tobytes() == format_rows_reference(values)
    assert format_rows(np.array([3, 1], dtype=np.int32)).tobytes() == b"3\n1\n"
    assert format_rows(np.zeros((0, 2), dtype=np.int64)).tobytes() == b""


def test_format_rows_other_format_uses_reference():
    values = np.array([[0.5, 1e-7]])
    assert format_rows(values, float_format="%.3e").tobytes() == b"5.000e-01,1.000e-07\n"


@pytest.mark.parametrize("workers", [1, 3])
def test_parallel_gzip_is_one_standard_member(tmp_path, workers):
    chunks = [bytes(np.random.default_rng(i).integers(48, 58, 100_000, dtype=np.uint8))
              for i in range(7)]
    path = tmp_path / "x.gz"
    with ParallelGzipWriter(path, level=1, workers=workers) as sink:
        for chunk in chunks:
            sink.write(chunk)
        sink.write(b"")
    assert gzip.decompress(path.read_bytes()) == b"".join(chunks)
    # exactly one member: the stream ends right after the first member's trailer
    import zlib

    decompressor = zlib.decompressobj(31)
    decompressor.decompress(path.read_bytes())
    assert decompressor.eof and decompressor.unused_data == b""


def test_write_csv_gz_reads_back_with_pandas_and_arrow(tmp_path):
    rng = np.random.default_rng(2)
    values = rng.standard_normal((5000, 7)).astype(np.float32)
    path = write_csv(tmp_path / "f.csv.gz", values, workers=2)
    read = pd.read_csv(path, header=None).to_numpy()
    np.testing.assert_allclose(read, values, atol=5.1e-7, rtol=0)
    table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(autogenerate_column_names=True))
    assert table.num_rows == 5000 and table.num_columns == 7


# ---------------------------------------------------------------------------
# R-MAT


def test_rmat_shape_range_and_skew(rmat_small):
    src, dst = rmat_edges(12, 16, seed=5)
    assert src.dtype == np.int64 and dst.dtype == np.int64
    assert len(src) == len(dst) == 16 * 4096
    assert src.min() >= 0 and dst.min() >= 0 and max(src.max(), dst.max()) < 4096
    in_degree = np.bincount(dst, minlength=4096)
    out_degree = np.bincount(src, minlength=4096)
    assert in_degree.max() > 20 * in_degree.mean()
    assert out_degree.max() > 20 * out_degree.mean()
    # the fixture is the same generator at scale 10
    assert rmat_small.num_nodes == 1024 and rmat_small.num_edges == 16 * 1024
    assert np.bincount(rmat_small.dst).max() > 10 * 16


def test_rmat_deterministic_for_a_seed_whatever_the_threads():
    first = rmat_edges(14, 8, seed=3, num_threads=1)
    second = rmat_edges(14, 8, seed=3, num_threads=2)
    third = rmat_edges(14, 8, seed=3)
    for a, b in ((first, second), (first, third)):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    other = rmat_edges(14, 8, seed=4)
    assert not np.array_equal(first[0], other[0])


def test_rmat_quadrant_probabilities_and_permutation():
    a, b, c = 0.57, 0.19, 0.19
    src, dst = rmat_edges(10, 64, a=a, b=b, c=c, seed=1, permute=False)
    top_src = src >> 9  # the first (top-level) bit of each ID
    top_dst = dst >> 9
    n = len(src)
    assert abs(np.mean((top_src == 0) & (top_dst == 0)) - a) < 0.01
    assert abs(np.mean((top_src == 0) & (top_dst == 1)) - b) < 0.01
    assert abs(np.mean((top_src == 1) & (top_dst == 0)) - c) < 0.01
    assert n == 64 * 1024
    # unpermuted, the biggest hub is node 0; permuted, IDs are relabelled by a bijection
    assert np.argmax(np.bincount(dst, minlength=1024)) == 0
    perm = rmat_vertex_permutation(10, seed=1)
    assert np.array_equal(np.sort(perm), np.arange(1024))
    psrc, pdst = rmat_edges(10, 64, a=a, b=b, c=c, seed=1)
    np.testing.assert_array_equal(psrc, perm[src])
    np.testing.assert_array_equal(pdst, perm[dst])
    for scale in (1, 2, 3, 7):
        assert len(np.unique(rmat_vertex_permutation(scale, seed=9))) == 1 << scale


def test_rmat_rejects_bad_arguments():
    with pytest.raises(ValueError, match="scale"):
        rmat_edges(0, 4)
    with pytest.raises(ValueError, match="a\\+b\\+c"):
        rmat_edges(4, 4, a=0.6, b=0.3, c=0.3)


def test_rmat_graph_has_features_labels_splits():
    graph = rmat_graph(8, 4, feature_dim=5, num_classes=3, seed=2)
    assert graph.features.shape == (256, 5) and graph.features.dtype == np.float32
    assert graph.labels.shape == (256,) and set(np.unique(graph.labels)) <= {0, 1, 2}
    assert graph.num_classes == 3
    again = rmat_graph(8, 4, feature_dim=5, num_classes=3, seed=2, num_threads=1)
    np.testing.assert_array_equal(graph.features, again.features)
    np.testing.assert_array_equal(graph.labels, again.labels)


# ---------------------------------------------------------------------------
# community graph


def test_community_graph_shapes_and_types(small_community):
    g = small_community
    assert isinstance(g, SyntheticGraph)
    assert g.num_nodes == 2000 and g.num_classes == 8
    assert g.features.shape == (2000, 32) and g.features.dtype == np.float32
    assert g.labels.shape == (2000,) and g.labels.dtype == np.int64
    assert g.src.dtype == np.int64 and g.num_edges == 20000
    assert abs(float(g.features.std()) - 1.0) < 0.05
    assert set(g.splits) == {"train", "valid", "test"}
    all_ids = np.concatenate(list(g.splits.values()))
    assert len(all_ids) == 2000 and len(np.unique(all_ids)) == 2000
    for ids in g.splits.values():
        assert np.all(np.diff(ids) > 0)
    assert len(g.splits["train"]) == 1200 and len(g.splits["valid"]) == 400


def test_community_graph_is_undirected_simple_and_skewed(small_community):
    g = small_community
    assert not np.any(g.src == g.dst)
    keys = g.src * g.num_nodes + g.dst
    assert len(np.unique(keys)) == g.num_edges  # no duplicate edges
    reverse = np.sort(g.dst * g.num_nodes + g.src)
    np.testing.assert_array_equal(np.sort(keys), reverse)  # every edge both ways
    degree = np.bincount(g.dst, minlength=g.num_nodes)
    assert degree.min() >= 1  # no isolated node
    assert degree.max() > 5 * degree.mean()
    assert np.std(degree) > 0.8 * degree.mean()


@pytest.mark.parametrize("homophily", [0.2, 0.5, 0.8, 0.95])
def test_community_graph_homophily_matches(homophily):
    g = community_graph(3000, 6, homophily=homophily, feature_dim=4, seed=7)
    measured = np.mean(g.labels[g.src] == g.labels[g.dst])
    assert abs(measured - homophily) < 0.03


def _nearest_centroid_accuracy(features, labels, train, test, num_classes):
    centroids = np.stack([features[train][labels[train] == c].mean(0) for c in range(num_classes)])
    dist = ((features[test, None, :] - centroids[None]) ** 2).sum(-1)
    return float(np.mean(dist.argmin(1) == labels[test]))


def test_community_features_carry_a_noisy_signal(small_community):
    g = small_community
    train, test = g.splits["train"], g.splits["test"]
    accuracy = _nearest_centroid_accuracy(g.features, g.labels, train, test, g.num_classes)
    chance = 1.0 / g.num_classes
    assert 3 * chance < accuracy < 0.8, accuracy
    # averaging the in-neighbours' features (what a GNN does) recovers much more
    counts = np.bincount(g.dst, minlength=g.num_nodes).astype(np.float32)
    summed = np.zeros_like(g.features)
    np.add.at(summed, g.dst, g.features[g.src])
    aggregated = g.features + summed / counts[:, None]
    aggregated_accuracy = _nearest_centroid_accuracy(aggregated, g.labels, train, test,
                                                     g.num_classes)
    assert aggregated_accuracy > accuracy + 0.2 and aggregated_accuracy > 0.85


def test_community_neighbour_model_beats_feature_model():
    """A linear model on x and 1- and 2-hop neighbour means (what a 2-layer SAGE sees)
    clearly beats one on x alone (an MLP)."""
    torch = pytest.importorskip("torch")
    g = community_graph(4000, 10, feature_dim=64, seed=3)
    x = torch.from_numpy(g.features)
    src, dst = torch.from_numpy(g.src), torch.from_numpy(g.dst)
    counts = torch.bincount(dst, minlength=g.num_nodes).clamp(min=1)[:, None]

    def mean_in_neighbours(h):
        return torch.zeros_like(h).index_add_(0, dst, h[src]) / counts

    hop1 = mean_in_neighbours(x)
    inputs = {"features": x, "neighbours": torch.cat([x, hop1, mean_in_neighbours(hop1)], 1)}
    y = torch.from_numpy(g.labels)
    train, test = torch.from_numpy(g.splits["train"]), torch.from_numpy(g.splits["test"])
    accuracy = {}
    for name, data in inputs.items():
        torch.manual_seed(0)
        model = torch.nn.Linear(data.shape[1], 10)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
        for _ in range(150):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(data[train]), y[train])
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            accuracy[name] = (model(data[test]).argmax(1) == y[test]).float().mean().item()
    assert 0.4 < accuracy["features"] < 0.75, accuracy
    assert accuracy["neighbours"] > 0.85 and accuracy["neighbours"] > accuracy["features"] + 0.2


def test_community_graph_deterministic_and_seeded():
    a = community_graph(500, 4, feature_dim=8, seed=11)
    b = community_graph(500, 4, feature_dim=8, seed=11)
    c = community_graph(500, 4, feature_dim=8, seed=12)
    np.testing.assert_array_equal(a.src, b.src)
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert not np.array_equal(a.labels, c.labels)


def test_community_graph_directed_and_edge_count():
    g = community_graph(1000, 5, avg_degree=7, feature_dim=0, undirected=False, seed=1)
    assert g.num_edges == 7000 and g.features is None
    assert len(np.unique(g.src * 1000 + g.dst)) == 7000


def test_community_graph_rejects_bad_arguments():
    with pytest.raises(ValueError, match="homophily"):
        community_graph(100, 4, homophily=1.5)
    with pytest.raises(ValueError, match="num_classes"):
        community_graph(100, 0)


# ---------------------------------------------------------------------------
# helpers


def test_random_splits_and_normal():
    splits = random_splits(101, train_frac=0.5, valid_frac=0.25, seed=0)
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [50, 25, 26]
    with pytest.raises(ValueError):
        random_splits(10, train_frac=0.9, valid_frac=0.2)
    a = random_normal((70_000, 33), seed=4, num_threads=1)
    b = random_normal((70_000, 33), seed=4, num_threads=2)
    np.testing.assert_array_equal(a, b)
    assert abs(float(a.mean())) < 0.01 and abs(float(a.std()) - 1) < 0.01


@pytest.mark.parametrize("kind", ["dense", "sparse-int", "string"])
def test_external_ids(kind):
    ids = external_ids(5000, kind, seed=1)
    assert len(ids) == 5000 and len(np.unique(ids)) == 5000
    if kind == "string":
        assert all(str(v).startswith("user_") for v in ids[:10])
        assert not np.array_equal(ids, np.sort(ids))  # shuffled
    elif kind == "sparse-int":
        assert ids.dtype == np.int64 and ids.max() > 10**12
    np.testing.assert_array_equal(ids, external_ids(5000, kind, seed=1))
    with pytest.raises(ValueError, match="kind"):
        external_ids(3, "uuid")


# ---------------------------------------------------------------------------
# OGB layout, read by OGB itself


def _assert_same_as_written(graph, labels, splits, written: SyntheticGraph, *, exact_features):
    np.testing.assert_array_equal(graph["edge_index"], np.stack([written.src, written.dst]))
    assert graph["edge_index"].dtype == np.int64
    assert graph["num_nodes"] == written.num_nodes
    assert graph["node_feat"].dtype == np.float32
    if exact_features:
        np.testing.assert_array_equal(graph["node_feat"], written.features)
    else:  # written "%.6f": half a unit in the 6th decimal, plus float32 rounding
        np.testing.assert_allclose(graph["node_feat"], written.features, rtol=0, atol=6e-7)
    assert labels.shape == (written.num_nodes, 1)
    np.testing.assert_array_equal(labels[:, 0], written.labels)
    for name in ("train", "valid", "test"):
        np.testing.assert_array_equal(splits[name], written.splits[name])


def test_ogb_reads_csv_folder(ogb_raw_folder, ogb_loader, small_community):
    folder, meta = ogb_raw_folder
    assert (folder / "raw" / "edge.csv.gz").is_file()
    assert meta["binary"] == "False" and meta["num classes"] == 8 and meta["split"] == "random"
    graph, labels, splits = ogb_loader(folder, meta)
    _assert_same_as_written(graph, labels, splits, small_community, exact_features=False)
    assert graph["edge_feat"] is None


def test_ogb_reads_binary_folder(ogb_raw_binary_folder, ogb_loader, small_community):
    folder, meta = ogb_raw_binary_folder
    assert (folder / "raw" / "data.npz").is_file()
    assert not (folder / "raw" / "edge.csv.gz").exists()
    assert meta["binary"] == "True" and meta["num classes"] == 8
    graph, labels, splits = ogb_loader(folder, meta)
    _assert_same_as_written(graph, labels, splits, small_community, exact_features=True)


def test_ogb_meta_dict_has_every_key_ogb_reads(ogb_raw_folder):
    import ogb.nodeproppred

    master = pd.read_csv(Path(ogb.nodeproppred.__file__).parent / "master.csv", index_col=0)
    _folder, meta = ogb_raw_folder
    missing = set(master.index) - set(meta)
    assert missing <= {"url"} or not missing, missing
    assert "dir_path" in meta and meta["is hetero"] == "False"


def test_ogb_csv_file_layout(ogb_raw_folder, small_community):
    folder, _meta = ogb_raw_folder
    with gzip.open(folder / "raw" / "edge.csv.gz", "rt") as f:
        first = f.readline().strip()
    assert first == f"{small_community.src[0]},{small_community.dst[0]}"  # no header
    with gzip.open(folder / "raw" / "node-feat.csv.gz", "rt") as f:
        fields = f.readline().strip().split(",")
    assert len(fields) == 32 and all(len(v.split(".")[1]) == 6 for v in fields)
    with gzip.open(folder / "raw" / "num-node-list.csv.gz", "rt") as f:
        assert f.read() == "2000\n"
    with gzip.open(folder / "raw" / "num-edge-list.csv.gz", "rt") as f:
        assert f.read() == f"{small_community.num_edges}\n"
    assert (folder / "RELEASE_v1.txt").is_file() and (folder / "processed").is_dir()
    for name in ("train", "valid", "test"):
        assert (folder / "split" / "random" / f"{name}.csv.gz").is_file()


def test_ogb_with_edge_features_and_arrays_input(tmp_path, ogb_loader):
    rng = np.random.default_rng(0)
    arrays = {
        "edge_index": np.array([[0, 1, 2, 3], [1, 2, 3, 0]]),
        "x": rng.standard_normal((5, 3)).astype(np.float32),  # node 4 has no edges
        "y": np.array([0, 1, 2, 1, 0]),
        "train_idx": np.array([0, 1]), "valid_idx": np.array([2]), "test_idx": np.array([3, 4]),
    }
    edge_feat = rng.random((4, 2)).astype(np.float32)
    for binary in (False, True):
        folder = write_ogb_raw(tmp_path / f"tiny_{binary}", arrays, binary=binary,
                               edge_feat=edge_feat, split_name="custom")
        meta = ogb_meta_dict(folder)
        assert meta["has_edge_attr"] == "True" and meta["split"] == "custom"
        assert meta["num classes"] == 3
        graph, labels, splits = ogb_loader(folder, meta)
        assert graph["num_nodes"] == 5
        np.testing.assert_allclose(graph["edge_feat"], edge_feat, atol=6e-7, rtol=0)
        np.testing.assert_array_equal(labels[:, 0], arrays["y"])
        np.testing.assert_array_equal(splits["test"], [3, 4])


def test_write_ogb_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="endpoints"):
        write_ogb_raw(tmp_path / "x", {"src": [0, 5], "dst": [1, 1], "num_nodes": 3})
    with pytest.raises(ValueError, match="edge_index"):
        as_synthetic_graph({"edge_index": np.zeros((3, 2), dtype=np.int64)})


# ---------------------------------------------------------------------------
# other source formats


@pytest.mark.parametrize("name", ["e.csv", "e.tsv", "e.csv.gz", "e.parquet"])
@pytest.mark.parametrize("kind", ["sparse-int", "string"])
def test_write_edge_list_round_trip(tmp_path, name, kind, small_community):
    g = small_community
    ids = external_ids(g.num_nodes, kind)
    weight = np.linspace(0, 1, g.num_edges, dtype=np.float32)
    path = write_edge_list(tmp_path / name, g.src, g.dst, ids=ids, weight=weight,
                           src_col="from", dst_col="to")
    if name.endswith(".parquet"):
        frame = pq.read_table(path).to_pandas()
    else:
        frame = pd.read_csv(path, sep="\t" if ".tsv" in name else ",")
    assert list(frame.columns) == ["from", "to", "weight"]
    np.testing.assert_array_equal(frame["from"].to_numpy(), ids[g.src])
    np.testing.assert_array_equal(frame["to"].to_numpy(), ids[g.dst])
    np.testing.assert_array_equal(frame["weight"].to_numpy(np.float32), weight)


def test_write_edge_list_without_header(tmp_path):
    path = write_edge_list(tmp_path / "e.csv", np.array([0, 2]), np.array([1, 0]), header=False)
    assert path.read_text() == "0,1\n2,0\n"


@pytest.mark.parametrize("layout", ["columns", "list", "fixed_list"])
def test_write_node_table_parquet(tmp_path, layout, small_community):
    g = small_community
    ids = external_ids(g.num_nodes, "string")
    path = write_node_table(tmp_path / "n.parquet", ids, g.features, g.labels,
                            feature_layout=layout)
    table = pq.read_table(path)
    assert table.column_names[:2] == ["id", "label"]
    np.testing.assert_array_equal(table.column("label").to_numpy(), g.labels)
    if layout == "columns":
        assert table.column_names[2:] == [f"f{j}" for j in range(32)]
        features = np.column_stack([table.column(f"f{j}").to_numpy() for j in range(32)])
    else:
        column = table.column("features").combine_chunks()
        expected = pa.list_(pa.float32(), 32) if layout == "fixed_list" else pa.list_(pa.float32())
        assert column.type == expected
        features = column.flatten().to_numpy().reshape(-1, 32)
    np.testing.assert_array_equal(features, g.features)


def test_write_node_table_csv(tmp_path, small_community):
    g = small_community
    ids = external_ids(g.num_nodes, "sparse-int")
    path = write_node_table(tmp_path / "n.csv", ids, g.features, g.labels)
    frame = pd.read_csv(path)
    np.testing.assert_array_equal(frame["id"].to_numpy(), ids)
    np.testing.assert_array_equal(frame[[f"f{j}" for j in range(32)]].to_numpy(np.float32),
                                  g.features)  # shortest round-trip text: exact
    with pytest.raises(ValueError, match="parquet"):
        write_node_table(tmp_path / "m.csv", ids, g.features, feature_layout="list")


def test_write_npz(tmp_path, small_community):
    g = small_community
    path = write_npz(tmp_path / "graph.npz", g)
    with np.load(path) as data:
        assert {"edge_index", "x", "y", "train_idx", "valid_idx", "test_idx",
                "num_nodes"} <= set(data.files)
        np.testing.assert_array_equal(data["edge_index"], np.stack([g.src, g.dst]))
        np.testing.assert_array_equal(data["x"], g.features)
        np.testing.assert_array_equal(data["y"], g.labels)
        np.testing.assert_array_equal(data["valid_idx"], g.splits["valid"])
        assert int(data["num_nodes"]) == g.num_nodes
    other = write_npz(tmp_path / "graph.bin", g, compressed=True)
    assert other.name == "graph.bin" and other.is_file()


# ---------------------------------------------------------------------------
# CLI


def _invoke(args):
    return CliRunner().invoke(generate_command, args, catch_exceptions=False)


def test_cli_community_ogb(tmp_path, ogb_loader):
    dest = tmp_path / "comm"
    result = _invoke(["community", str(dest), "--nodes", "1500", "--classes", "5",
                      "--avg-degree", "6", "--feature-dim", "12", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "1500 nodes" in result.output
    graph, labels, splits = ogb_loader(dest)
    expected = community_graph(1500, 5, avg_degree=6, feature_dim=12, seed=3)
    _assert_same_as_written(graph, labels, splits, expected, exact_features=False)
    assert not list(tmp_path.glob(".comm.tmp-*"))  # the temporary sibling is gone


def test_cli_existing_destination(tmp_path):
    dest = tmp_path / "r"
    args = ["rmat", str(dest), "--scale", "8", "--edge-factor", "4", "--feature-dim", "4",
            "--binary", "-q"]
    assert _invoke(args).exit_code == 0
    before = (dest / "raw" / "data.npz").stat().st_mtime_ns
    result = _invoke(args)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "already exists" in result.output
    assert (dest / "raw" / "data.npz").stat().st_mtime_ns == before
    result = _invoke(args + ["--overwrite", "--seed", "1"])
    assert result.exit_code == 0
    meta = ogb_meta_dict(dest)
    assert meta["binary"] == "True" and meta["num classes"] <= 10


@pytest.mark.parametrize("fmt", ["csv", "parquet", "npz"])
def test_cli_other_formats(tmp_path, fmt):
    dest = tmp_path / fmt
    result = _invoke(["community", str(dest), "--nodes", "800", "--classes", "4",
                      "--feature-dim", "6", "--format", fmt, "--id-kind", "string", "-q"])
    assert result.exit_code == 0, result.output
    description = json.loads((dest / "generate.json").read_text())
    assert description["num_nodes"] == 800 and description["format"] == fmt
    if fmt == "npz":
        with np.load(dest / "graph.npz") as data:
            assert data["x"].shape == (800, 6)
        return
    read = (lambda p: pq.read_table(p).to_pandas()) if fmt == "parquet" else pd.read_csv
    edges = read(dest / f"edges.{fmt}")
    nodes = read(dest / f"nodes.{fmt}")
    assert list(edges.columns) == ["src", "dst"] and len(nodes) == 800
    assert set(edges["src"]) <= set(nodes["id"])
    train = read(dest / "split" / f"train.{fmt}")
    assert len(train) == description["splits"]["train"]


def test_cli_bad_option_combination(tmp_path):
    result = _invoke(["rmat", str(tmp_path / "x"), "--scale", "4", "--binary", "--format", "csv"])
    assert result.exit_code == 2 and "--binary" in result.output
    assert not (tmp_path / "x").exists()


def test_cli_through_main_entry_point(tmp_path):
    dest = tmp_path / "via_main"
    code = "from graphpipe.cli.main import main; import sys; sys.exit(main())"
    args = ["generate", "rmat", str(dest), "--scale", "6", "--edge-factor", "2",
            "--feature-dim", "3", "--num-classes", "2"]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert (dest / "raw" / "edge.csv.gz").is_file()
    assert done.stderr == ""  # no progress bars when stderr is not a terminal
    again = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                           timeout=300, check=False)
    assert again.returncode == 2
    assert again.stderr.strip().startswith("Error:") and "\n" not in again.stderr.strip()


@pytest.mark.parametrize(("generator", "size"), [
    ("rmat", ["--scale", "6", "--edge-factor", "2", "--feature-dim", "2"]),
    ("community", ["--nodes", "80", "--feature-dim", "2"]),
    ("papers100m-bin", ["--nodes", "80", "--dim", "2", "--label-frac", "0.5"]),
])
def test_every_generator_takes_num_classes_and_classes(tmp_path, generator, size):
    help_text = _invoke([generator, "--help"]).output
    assert "--num-classes" in help_text and "--classes" in help_text
    labels = {}
    for spelling in ("--num-classes", "--classes"):
        dest = tmp_path / spelling.strip("-")
        fmt = [] if generator == "papers100m-bin" else ["--format", "npz"]
        result = _invoke([generator, str(dest), *size, *fmt, spelling, "3", "-q"])
        assert result.exit_code == 0, result.output
        if generator == "papers100m-bin":
            with np.load(dest / "raw" / "node-label.npz") as data:
                labels[spelling] = data["node_label"]
        else:
            with np.load(dest / "graph.npz") as data:
                labels[spelling] = data["y"]
    np.testing.assert_array_equal(labels["--num-classes"], labels["--classes"])
    known = labels["--classes"][~np.isnan(labels["--classes"].astype(float))]
    assert set(np.unique(known).astype(int)) <= {0, 1, 2} and len(np.unique(known)) > 1
