"""GPU sampler and Fused-Map kernels (graphpipe.ops.sampling.cuda) under Numba's CUDA simulator.

NUMBA_ENABLE_CUDASIM must be set before numba is imported, and other test modules import
numba first, so the checks run in one subprocess: this file executed as a script. Each
``check_*`` function is one case (fastgl.md 10.2 M1-M9 and CPU/GPU equivalence); the
pytest side reports each case separately.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CASES = [
    "hop_matches_cpu_with_host_draws",
    "hop_device_keys_match_cpu",
    "sample_matches_cpu_up_to_relabelling",
    "fused_map_m1_m5_m7",
    "fused_map_stability_m6",
    "adversarial_collisions_m8",
    "fig8_example_m9",
    "relabel_kernel",
    "value_errors",
    "typed_equals_cpu",
]


@pytest.fixture(scope="module")
def sim_results() -> dict:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve())], capture_output=True, text=True, check=False,
                          env=env, cwd=str(ROOT), timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", CASES)
def test_cudasim(sim_results: dict, name: str) -> None:
    assert name in sim_results, f"case {name} did not run"
    assert sim_results[name] == "ok", sim_results[name]


# --------------------------------------------------------------------------------------
# the checks (run only inside the simulator subprocess)


def _graph(seed: int = 0, num_nodes: int = 120):
    import numpy as np

    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, 700)
    dst = rng.integers(0, num_nodes - 10, 700)  # last 10 nodes: in-degree 0
    src = np.concatenate([src, rng.choice(num_nodes, 60, replace=False)])
    dst = np.concatenate([dst, np.zeros(60, np.int64)])  # node 0: in-degree >= 60
    order = np.argsort(dst, kind="stable")
    indices = src[order].astype(np.int32)
    indptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, indices


def check_hop_matches_cpu_with_host_draws() -> None:
    import numpy as np

    from graphpipe.ops.sampling import sample_hop_global
    from graphpipe.ops.sampling.cuda import sample_hop_global_cuda

    indptr, indices = _graph(1)
    dst = np.array([0, 3, 0, 119, 50, 7])
    keys = np.random.default_rng(5).integers(0, 2**63, dst.size, dtype=np.int64).astype(np.uint64)
    for fanout, replace in [(3, False), (40, False), (4, True), (-1, False), (0, False)]:
        gpu = sample_hop_global_cuda(indptr, indices, dst, fanout, replace=replace, stream_keys=keys)
        cpu = sample_hop_global(indptr, indices, dst, fanout, replace=replace, stream_keys=keys)
        for name, g, c in zip(["indptr", "src", "edge_ids"], gpu, cpu):
            assert np.array_equal(g, c), (fanout, replace, name, g, c)


def check_hop_device_keys_match_cpu() -> None:
    import numpy as np

    from graphpipe.ops.sampling import batch_key, hop_key, sample_hop_global, stream_keys
    from graphpipe.ops.sampling.cuda import sample_hop_global_cuda

    indptr, indices = _graph(2)
    dst = np.arange(0, 120, 7)
    hk = hop_key(batch_key(42), 1)
    gpu = sample_hop_global_cuda(indptr, indices, dst, 5, hop_key_value=hk)
    cpu = sample_hop_global(indptr, indices, dst, 5, stream_keys=stream_keys(hk, dst))
    for g, c in zip(gpu, cpu):
        assert np.array_equal(g, c)


def _canonical(out, indptr, indices):
    """Per block: {global dst: list of edge ids in sampled order}, and the global sources agree."""
    import numpy as np

    blocks = []
    for blk in out.blocks:
        per_dst = {}
        for d in range(blk.num_dst):
            lo, hi = int(blk.indptr[d]), int(blk.indptr[d + 1])
            eids = blk.edge_ids[lo:hi]
            assert np.array_equal(indices[eids].astype(np.int64), out.n_id[blk.indices[lo:hi]])
            per_dst[int(out.n_id[d])] = eids.tolist()
        blocks.append(per_dst)
    return blocks


def check_sample_matches_cpu_up_to_relabelling() -> None:
    import numpy as np

    from graphpipe.ops.sampling import sample_neighbors
    from graphpipe.ops.sampling.cuda import sample_neighbors_cuda

    indptr, indices = _graph(3)
    seeds = np.array([0, 17, 119, 64, 5, 33])
    for fanouts, replace in [([4, 3], False), ([2, 2, 2], True), ([-1], False)]:
        gpu = sample_neighbors_cuda(indptr, indices, seeds, fanouts, replace=replace, seed=7)
        cpu = sample_neighbors(indptr, indices, seeds, fanouts, replace=replace, seed=7)
        assert np.array_equal(gpu.n_id[: len(seeds)], seeds)
        assert np.unique(gpu.n_id).size == gpu.n_id.size
        assert gpu.num_sampled_nodes == cpu.num_sampled_nodes
        assert gpu.num_sampled_edges == cpu.num_sampled_edges
        start = 0
        for k in cpu.num_sampled_nodes:  # each hop's new nodes: same set, same ID range
            assert set(gpu.n_id[start:start + k].tolist()) == set(cpu.n_id[start:start + k].tolist())
            start += k
        for g, c in zip(gpu.blocks, cpu.blocks):
            assert (g.num_dst, g.num_src, g.num_edges) == (c.num_dst, c.num_src, c.num_edges)
        for outer, inner in zip(gpu.blocks[:-1], gpu.blocks[1:]):
            assert outer.num_dst == inner.num_src
        assert _canonical(gpu, indptr, indices) == _canonical(cpu, indptr, indices)
        # M5: pi = cpu_local o gpu_local^-1 is the identity on the seeds and maps edges onto edges
        pos_cpu = {int(v): i for i, v in enumerate(cpu.n_id)}
        pi = np.array([pos_cpu[int(v)] for v in gpu.n_id])
        assert np.array_equal(pi[: len(seeds)], np.arange(len(seeds)))
        for g, c in zip(gpu.blocks, cpu.blocks):
            g_edges = sorted(zip(pi[g.dst_of_edges()].tolist(), pi[g.indices].tolist(), g.edge_ids.tolist()))
            c_edges = sorted(zip(c.dst_of_edges().tolist(), c.indices.tolist(), c.edge_ids.tolist()))
            assert g_edges == c_edges


def _check_map(dst, src, unique, local_src) -> None:
    import numpy as np

    expected = set(np.asarray(dst).tolist()) | set(np.asarray(src).tolist())
    assert set(unique.tolist()) == expected and unique.size == len(expected)  # M1, M2
    assert np.array_equal(unique[: len(dst)], dst)  # M3
    assert np.array_equal(unique[local_src], src)  # M4


def _relabel_equivalent(dst, unique_a, local_a, unique_b, local_b) -> None:
    import numpy as np

    pos_b = {int(g): i for i, g in enumerate(unique_b)}
    pi = np.array([pos_b[int(g)] for g in unique_a], dtype=np.int64)
    assert np.array_equal(pi[local_a], local_b)  # M5, edge order preserved
    assert np.array_equal(pi[: len(dst)], np.arange(len(dst)))


def check_fused_map_m1_m5_m7() -> None:
    import numpy as np

    from graphpipe.ops.sampling.cuda import fused_map_cuda
    from graphpipe.ops.sampling.idmap import (
        HASH_MIX,
        HASH_MOD,
        check_table_invariants,
        fused_map_reference,
    )

    rng = np.random.default_rng(0)
    cases = [
        (np.array([10, 3, 99]), rng.integers(0, 200, 300)),
        (np.array([0]), np.full(200, 7)),  # star: one key, 200 threads, 199 spin on the publication
        (np.array([4, 2]), np.array([], dtype=np.int64)),
        (np.array([1, 2, 3]), np.array([3, 2, 1, 1, 2])),
        (np.array([2**31 - 2]), np.array([2**31 - 3, 2**31 - 2, 0, 2**31 - 3])),
        (np.array([2**32 + 5]), np.array([2**40, 2**32 + 5, 2**33, 2**40])),
    ]
    for mode in (HASH_MIX, HASH_MOD):
        for write_local in (True, False):
            for dst, src in cases:
                unique, local_src, (keys, values, new_flags) = fused_map_cuda(
                    dst, src, mode=mode, write_local=write_local, return_table=True)
                _check_map(dst, src, unique, local_src)
                ref_unique, ref_local = fused_map_reference(dst, src)
                _relabel_equivalent(dst, unique, local_src, ref_unique, ref_local)
                assert check_table_invariants(keys, values, mode) == unique.size  # M7
                # M2: the counter ended at U - num_dst, one "new" thread per new key
                assert int(new_flags.sum()) == unique.size - len(dst)
                assert len({int(s) for s, f in zip(src, new_flags) if f}) == int(new_flags.sum())
                # new IDs are exactly num_dst..U-1 and each new key's ID belongs to it
                new_lids = sorted({int(l) for l in local_src if l >= len(dst)})
                assert new_lids == list(range(len(dst), unique.size))


def check_fused_map_stability_m6() -> None:
    import numpy as np

    from graphpipe.ops.sampling.cuda import fused_map_cuda

    rng = np.random.default_rng(1)
    dst = np.array([5, 9])
    src = rng.integers(0, 40, 150)
    canon = None
    for _ in range(8):
        unique, local_src = fused_map_cuda(dst, src)
        _check_map(dst, src, unique, local_src)
        edges = sorted(zip([int(x) for x in unique[local_src]], range(src.size)))
        canon = canon or edges
        assert edges == canon


def check_adversarial_collisions_m8() -> None:
    import numpy as np

    from graphpipe.ops.sampling.cuda import fused_map_cuda
    from graphpipe.ops.sampling.idmap import (
        HASH_MIX,
        HASH_MOD,
        check_table_invariants,
        fused_map_reference,
        home_slot,
    )

    size = 64
    for mode in (HASH_MOD, HASH_MIX):
        if mode == HASH_MOD:
            colliding = [7 + k * size for k in range(31)]
        else:
            target = int(home_slot(12345, size, HASH_MIX))
            colliding = [x for x in range(200000) if int(home_slot(x, size, HASH_MIX)) == target][:31]
        dst = np.array(colliding[:3])
        src = np.array(colliding[3:] * 3 + colliding[:3])
        unique, local_src, (keys, values, _) = fused_map_cuda(dst, src, table_size=size, mode=mode, return_table=True)
        _check_map(dst, src, unique, local_src)
        _relabel_equivalent(dst, unique, local_src, *fused_map_reference(dst, src))
        assert check_table_invariants(keys, values, mode) == 31
        home = int(home_slot(colliding[0], size, mode))
        assert set(np.flatnonzero(keys != -1).tolist()) == {(home + i) % size for i in range(31)}


def check_fig8_example_m9() -> None:
    import numpy as np

    from graphpipe.ops.sampling.cuda import fused_map_cuda
    from graphpipe.ops.sampling.idmap import HASH_MOD, check_table_invariants

    unique, local_src, (keys, values, new_flags) = fused_map_cuda(
        np.array([], dtype=np.int64), np.full(7, 3), table_size=5, mode=HASH_MOD, return_table=True)
    assert unique.tolist() == [3] and local_src.tolist() == [0] * 7
    assert int(new_flags.sum()) == 1  # exactly one thread saw "new"; LocalID ended at 1
    assert keys.tolist() == [-1, -1, -1, 3, -1] and values.tolist() == [-1, -1, -1, 0, -1]
    unique, local_src, (keys, values, new_flags) = fused_map_cuda(
        np.array([], dtype=np.int64), np.array([3, 8, 3, 13, 8, 13]), table_size=5, mode=HASH_MOD, return_table=True)
    assert sorted(unique.tolist()) == [3, 8, 13] and int(new_flags.sum()) == 3
    assert set(np.flatnonzero(keys != -1).tolist()) == {3, 4, 0}  # linear probing from slot 3, wrapping
    check_table_invariants(keys, values, HASH_MOD)


def check_relabel_kernel() -> None:
    import numpy as np

    from graphpipe.ops.sampling.cuda import relabel_cuda
    from graphpipe.ops.sampling.idmap import HASH_MIX, fused_map

    dst, src = np.array([4, 8]), np.array([100, 4, 7, 100, 2**33])
    unique, _local_src, (keys, values) = fused_map(dst, src, return_table=True)
    out = relabel_cuda(keys, values, np.concatenate([unique, [12345]]), mode=HASH_MIX)
    assert out.tolist() == list(range(unique.size)) + [-1]


def check_value_errors() -> None:
    import numpy as np

    from graphpipe.ops.sampling.cuda import (
        fused_map_cuda,
        sample_hop_global_cuda,
        sample_neighbors_cuda,
    )

    indptr, indices = _graph(0)
    for call, message in [
        (lambda: sample_neighbors_cuda(indptr, indices, np.array([3, 5, 3]), [2]), "'seeds' must be unique (got 3"),
        (lambda: sample_neighbors_cuda(indptr, indices, np.array([3, 500]), [2]), "'seeds' must be node IDs"),
        (lambda: sample_neighbors_cuda(indptr, indices, np.array([3]), []), "'fanouts' must not be empty (got [])"),
        (lambda: fused_map_cuda([1, 1], [2]), "'dst_global' must be unique (got 1 twice)"),
        (lambda: fused_map_cuda([1], [2, 3], table_size=3, mode=1), "'table_size' must exceed"),
        (lambda: sample_hop_global_cuda(indptr, indices, np.array([1]), 2), "exactly one of"),
    ]:
        try:
            call()
        except ValueError as exc:
            assert message in str(exc), (message, str(exc))
        else:
            raise AssertionError(f"no ValueError for {message}")


def check_typed_equals_cpu() -> None:
    """The typed GPU sampler (the relation loop over the CUDA hop kernels) returns the CPU
    typed sampler's sample bit for bit: nodes, local IDs, edges, counts (three types,
    four relations, replace, frontier "all", a type reached only in hop 2)."""
    import numpy as np

    from graphpipe.ops.sampling import HeteroCSC, sample_neighbors

    rng = np.random.default_rng(0)
    num = {"paper": 30, "author": 20, "inst": 6}
    rels = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "rev_writes", "author"),
            ("inst", "employs", "author")]
    csc = {}
    for s, _, d in rels:
        dst = np.sort(rng.integers(0, num[d], 60))
        indptr = np.zeros(num[d] + 1, np.int64)
        np.cumsum(np.bincount(dst, minlength=num[d]), out=indptr[1:])
        csc[(s, _, d)] = (indptr, rng.integers(0, num[s], 60))
    graph = HeteroCSC.from_arrays(num, csc)
    for fanouts, replace, frontier in [([3, 2], False, "new"), ([2, 2], True, "new"), ([-1, 2], False, "all")]:
        args = (graph, {"paper": np.array([0, 5, 7])}, fanouts)
        cpu = sample_neighbors(*args, replace=replace, seed=4, frontier=frontier, backend="cpu")
        gpu = sample_neighbors(*args, replace=replace, seed=4, frontier=frontier, backend="cuda")
        assert all(np.array_equal(cpu.n_id[t], gpu.n_id[t]) for t in num)
        for field in ("row", "col", "edge_ids"):
            assert all(np.array_equal(getattr(cpu, field)[et], getattr(gpu, field)[et]) for et in rels), field
        assert cpu.num_sampled_nodes == gpu.num_sampled_nodes and cpu.num_sampled_edges == gpu.num_sampled_edges
        assert cpu.n_id["inst"].shape[0] > 0 and sum(a.shape[0] for a in cpu.row.values()) > 20


if __name__ == "__main__":
    import numba

    assert numba.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
    results = {}
    for case in CASES:
        try:
            globals()["check_" + case]()
            results[case] = "ok"
        except Exception:  # noqa: BLE001 - every failure is reported per case
            results[case] = traceback.format_exc()[-3000:]
    print(json.dumps(results))
