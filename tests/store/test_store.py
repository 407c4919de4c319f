"""The on-disk store: round trips, zero-copy reads, atomic writes, validation, ID maps."""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from graphpipe.store import GraphStore, ManifestVersionError, StoreError, StoreWriter
from graphpipe.store.validate import validate


def _write_store(dest: Path, *, num_nodes: int = 50, feat_chunk_rows: int | None = None,
                 compression: str | None = None, overwrite: bool = False, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, 300)
    dst = rng.integers(0, num_nodes, 300)
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    x = rng.standard_normal((num_nodes, 7)).astype(np.float32)
    y = rng.integers(0, 3, num_nodes)
    perm = rng.permutation(num_nodes)
    splits = {"train": perm[:20], "valid": perm[20:30], "test": perm[30:]}
    with StoreWriter(dest, name="toy", overwrite=overwrite) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", src[order].astype(np.int32))
        w.write_array("csc/edge_id", order.astype(np.int64))
        w.write_array("node/feat", x, chunk_rows=feat_chunk_rows, compression=compression)
        w.write_array("node/label", y)
        w.write_splits(splits)
        w.manifest.update(num_nodes=num_nodes, num_edges=300,
                          node_features={"dim": 7, "dtype": "float32"})
        w.commit()
    return {"indptr": indptr, "indices": src[order], "x": x, "y": y, "splits": splits}


def test_round_trip_and_zero_copy(tmp_path):
    ref = _write_store(tmp_path / "s")
    store = GraphStore.open(tmp_path / "s")
    assert store.num_nodes == 50 and store.num_edges == 300
    np.testing.assert_array_equal(store.indptr, ref["indptr"])
    np.testing.assert_array_equal(store.indices, ref["indices"])
    assert store.indices.dtype == np.int32 and store.indptr.dtype == np.int64
    # zero-copy: the arrays are views of a file mapping, not private copies
    assert isinstance(store.indices.base, (mmap.mmap, np.memmap)) or isinstance(
        getattr(store.indices.base, "base", None), mmap.mmap)
    assert not store.indices.flags.writeable
    ids = np.array([3, 3, 0, 49, 17])
    np.testing.assert_array_equal(store.features(ids), ref["x"][ids])
    assert store.features(ids).flags.c_contiguous
    np.testing.assert_array_equal(store.labels, ref["y"])
    for name, ids in ref["splits"].items():
        np.testing.assert_array_equal(store.split(name), np.sort(ids))
    assert validate(tmp_path / "s") == []


@pytest.mark.parametrize("chunk_rows,compression", [(8, None), (8, "zstd"), (None, "zstd")])
def test_chunked_and_compressed_features(tmp_path, chunk_rows, compression):
    ref = _write_store(tmp_path / "s", feat_chunk_rows=chunk_rows, compression=compression)
    store = GraphStore.open(tmp_path / "s")
    ids = np.random.default_rng(1).integers(0, 50, 5000)  # enough rows for the threaded path
    assert np.array_equal(store.features(ids).view(np.uint32), ref["x"][ids].view(np.uint32))
    np.testing.assert_array_equal(store.features(), ref["x"])
    assert store.manifest["arrays"]["node/feat"]["compression"] == compression
    assert validate(tmp_path / "s") == []


def test_zarr_reads_the_store(tmp_path):
    import zarr

    ref = _write_store(tmp_path / "s", feat_chunk_rows=16)
    group = zarr.open_group(str(tmp_path / "s"), mode="r")
    np.testing.assert_array_equal(group["node/feat"][...], ref["x"])
    np.testing.assert_array_equal(group["csc/indptr"][...], ref["indptr"])


def test_unknown_manifest_version_is_refused(tmp_path):
    _write_store(tmp_path / "s")
    path = tmp_path / "s" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["format_version"] = 99
    path.write_text(json.dumps(manifest))
    with pytest.raises(ManifestVersionError, match=r"version 99.*format version 1"):
        GraphStore.open(tmp_path / "s")


