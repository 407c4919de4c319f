"""Sparse int64 IDs are mapped, a declared N far above the edges needs a flag, a full disk
is one line and no partial store (issue 14.5)."""

from __future__ import annotations

import gzip
import os
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.ingest.edgelist import SPARSE_IDS_FLOOR, ids_are_sparse, read_edge_list
from graphpipe.ingest.errors import IngestError
from graphpipe.store import GraphStore
from graphpipe.store.validate import validate

BASE = 9_000_000_000_000


def _random_edges(n: int, e: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``e`` random edges over ``0..n-1`` in which every node appears."""
    rng = np.random.default_rng(seed)
    src = np.concatenate([np.arange(n), rng.integers(0, n, e - n)])
    dst = np.concatenate([rng.permutation(n), rng.integers(0, n, e - n)])
    return src, dst


def _write(path: Path, src: np.ndarray, dst: np.ndarray) -> Path:
    path.write_text("src,dst\n" + "".join(f"{s},{d}\n" for s, d in zip(src.tolist(), dst.tolist())))
    return path


def _ingest(*args: str):
    return CliRunner().invoke(cli, ["ingest", *map(str, args), "--quiet"])


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output
    return lines[0]


def test_sparse_rule():
    assert not ids_are_sparse(SPARSE_IDS_FLOOR - 1, 1)              # small ID spaces stay dense
    assert not ids_are_sparse(16 * 10**6 - 1, 10**6)               # 16M IDs, 1M edges: 1 in 8 possible
    assert ids_are_sparse(16 * 10**6, 10**6)
    assert ids_are_sparse(BASE, 10**6)


def test_sparse_ids_are_mapped_and_match_the_dense_store(tmp_path):
    """IDs 9e12 + 1_000_003 * i are mapped; the store equals the dense one modulo the ID map."""
    n = 300
    src, dst = _random_edges(n, 2000, seed=1)
    external = BASE + 1_000_003 * np.arange(n, dtype=np.int64)       # increasing: rank = i
    dense = ingest(_write(tmp_path / "dense.csv", src, dst), tmp_path / "dense")
    result = _ingest(_write(tmp_path / "sparse.csv", external[src], external[dst]), tmp_path / "sparse")
    assert result.exit_code == 0, result.output
    sparse = GraphStore.open(tmp_path / "sparse")
    assert sparse.num_nodes == n and sparse.num_edges == 2000 and validate(sparse.path) == []
    np.testing.assert_array_equal(sparse.indptr, dense.indptr)
    np.testing.assert_array_equal(sparse.indices, dense.indices)
    np.testing.assert_array_equal(sparse.id_map.to_external(np.arange(n)), external)
    np.testing.assert_array_equal(sparse.id_map.to_dense(external[[5, 0, 299]]), [5, 0, 299])
    assert sparse.manifest["provenance"]["ids_mapped"] == "sparse integer IDs"
    assert os.path.getsize(tmp_path / "sparse" / "csc" / "indptr" / "c" / "0") == (n + 1) * 8


def test_dense_ids_stay_dense(tmp_path):
    src, dst = _random_edges(50, 200, seed=2)
    store = ingest(_write(tmp_path / "e.csv", src, dst), tmp_path / "s")
    assert store.num_nodes == 50 and store.id_map.is_identity


def test_explicit_dense_sparse_ids_need_the_flag(tmp_path):
    """map_ids=False keeps 9e12 as a dense ID: refused before any allocation without the flag."""
    path = _write(tmp_path / "e.csv", np.array([BASE, 1]), np.array([1, 2]))
    source = read_edge_list(path, map_ids=False)
    assert source.num_nodes == BASE + 1
    with pytest.raises(IngestError, match=r"e\.csv: 9,000,000,000,001 nodes declared, but the 2 edges "
                                          r"touch at most 4; pass --allow-isolated-nodes"):
        ingest(source, tmp_path / "s")
    assert not (tmp_path / "s").exists()


def _npz(path: Path, num_nodes: int) -> Path:
    np.savez(path, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), num_nodes=np.int64(num_nodes))
    return path


def test_declared_num_nodes_needs_the_flag(tmp_path):
    huge = _npz(tmp_path / "huge.npz", BASE)
    line = _one_line_error(_ingest(huge, tmp_path / "s"))
    assert "huge.npz: num_nodes: 9,000,000,000,000 nodes declared" in line and "--allow-isolated-nodes" in line
    assert not (tmp_path / "s").exists()
    big = _npz(tmp_path / "big.npz", 3 * SPARSE_IDS_FLOOR)
    _one_line_error(_ingest(big, tmp_path / "s"))
    result = _ingest(big, tmp_path / "s", "--allow-isolated-nodes")
    assert result.exit_code == 0, result.output
    store = GraphStore.open(tmp_path / "s")
    assert store.num_nodes == 3 * SPARSE_IDS_FLOOR and store.num_edges == 3
    small = _npz(tmp_path / "small.npz", 1000)                    # under the floor: no flag needed
    assert _ingest(small, tmp_path / "t").exit_code == 0


def test_ogb_declared_num_nodes_needs_the_flag(tmp_path):
    raw = tmp_path / "ogbn-x" / "raw"
    raw.mkdir(parents=True)
    for name, text in (("edge.csv.gz", "0,1\n1,2\n"), ("num-node-list.csv.gz", f"{BASE}\n"),
                       ("num-edge-list.csv.gz", "2\n")):
        (raw / name).write_bytes(gzip.compress(text.encode()))
    line = _one_line_error(_ingest(tmp_path / "ogbn-x", tmp_path / "s"))
    assert "raw/num-node-list.csv.gz: 9,000,000,000,000 nodes declared" in line


@pytest.fixture
def small_disk(tmp_path):
    """A real 2 MiB tmpfs (needs root); unmounted afterwards."""
    mount_point = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_disk_full_is_one_line_and_leaves_nothing(tmp_path, small_disk):
    src, dst = _random_edges(1000, 800_000, seed=3)            # 3.2 MB of int32 indices: not in 2 MiB
    big = tmp_path / "big.npz"
    np.savez(big, edge_index=np.stack([src, dst]))
    line = _one_line_error(_ingest(big, small_disk / "s"))
    assert line.startswith(f"error: {small_disk / 's'}: cannot write the store: no space left on device")
    assert os.listdir(small_disk) == []                          # no partial store, no temporary


def test_disk_full_during_overwrite_keeps_the_old_store(tmp_path, small_disk):
    old = ingest(_write(tmp_path / "e.csv", *_random_edges(20, 40, seed=4)), small_disk / "s")
    old_indices = np.array(old.indices)
    src, dst = _random_edges(1000, 800_000, seed=5)            # 3.2 MB of int32 indices
    np.savez(tmp_path / "big.npz", edge_index=np.stack([src, dst]))
    _one_line_error(_ingest(tmp_path / "big.npz", small_disk / "s", "--overwrite"))
    assert os.listdir(small_disk) == ["s"] and validate(small_disk / "s") == []
    np.testing.assert_array_equal(GraphStore.open(small_disk / "s").indices, old_indices)
