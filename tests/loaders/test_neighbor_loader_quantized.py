"""NeighborLoader with low-bit feature transfer (``feature_bits``): error bound per row,
Match on/off, reuse equal to what the previous batch delivered, byte accounting,
determinism, argument check, and the unchanged full-precision path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.loaders import NeighborLoader
from graphpipe.ops.features.quantize import dequantize, quantize
from graphpipe.ops.features.quantize.torch import dequantize_on
from graphpipe.store import GraphStore, StoreWriter

N, DIM, CHUNK_ROWS = 2000, 24, 256
FANOUTS = [5, 4]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    path: Path = tmp_path_factory.mktemp("qloader") / "store"
    rng = np.random.default_rng(0)
    deg = rng.integers(0, 12, size=N)
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    weights = 1.0 / np.arange(1, N + 1) ** 0.8
    weights /= weights.sum()
    indices = np.concatenate([np.sort(rng.choice(N, size=int(d), replace=False, p=weights))
                              for d in deg]).astype(np.int32)
    x = (rng.standard_normal((N, DIM)) * rng.uniform(0.1, 5.0, size=(N, 1))).astype(np.float32)
    x[7] = 1.5  # a constant row: exact after quantization
    perm = rng.permutation(N)
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("csc/edge_id", np.arange(len(indices), dtype=np.int64))
        w.write_array("node/feat", x, chunk_rows=CHUNK_ROWS)
        w.write_array("node/label", rng.integers(0, 5, size=N).astype(np.int64))
        w.write_splits({"train": np.sort(perm[:1200]), "valid": np.sort(perm[1200:1600]),
                        "test": np.sort(perm[1600:])})
        w.manifest["num_nodes"], w.manifest["num_edges"] = N, len(indices)
        w.manifest["node_features"] = {"dim": DIM, "dtype": "float32"}
        w.manifest["labels"] = {"shape": [N], "dtype": "int64", "task_type": "multiclass",
                                "num_classes": 5}
        w.commit()
    return GraphStore.open(path)


def _features(store: GraphStore, n_id: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.asarray(store.features(n_id.numpy()), dtype=np.float32))


def _bound(true: torch.Tensor, bits: int) -> torch.Tensor:
    """Per-row scale ``(max - min) / (2^bits - 1)``, with float32 slack of the dequantize."""
    scale = (true.max(dim=1).values - true.min(dim=1).values) / ((1 << bits) - 1)
    slack = 1e-5 * true.abs().max(dim=1).values
    return (scale + slack).unsqueeze(1)


@pytest.mark.parametrize("match_reorder", [True, False])
@pytest.mark.parametrize("cache", [None, "degree"])
def test_8bit_error_within_row_scale(store: GraphStore, match_reorder, cache) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=100, seed=3, feature_bits=8, window=4,
                            match_reorder=match_reorder, cache=cache, cache_rows=0.1, input_nodes="train", shuffle=True)
    batches = list(loader)
    assert len(batches) == len(loader)
    for b in batches:
        true = _features(store, b.n_id)
        assert b.x.dtype == torch.float32 and b.x.shape == true.shape
        assert bool(((b.x - true).abs() <= _bound(true, 8)).all())
        assert not torch.equal(b.x, true)  # it was quantized
        row7 = (b.n_id == 7).nonzero()
        if len(row7):
            assert torch.equal(b.x[row7[0, 0]], true[row7[0, 0]])
    stats = loader.stats
    assert stats.rows_needed == stats.rows_gathered + stats.rows_reused + stats.rows_cached
    if match_reorder:
        assert stats.rows_reused > 0
    else:
        assert stats.rows_reused == 0


@pytest.mark.parametrize("bits", [4, 2, 1])
def test_low_bits_within_row_scale(store: GraphStore, bits: int) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=150, seed=1, feature_bits=bits, cache="degree", input_nodes="train", shuffle=True)
    for b in loader:
        true = _features(store, b.n_id)
        assert bool(((b.x - true).abs() <= _bound(true, bits)).all())


def test_reused_rows_equal_previous_delivery(store: GraphStore) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=100, seed=5, feature_bits=4, window=4, prefetch=0, input_nodes="train", shuffle=True,
                            match_reorder=True)
    prev = None
    checked = 0
    for b in loader:
        if prev is not None:
            where = {int(v): i for i, v in enumerate(prev.n_id.tolist())}
            pairs = [(i, where[int(v)]) for i, v in enumerate(b.n_id.tolist()) if int(v) in where]
            if pairs:
                now, before = (torch.tensor(c) for c in zip(*pairs))
                assert torch.equal(b.x[now], prev.x[before])
                checked += len(pairs)
        prev = b
    assert checked > 0 and loader.stats.rows_reused > 0


def test_bytes_accounting(store: GraphStore) -> None:
    full = NeighborLoader(store, FANOUTS, batch_size=100, seed=2, input_nodes="train", shuffle=True)
    list(full)
    s32 = full.stats.as_dict()
    assert s32["feature_bytes_gathered"] == s32["feature_bytes_full"] == s32["rows_gathered"] * DIM * 4
    q = NeighborLoader(store, FANOUTS, batch_size=100, seed=2, feature_bits=8, input_nodes="train", shuffle=True)
    list(q)
    s8 = q.stats.as_dict()
    assert s8["rows_gathered"] == s32["rows_gathered"]  # same batches, same reuse
    assert s8["feature_bytes_full"] == s32["feature_bytes_full"]
    assert s8["feature_bytes_gathered"] == s8["rows_gathered"] * (DIM + 8)  # 1/4 + min + scale
    q4 = NeighborLoader(store, FANOUTS, batch_size=100, seed=2, feature_bits=4, input_nodes="train", shuffle=True)
    list(q4)
    assert q4.stats.feature_bytes_gathered == q4.stats.rows_gathered * (DIM // 2 + 8)


def test_same_seed_same_batches(store: GraphStore) -> None:
    def run(seed: int, prefetch: int) -> list:
        loader = NeighborLoader(store, FANOUTS, batch_size=100, seed=seed, feature_bits=2, cache="degree",
                                prefetch=prefetch, input_nodes="train", shuffle=True)
        return [list(loader) for _ in range(2)]

    a, b = run(11, 2), run(11, 0)
    for ea, eb in zip(a, b):
        assert len(ea) == len(eb)
        for p, q in zip(ea, eb):
            assert torch.equal(p.n_id, q.n_id) and torch.equal(p.x, q.x)


@pytest.mark.parametrize("bad", [0, 3, 16, 32, 8.0, "8", True])
def test_bad_feature_bits(store: GraphStore, bad) -> None:
    with pytest.raises(ValueError, match=r"feature_bits.*" + repr(bad).replace(".", r"\.")):
        NeighborLoader(store, FANOUTS, batch_size=100, feature_bits=bad, input_nodes="train", shuffle=True)


@pytest.mark.parametrize("match_reorder", [True, False])
def test_full_precision_unchanged(store: GraphStore, match_reorder) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=100, seed=4, cache="degree", match_reorder=match_reorder, input_nodes="train", shuffle=True)
    for b in loader:
        assert torch.equal(b.x, _features(store, b.n_id))


def test_quantized_batch_survives_in_place_edit(store: GraphStore) -> None:
    """Reuse reads the loader's packed rows, so editing a delivered x does not corrupt the next."""
    loader = NeighborLoader(store, FANOUTS, batch_size=100, seed=6, feature_bits=8, prefetch=0, input_nodes="train", shuffle=True)
    for b in loader:
        true = _features(store, b.n_id)
        assert bool(((b.x - true).abs() <= _bound(true, 8)).all())
        b.x.mul_(0)


@pytest.mark.parametrize("bits", [8, 4, 2, 1])
def test_device_dequantize_matches_kernel(bits: int) -> None:
    """The torch dequantizer ``transfer`` runs on a non-CPU device equals the Numba kernel."""
    x = torch.from_numpy(np.random.default_rng(bits).standard_normal((37, 13)).astype(np.float32))
    q = quantize(x, bits, seed=9)
    assert torch.equal(dequantize_on(q.packed, q.mins, q.scales, bits, 13), dequantize(q))
