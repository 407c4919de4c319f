"""The halo exchange over real gloo processes on loopback (P=3, Sylvie's ring):

- float32: every rank receives exactly the rows of its halo, and backward adds each halo
  row's gradient into the owner's row once per rank that holds it (the full graph's
  gradient of ``sum(halo * G[halo])``);
- 1/2/4/8 bits and auto: every received value within one quantization step of the true
  row, and every gradient within the sum of the steps of the gradient rows sent back;
- bytes: what the ranks count as sent equals what the receivers' buffers hold, equals
  the documented wire size of the rows moved;
- staleness S=1: a stale epoch returns the last exchanged rows and adds the last received
  halo gradient, moving no bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.ops.partition import metis_partition
from graphpipe.synthetic import community_graph
from graphpipe.train.partition_parallel import local_partition
from graphpipe.train.partition_parallel.launch import free_port

WORLD, DIM = 3, 12
WIDTHS = (32, 8, 4, 2, 1, "auto")


@pytest.fixture(scope="module")
def exchanged(tmp_path_factory: pytest.TempPathFactory):
    sys.path.insert(0, str(Path(__file__).parent))
    import pp_exchange_workers

    tmp = tmp_path_factory.mktemp("exchange")
    g = community_graph(300, 3, avg_degree=5, feature_dim=4, seed=2)
    order = np.argsort(g.dst, kind="stable")
    indptr = np.zeros(g.num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(g.dst, minlength=g.num_nodes), out=indptr[1:])
    indices = g.src[order].astype(np.int64)
    parts = metis_partition(indptr, indices, WORLD, seed=0).parts.astype(np.int64)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(g.num_nodes, DIM)).astype(np.float32)
    grad = rng.normal(size=(g.num_nodes, DIM)).astype(np.float32)
    np.savez(tmp / "data.npz", indptr=indptr, indices=indices, parts=parts, x=x, g=grad)
    torch.multiprocessing.spawn(pp_exchange_workers.exchange_rank,
                                args=(WORLD, free_port(), str(tmp / "data.npz"), str(tmp)),
                                nprocs=WORLD, join=True)
    locs = [local_partition(indptr, indices, parts, r, WORLD) for r in range(WORLD)]
    out = [dict(np.load(tmp / f"rank{r}.npz")) for r in range(WORLD)]
    return locs, out, x, grad


def _expected_grad(locs, rank: int, grad: np.ndarray) -> np.ndarray:
    inner = locs[rank].inner
    want = np.zeros((inner.shape[0], DIM), dtype=np.float64)
    for other in locs:
        if other.rank != rank:
            pos = np.searchsorted(inner, other.halo[other.recv_slice(rank)])
            want[pos] += grad[inner[pos]]
    return want


def test_fp32_exact(exchanged) -> None:
    locs, out, x, grad = exchanged
    for rank, part in enumerate(locs):
        assert part.num_halo > 0
        assert np.array_equal(out[rank]["halo_32"], x[part.halo])
        np.testing.assert_allclose(out[rank]["grad_32"], _expected_grad(locs, rank, grad),
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bits", WIDTHS[1:])
def test_quantized_within_bound(exchanged, bits) -> None:
    locs, out, x, grad = exchanged
    for rank, part in enumerate(locs):
        widths = out[rank][f"recv_bits_{bits}"]
        assert widths.shape == (part.num_halo,)
        if bits != "auto":
            assert (widths == bits).all()
        rows = x[part.halo]
        step = (rows.max(1) - rows.min(1)) / (2.0 ** widths - 1)
        err = np.abs(out[rank][f"halo_{bits}"] - rows).max(1)
        assert (err <= step * (1 + 1e-5) + 1e-6).all()
        assert err.max() > 0  # the rows were quantized, not sent as float32
        # gradient: each contribution within one step of its own (quantized) grad row
        bound = np.zeros(part.num_inner)
        for other in locs:
            if other.rank != rank:
                block = other.halo[other.recv_slice(rank)]
                pos = np.searchsorted(part.inner, block)
                w = out[other.rank][f"recv_bits_{bits}"][other.recv_slice(rank)]
                rows_g = grad[block]
                bound[pos] += (rows_g.max(1) - rows_g.min(1)) / (2.0 ** w - 1)
        gerr = np.abs(out[rank][f"grad_{bits}"] - _expected_grad(locs, rank, grad)).max(1)
        assert (gerr <= bound * (1 + 1e-5) + 1e-5).all()


def test_auto_widths_follow_degree(exchanged) -> None:
    locs, out, _, _ = exchanged
    widths = np.concatenate([out[r]["recv_bits_auto"] for r in range(WORLD)])
    degrees = np.concatenate([p.in_degree[p.num_inner:] for p in locs])
    assert set(np.unique(widths)) <= {1, 2, 4, 8} and len(np.unique(widths)) > 1
    assert degrees[widths == 8].mean() > degrees[widths == 1].mean()
    # sender and receiver agree on every row's width
    for r in range(WORLD):
        for q in range(WORLD):
            if q != r:
                sent = out[q]["send_bits_auto"]
                offsets = np.cumsum([0] + [locs[q].send[p].size for p in range(WORLD)])
                assert np.array_equal(sent[offsets[r]:offsets[r + 1]],
                                      out[r]["recv_bits_auto"][locs[r].recv_slice(q)])


@pytest.mark.parametrize("bits", WIDTHS)
def test_bytes_counted_equal_bytes_sent(exchanged, bits) -> None:
    locs, out, _, _ = exchanged
    stats = np.stack([out[r][f"stats_{bits}"] for r in range(WORLD)]).sum(0)
    sent_fwd, sent_bwd, recv_fwd, recv_bwd = stats.tolist()
    widths = np.concatenate([out[r][f"recv_bits_{bits}"] for r in range(WORLD)])
    wire = sum(4 * DIM if w == 32 else (DIM * int(w) + 7) // 8 + 8 for w in widths)
    assert sent_fwd == recv_fwd == sent_bwd == recv_bwd == wire
    if bits == 32:
        assert wire == 4 * DIM * sum(p.num_halo for p in locs)


def test_stale_epoch_reuses_rows_and_gradient(exchanged) -> None:
    """S=1: epoch 1 reuses epoch 0's halo rows (x, not 2x) and adds epoch 0's halo gradient
    (G, not 2G) to the owners' rows, moving no bytes; epoch 2 exchanges 3x afresh."""
    locs, out, x, grad = exchanged
    for rank, part in enumerate(locs):
        o = out[rank]
        want = _expected_grad(locs, rank, grad)
        assert np.array_equal(o["stale_halo_0"], x[part.halo])
        assert np.array_equal(o["stale_halo_1"], x[part.halo])  # stale: epoch 0's rows
        np.testing.assert_allclose(o["stale_halo_2"], 3 * x[part.halo], rtol=1e-6)
        np.testing.assert_allclose(o["stale_grad_0"], want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(o["stale_grad_1"], want, rtol=1e-6, atol=1e-6)  # cached
        np.testing.assert_allclose(o["stale_grad_2"], 3 * want, rtol=1e-5, atol=1e-5)
        assert int(o["stale_sent_0"]) > 0 and int(o["stale_sent_1"]) == 0
        assert int(o["stale_sent_2"]) == int(o["stale_sent_0"])
        assert o["stale_ages"].tolist() == [0, 1, 0]