def test_not_a_store(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(StoreError, match="manifest.json"):
        GraphStore.open(tmp_path / "d")


def test_existing_destination_needs_overwrite_and_failed_write_keeps_old(tmp_path):
    _write_store(tmp_path / "s", seed=0)
    before = (tmp_path / "s" / "manifest.json").read_text()
    with pytest.raises(StoreError, match="already exists"):
        _write_store(tmp_path / "s", seed=1)
    with pytest.raises(RuntimeError), StoreWriter(tmp_path / "s", overwrite=True) as w:
        w.write_array("csc/indptr", np.zeros(3, np.int64))
        raise RuntimeError("crash mid-write")
    assert (tmp_path / "s" / "manifest.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no temporary siblings left
    ref = _write_store(tmp_path / "s", seed=1, overwrite=True)
    np.testing.assert_array_equal(GraphStore.open(tmp_path / "s").labels, ref["y"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


def test_destination_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        _write_store(tmp_path / "f", overwrite=True)
    assert (tmp_path / "f").read_text() == "x"


def test_validate_finds_corruption(tmp_path):
    _write_store(tmp_path / "s")
    chunk = tmp_path / "s" / "csc" / "indices" / "c" / "0"
    data = bytearray(chunk.read_bytes())
    data[0:4] = (10_000).to_bytes(4, "little")
    chunk.write_bytes(bytes(data))
    problems = validate(tmp_path / "s")
    assert any("csc/indices: checksum" in p for p in problems)
    assert any("out of range" in p for p in problems)
    assert validate(tmp_path / "s", checksums=False) != []


def test_validate_reports_bad_indptr_and_split_overlap(tmp_path):
    _write_store(tmp_path / "s")
    chunk = tmp_path / "s" / "csc" / "indptr" / "c" / "0"
    indptr = np.fromfile(chunk, dtype=np.int64)
    indptr[5] = indptr[6] + 1
    indptr.tofile(chunk)
    problems = validate(tmp_path / "s", checksums=False)
    assert any("decreases at node" in p for p in problems)


def test_editor_adds_derived_arrays_without_touching_old(tmp_path):
    _write_store(tmp_path / "s")
    store = GraphStore.open(tmp_path / "s")
    old_checksum = store.manifest["arrays"]["csc/indices"]["checksum"]
    with store.edit() as ed:
        ed.write_array("derived/degree_group", np.arange(50, dtype=np.int8) % 4)
        ed.manifest["derived"]["centrality"] = {"bins": 4}
        ed.commit()
    reopened = GraphStore.open(tmp_path / "s")
    np.testing.assert_array_equal(reopened.array("derived/degree_group"), np.arange(50) % 4)
    assert reopened.manifest["arrays"]["csc/indices"]["checksum"] == old_checksum
    assert reopened.manifest["derived"]["centrality"] == {"bins": 4}
    with pytest.raises(StoreError, match="already exists"), reopened.edit() as ed:
        ed.write_array("derived/degree_group", np.zeros(50, np.int8))
    assert validate(tmp_path / "s") == []
    assert not any(p.name.startswith(".pending") for p in (tmp_path / "s").iterdir())


@pytest.mark.parametrize("kind", ["string", "sparse-int"])
def test_id_map_both_ways(tmp_path, kind):
    n = 40
    rng = np.random.default_rng(3)
    external = ([f"user_{i:05d}" for i in rng.permutation(1000)[:n]] if kind == "string"
                else rng.choice(10**12, n, replace=False).astype(np.int64) - 5 * 10**11)
    with StoreWriter(tmp_path / "s") as w:
        w.write_array("csc/indptr", np.zeros(n + 1, np.int64))
        w.write_array("csc/indices", np.zeros(0, np.int32))
        w.write_id_map(pa.array(external))
        w.manifest.update(num_nodes=n, num_edges=0)
        w.commit()
    id_map = GraphStore.open(tmp_path / "s").id_map
    dense = np.array([5, 0, 39, 5])
    ext = id_map.to_external(dense).to_pylist()
    assert ext == [external[i] for i in dense]
    np.testing.assert_array_equal(id_map.to_dense(ext), dense)
    unknown = "nobody" if kind == "string" else 7
    with pytest.raises(KeyError, match="unknown external ID"):
        id_map.to_dense([ext[0], unknown])
    assert id_map.to_dense([ext[0], unknown], strict=False).tolist() == [5, -1]
    with pytest.raises(IndexError):
        id_map.to_external([n])


def test_cli_info_and_validate(tmp_path):
    from click.testing import CliRunner
    from graphpipe.cli.main import cli

    _write_store(tmp_path / "s")
    runner = CliRunner()
    result = runner.invoke(cli, ["info", str(tmp_path / "s"), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["num_nodes"] == 50 and info["num_edges"] == 300
    assert info["in_degree"]["max"] >= info["in_degree"]["median"] >= info["in_degree"]["min"]
    assert info["splits"] == {"train": 20, "valid": 10, "test": 20}
    result = runner.invoke(cli, ["info", str(tmp_path / "s")])
    assert result.exit_code == 0 and "nodes" in result.output
    assert runner.invoke(cli, ["validate", str(tmp_path / "s")]).exit_code == 0
    os.remove(tmp_path / "s" / "tables" / "splits.parquet")
    result = runner.invoke(cli, ["validate", str(tmp_path / "s")])
    assert result.exit_code == 2
    result = runner.invoke(cli, ["info", str(tmp_path / "missing")])
    assert result.exit_code != 0 and "no such store" in result.output


def _is_memory_map(arr: np.ndarray) -> bool:
    base = arr
    while base is not None:
        if isinstance(base, (mmap.mmap, np.memmap)):
            return True
        base = getattr(base, "base", None)
    return False


@pytest.mark.parametrize("chunk_rows,compression", [(None, None), (8, None), (8, "zstd")])
def test_in_memory_store_reads_the_same_bytes(tmp_path, chunk_rows, compression):
    ref = _write_store(tmp_path / "s", feat_chunk_rows=chunk_rows, compression=compression)
    mapped = GraphStore.open(tmp_path / "s")
    loaded = GraphStore.open(tmp_path / "s", in_memory=True)
    assert loaded.in_memory_arrays == sorted(loaded.manifest["arrays"])
    assert mapped.in_memory_arrays == []
    for key in ("csc/indptr", "csc/indices", "csc/edge_id", "node/label"):
        a, b = mapped.array(key), loaded.array(key)
        assert a.dtype == b.dtype and np.array_equal(a, b)
        assert _is_memory_map(a) and not _is_memory_map(b)
        assert not b.flags.writeable
    views, rows = loaded.feature_chunks()
    assert len(views) == 1 and rows == 50 and not _is_memory_map(views[0])
    assert np.array_equal(views[0].view(np.uint32), ref["x"].view(np.uint32))
    ids = np.random.default_rng(1).integers(0, 50, 5000)
    assert np.array_equal(loaded.features(ids).view(np.uint32), ref["x"][ids].view(np.uint32))


def test_in_memory_auto_and_named_keys(tmp_path, monkeypatch):
    from graphpipe.store import reader

    _write_store(tmp_path / "s")
    auto = GraphStore.open(tmp_path / "s", in_memory="auto")
    assert auto.in_memory_arrays == sorted(reader.LOADER_ARRAYS)
    assert not _is_memory_map(auto.indices) and _is_memory_map(auto.edge_id)
    monkeypatch.setattr(reader, "AUTO_MEMORY_FRACTION", 0.0)  # nothing fits: all memory maps
    assert GraphStore.open(tmp_path / "s", in_memory="auto").in_memory_arrays == []
    named = GraphStore.open(tmp_path / "s", in_memory={"node/feat"})
    assert named.in_memory_arrays == ["node/feat"]
    assert _is_memory_map(named.indices) and not _is_memory_map(named.feature_chunks()[0][0])
    with pytest.raises(ValueError, match=r"'in_memory' names arrays this store does not have: \['node/x'\]"):
        GraphStore.open(tmp_path / "s", in_memory=["node/x"])
    with pytest.raises(ValueError, match="'in_memory' must be True, False, 'auto'"):
        GraphStore.open(tmp_path / "s", in_memory="always")


def test_in_memory_read_of_a_damaged_chunk_names_the_file(tmp_path):
    _write_store(tmp_path / "s")
    chunk = next((tmp_path / "s" / "csc" / "indices" / "c").rglob("*"))
    with open(chunk, "r+b") as fh:
        fh.truncate(fh.seek(0, os.SEEK_END) - 4)
    with pytest.raises(StoreError, match=f"{chunk.name}.*expected 1200"):
        GraphStore.open(tmp_path / "s", in_memory=True).indices  # noqa: B018 - the read raises
