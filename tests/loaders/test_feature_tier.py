"""The per-tier default of ``match_reorder`` (:func:`graphpipe.loaders.feature_tier.auto_match_reorder`):
which tier and device give which setting, the tier read off a row source's chain, and a
loader left at ``match_reorder="auto"`` yielding exactly the batches of the explicit
setting it resolves to (issue 19: a default never changes results)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphpipe.loaders import NeighborLoader
from graphpipe.loaders.feature_tier import MATCH_REORDER_AUTO, auto_match_reorder, row_tier
from graphpipe.store import StoreWriter

N, DIM = 3000, 6


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hub-heavy graph (batches overlap, so Match reuses rows and Reorder permutes)."""
    path = tmp_path_factory.mktemp("tier") / "s"
    rng = np.random.default_rng(0)
    indptr = np.arange(0, (N + 1) * 5, 5, dtype=np.int64)
    hubs = rng.integers(0, N, size=60)
    indices = np.where(rng.random(N * 5) < 0.6, rng.choice(hubs, N * 5),
                       rng.integers(0, N, N * 5)).astype(np.int32)
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("node/feat", rng.standard_normal((N, DIM)).astype(np.float32), chunk_rows=500)
        w.write_splits({"train": np.arange(0, N, 2, dtype=np.int64)})
        w.manifest["num_nodes"], w.manifest["num_edges"] = N, len(indices)
        w.manifest["node_features"] = {"dim": DIM, "dtype": "float32"}
        w.commit()
    return path


def test_auto_setting_per_tier_and_device() -> None:
    assert auto_match_reorder("memory", "cpu") is False
    assert auto_match_reorder("disk", "cpu") is False
    assert auto_match_reorder("memory", "cuda") is True and auto_match_reorder("disk", "cuda") is True
    assert MATCH_REORDER_AUTO == {"memory": False, "disk": False, "gpu": True}
    with pytest.raises(ValueError, match="'tier'"):
        auto_match_reorder("ssd", "cpu")


@pytest.mark.parametrize("features,cache,bits,tier", [
    ("memory", None, None, "memory"), ("memory", "degree", 8, "memory"),
    ("disk", None, None, "disk"), ("disk", "degree", 8, "disk")])
def test_row_tier_reads_the_wrapper_chain(store_path: Path, features, cache, bits, tier) -> None:
    loader = NeighborLoader(store_path, [3], batch_size=64, features=features, cache=cache, feature_bits=bits)
    assert row_tier(loader.rows) == tier
    assert loader.match_reorder == auto_match_reorder(tier, "cpu")
    assert row_tier(None) == "memory"


def _epochs(loader: NeighborLoader) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(b.n_id.numpy().copy(), b.x.numpy().view(np.uint32).copy()) for _ in range(2) for b in loader]


@pytest.mark.parametrize("features", ["memory", "disk"])
@pytest.mark.parametrize("shuffle", [True, False])
def test_auto_gives_the_batches_of_the_setting_it_resolves_to(store_path: Path, features, shuffle) -> None:
    kwargs = {"batch_size": 100, "input_nodes": "train", "shuffle": shuffle, "seed": 5, "window": 4,
              "features": features, "cache": "degree", "cache_rows": 0.05}
    auto = NeighborLoader(store_path, [4, 3], **kwargs)
    assert auto.match_reorder is auto_match_reorder(features, "cpu") is False
    explicit = NeighborLoader(store_path, [4, 3], match_reorder=auto.match_reorder, **kwargs)
    got, want = _epochs(auto), _epochs(explicit)
    assert len(got) == len(want) and all(np.array_equal(a, b) for pa, pb in zip(got, want)
                                         for a, b in zip(pa, pb))
    # every setting delivers the same batches: Reorder may only permute a shuffled epoch
    reorder = _epochs(NeighborLoader(store_path, [4, 3], match_reorder=True, **kwargs))
    key = [tuple(n_id.tolist()) for n_id, _ in got]
    assert sorted(key) == sorted(tuple(n_id.tolist()) for n_id, _ in reorder)
    if not shuffle:
        assert key == [tuple(n_id.tolist()) for n_id, _ in reorder]


def test_auto_is_recorded_and_bad_values_refused(store_path: Path) -> None:
    loader = NeighborLoader(store_path, [3], batch_size=64, features="memory")
    assert "match_reorder=False" in repr(loader)
    with pytest.raises(ValueError, match="'match_reorder' must be 'auto'"):
        NeighborLoader(store_path, [3], batch_size=64, match_reorder="reorder")


def test_read_ahead_advises_the_mapped_topology_only(store_path: Path, tmp_path: Path) -> None:
    """The disk tier's cold-start readahead covers every chunk file of the memory-mapped
    CSC arrays (one relation here, every relation of a typed store) and nothing of a store
    whose topology was read into memory."""
    from graphpipe.loaders.feature_tier import (
        mapped_topology_bytes,
        mapped_topology_keys,
        read_ahead_topology,
    )
    from graphpipe.store import GraphStore
    from graphpipe.store.writer import TypedStoreWriter

    mapped = GraphStore.open(store_path, in_memory=False)
    assert mapped_topology_keys(mapped) == ["csc/indptr", "csc/indices"]
    assert read_ahead_topology(mapped) == 2 and mapped_topology_bytes(mapped) == (N + 1) * 8 + N * 5 * 4
    loaded = GraphStore.open(store_path, in_memory=["csc/indptr", "csc/indices"])
    assert mapped_topology_keys(loaded) == [] and read_ahead_topology(loaded) == 0
    with TypedStoreWriter(tmp_path / "t", {"a": 4, "b": 3}) as w:
        w.add_relation(("a", "r", "b"), np.array([0, 3]), np.array([1, 2]))
        w.add_relation(("b", "q", "a"), np.array([2]), np.array([0]))
        w.commit()
    typed = GraphStore.open(tmp_path / "t", in_memory=False)
    assert len(mapped_topology_keys(typed)) == 4 and read_ahead_topology(typed) == 4
