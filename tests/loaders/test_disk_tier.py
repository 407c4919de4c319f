"""The loader's disk tier (:mod:`graphpipe.loaders.feature_tier`): with ``features="disk"``
batches carry ``X[n_id]`` bit for bit (Match-Reorder, the degree cache, the CLOCK cache
and prefetch on top) and the stats count rows from memory, cache and disk; with the
default ``features=True`` a process capped by ``memlimit.sh`` below its store's features
reads them from disk (skipped where memlimit.sh cannot make a cgroup)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.loaders import NeighborLoader, feature_tier
from graphpipe.loaders.feature_tier import choose_tier
from graphpipe.loaders.graph_data import resolve_graph_data
from graphpipe.loaders.rows import CachedRows, ChunkedRows, DegreeCachedRows, DiskRows
from graphpipe.store import GraphStore, StoreWriter

MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or
                Path(__file__).resolve().parents[3] / "shared" / "tools" / "memlimit.sh")


def _write_store(path: Path, n: int, dim: int, degree: int = 6, dtype: str = "float32") -> np.ndarray:
    rng = np.random.default_rng(0)
    indptr = np.arange(0, (n + 1) * degree, degree, dtype=np.int64)
    hubs = rng.integers(0, n, size=n // 20 + 1)
    indices = np.where(rng.random(n * degree) < 0.5, rng.choice(hubs, n * degree),
                       rng.integers(0, n, n * degree)).astype(np.int32)
    x = rng.standard_normal((n, dim)).astype(dtype)
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("node/feat", x, chunk_rows=1000)
        w.write_splits({"train": np.arange(0, n, 2, dtype=np.int64)})
        w.manifest["num_nodes"], w.manifest["num_edges"] = n, len(indices)
        w.manifest["node_features"] = {"dim": dim, "dtype": dtype}
        w.commit()
    return x


@pytest.mark.parametrize("tier", ["memory", "disk"])
@pytest.mark.parametrize("cache", [None, "degree"])
def test_float16_rows_bit_for_bit(tmp_path: Path, tier: str, cache) -> None:
    """float16 features (MAG240M's dtype) are gathered, cached and read from disk as float16:
    half the bytes, no float32 copy of the table; the batch equals ``X[n_id]`` bit for bit."""
    x = _write_store(tmp_path / "s", 3000, 8, dtype="float16")
    loader = NeighborLoader(tmp_path / "s", [4, 3], batch_size=200, features=tier, cache=cache,
                            cache_rows=0.05, seed=1, input_nodes="train", shuffle=True)
    for batch in loader:
        assert batch.x.dtype == torch.float16
        assert np.array_equal(batch.x.numpy().view(np.uint16), x[batch.n_id.numpy()].view(np.uint16))
    stats = loader.stats
    assert stats.feature_bytes_gathered == stats.rows_gathered * 8 * 2   # 2 bytes a value
    if tier == "disk":
        assert stats.rows_disk > 0 and stats.disk_bytes_read > 0


@pytest.mark.parametrize("cache", [None, "degree"])
@pytest.mark.parametrize("match_reorder", [True, False])
def test_disk_tier_batches_are_the_rows(tmp_path: Path, cache, match_reorder, monkeypatch) -> None:
    monkeypatch.setattr(feature_tier, "STATIC_SHARE", 0.0)  # all CLOCK: the whole store fits
    x = _write_store(tmp_path / "s", 5000, 12)
    loader = NeighborLoader(tmp_path / "s", [4, 3], batch_size=200, features="disk", cache=cache, cache_rows=0.05,
                            match_reorder=match_reorder, window=4, seed=1, prefetch=1, input_nodes="train", shuffle=True)
    disk = loader.rows.backing if cache == "degree" else loader.rows
    assert isinstance(disk, CachedRows) and isinstance(disk.source, DiskRows)
    disk_rows = []
    for epoch in range(2):
        for batch in loader:
            n_id = batch.n_id.numpy()
            assert batch.x.dtype == torch.float32
            assert np.array_equal(batch.x.numpy().view(np.uint32), x[n_id].view(np.uint32))
        s = loader.stats
        assert s.rows_needed == s.rows_gathered + s.rows_reused + s.rows_cached
        assert s.rows_gathered == s.rows_cache_hits + s.rows_disk  # distinct per batch: no repeats
        # bytes actually read: whole O_DIRECT blocks around each 48-byte row (or exact, buffered)
        assert s.rows_disk * 12 * 4 <= s.disk_bytes_read <= s.rows_disk * 2 * 4096 and s.disk_read_s > 0
        assert s.rows_disk > 0 and 0.0 < s.hit_rate < 1.0
        assert s.as_dict()["hit_rate"] == s.hit_rate
        disk_rows.append(s.rows_disk)
    # the CLOCK cache holds all 5000 rows: each row comes from disk once, the first time
    assert sum(disk_rows) <= 5000 and disk_rows[1] < disk_rows[0] // 10


def test_tier_choice(tmp_path: Path) -> None:
    _write_store(tmp_path / "s", 300, 4)
    loader = NeighborLoader(tmp_path / "s", [2], batch_size=50, input_nodes="train", shuffle=True)  # small: memory
    assert isinstance(loader.rows, ChunkedRows)
    assert choose_tier(loader.graph, True) == "memory"
    small = NeighborLoader(tmp_path / "s", [2], batch_size=50, features="disk", cache="degree", cache_rows=10,
                           input_nodes="train", shuffle=True)
    tier = small.rows.backing  # the loader's degree cache wraps the disk tier's hot set + CLOCK
    assert isinstance(small.rows, DegreeCachedRows) and isinstance(tier, DegreeCachedRows)
    assert isinstance(tier.backing, CachedRows) and isinstance(tier.backing.source, DiskRows)
    store = GraphStore.open(tmp_path / "s")
    train, infer = (NeighborLoader(store, [2], batch_size=50, features="disk", input_nodes="train", shuffle=True),
                    NeighborLoader(store, [-1], batch_size=50, features="disk", input_nodes=None, shuffle=True))
    assert train.rows is infer.rows  # one disk tier and cache per store, not per loader
    with pytest.raises(ValueError, match="'features'"):
        NeighborLoader(tmp_path / "s", [2], batch_size=50, features="ssd", input_nodes="train", shuffle=True)
    arrays = {"indptr": loader.graph.indptr, "indices": loader.graph.indices,
              "x": np.zeros((300, 4), np.float32)}
    with pytest.raises(ValueError, match="needs a store"):
        NeighborLoader(arrays, [2], batch_size=50, features="disk", input_nodes=None, shuffle=True)


_CHILD = """
import sys
import numpy as np
from graphpipe.loaders import NeighborLoader
from graphpipe.store import GraphStore
loader = NeighborLoader(sys.argv[1], [5, 5], batch_size=256, input_nodes="train", shuffle=True, seed=0)
store = GraphStore.open(sys.argv[1])
for i, batch in enumerate(loader):
    n_id = batch.n_id.numpy()
    assert np.array_equal(batch.x.numpy(), store.features(n_id))
    if i == 3:
        break
print(type(loader.rows).__name__, loader.stats.rows_disk > 0)
"""


@pytest.mark.skipif(not MEMLIMIT.is_file(), reason="memlimit.sh not on this machine")
def test_default_is_the_disk_tier_under_a_cap(tmp_path: Path) -> None:
    _write_store(tmp_path / "s", 330_000, 128, degree=2)  # 169 MB of features
    proc = subprocess.run([str(MEMLIMIT), "--keep-caches", "350M", sys.executable, "-c", _CHILD,
                           str(tmp_path / "s")], check=False, capture_output=True, text=True, timeout=300)
    if proc.returncode == 3:
        pytest.skip(f"memlimit.sh cannot make a memory cgroup here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["DegreeCachedRows", "True"]


def test_default_tier_is_a_hot_set_by_degree_then_clock(tmp_path: Path) -> None:
    """The default disk tier: the ``STATIC_SHARE`` of the cache holds the nodes of highest
    in-degree (read with one bulk scan, bit for bit), CLOCK the rest; batches stay X[n_id]."""
    x = _write_store(tmp_path / "s", 4000, 12)
    store = GraphStore.open(tmp_path / "s")
    data = resolve_graph_data(store)
    rows = feature_tier.feature_source(data, "disk", cache_rows=1000)
    assert isinstance(rows, DegreeCachedRows) and len(rows) == int(1000 * feature_tier.STATIC_SHARE)
    assert isinstance(rows.backing, CachedRows) and rows.backing.capacity == 1000 - len(rows)
    deg = np.diff(data.indptr)
    assert deg[rows.ids].min() >= np.sort(deg)[::-1][len(rows) - 1]  # the highest in-degrees
    assert np.array_equal(rows.held_rows.view(np.uint32), x[rows.ids].view(np.uint32))
    loader = NeighborLoader(store, [4, 3], batch_size=200, features="disk", seed=3, window=4)
    for batch in loader:
        assert np.array_equal(batch.x.numpy().view(np.uint32), x[batch.n_id.numpy()].view(np.uint32))
    s = loader.stats
    assert s.rows_cached > 0 and s.rows_needed == s.rows_gathered + s.rows_reused + s.rows_cached
    with pytest.raises(ValueError, match="static_share"):
        feature_tier.feature_source(data, "disk", static_share=1.5)


def test_progress_bar_shows_the_hit_rate(tmp_path: Path) -> None:
    _write_store(tmp_path / "s", 2000, 4)
    loader = NeighborLoader(tmp_path / "s", [3], batch_size=100, features="disk", progress=True, prefetch=0, seed=2, input_nodes="train", shuffle=True)
    it = iter(loader)
    for _ in it:
        bar, task = it._bar
        assert bar.tasks[0].fields["hit"] == f"{loader.stats.hit_rate:.0%}"
        assert bar.tasks[0].id == task
    assert loader.stats.rows_disk > 0


@pytest.mark.parametrize("cache", [None, "degree"])
def test_disk_tier_on_the_device_assembly_path(tmp_path: Path, cache) -> None:
    """The CUDA path (store rows staged from the backing source, the rest assembled by the
    transfer stage) run on the CPU over the disk tier: the same rows, bit for bit."""
    x = _write_store(tmp_path / "s", 3000, 8)
    loader = NeighborLoader(tmp_path / "s", [4, 3], batch_size=150, window=4, seed=21, cache=cache,
                            cache_rows=0.05, prefetch=2, features="disk", input_nodes="train", shuffle=True,
                            match_reorder=True)  # what "auto" gives on a CUDA device
    loader.gather.on_device = True  # what device="cuda" selects
    for _ in range(2):
        for batch in loader:
            assert np.array_equal(batch.x.numpy().view(np.uint32), x[batch.n_id.numpy()].view(np.uint32))
        s = loader.stats
        assert s.rows_needed == s.rows_gathered + s.rows_reused + s.rows_cached and s.rows_reused > 0


def test_topology_left_on_disk_gives_the_same_batches(tmp_path: Path) -> None:
    """A store opened with ``in_memory=False`` (CSC arrays as memory maps, what a cap
    smaller than the topology leaves) samples the same batches as one in memory, and the
    disk tier's rows are X[n_id] bit for bit."""
    x = _write_store(tmp_path / "s", 3000, 8)
    on_disk = GraphStore.open(tmp_path / "s", in_memory=False)
    in_ram = GraphStore.open(tmp_path / "s", in_memory=True)
    assert "csc/indices" not in on_disk.in_memory_arrays and "csc/indices" in in_ram.in_memory_arrays
    a = NeighborLoader(on_disk, [4, 3], batch_size=150, features="disk", seed=5, window=4)
    b = NeighborLoader(in_ram, [4, 3], batch_size=150, features="memory", seed=5, window=4)
    for got, want in zip(a, b, strict=True):
        assert np.array_equal(got.n_id.numpy(), want.n_id.numpy())
        assert np.array_equal(got.x.numpy().view(np.uint32), x[got.n_id.numpy()].view(np.uint32))


def test_first_epoch_planned_during_the_fill_gives_the_same_batches(tmp_path: Path) -> None:
    """With a fixed seed the disk tier cuts epoch 0's batches in a thread while it fills the
    hot set: the first epoch is the one a memory-tier loader (no plan ahead) gives, batch
    for batch; a seed changed before iterating is not served the stale plan."""
    x = _write_store(tmp_path / "s", 3000, 8)
    kwargs = {"batch_size": 128, "input_nodes": "train", "shuffle": True, "window": 4}
    disk = NeighborLoader(tmp_path / "s", [4, 3], features="disk", seed=5, **kwargs)
    assert disk._planned is not None and disk._planned[0][0] == 5
    memory = NeighborLoader(tmp_path / "s", [4, 3], features="memory", seed=5, **kwargs)
    assert memory._planned is None
    batches = 0
    for got, want in zip(disk, memory, strict=True):
        assert torch.equal(got.n_id, want.n_id) and torch.equal(got.input_id, want.input_id)
        assert np.array_equal(got.x.numpy().view(np.uint32), x[got.n_id.numpy()].view(np.uint32))
        batches += 1
    assert batches == len(memory) == 12 and disk._planned is None
    reseeded = NeighborLoader(tmp_path / "s", [4, 3], features="disk", seed=5, **kwargs)
    reseeded.seed = 6
    other = NeighborLoader(tmp_path / "s", [4, 3], features="memory", seed=6, **kwargs)
    assert [b.seeds.tolist() for b in reseeded] == [b.seeds.tolist() for b in other]
