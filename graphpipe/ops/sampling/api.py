"""``sample_neighbors``: one entry point for every sampler backend and every graph, the same
output on each backend. A graph of one relation is given as its CSC ``(indptr, indices)``, a
typed graph as a :class:`~graphpipe.ops.sampling.types.HeteroCSC`; the number of relations
picks the kernel (:mod:`graphpipe.ops.sampling.cpu`). Typed graphs sample on the CPU, the
reference or the GPU (``"cuda"``: the relation loop over the one-relation CUDA hop kernels,
:mod:`graphpipe.ops.sampling.cuda_typed`, the CPU's sample bit for bit; ``"auto"``: the CPU).

Backends (``backend=``):

- ``"cpu"``: the Numba kernels of :mod:`graphpipe.ops.sampling.cpu`;
- ``"cuda"``: the numba.cuda kernels of :mod:`graphpipe.ops.sampling.cuda` (a GPU, or
  ``NUMBA_ENABLE_CUDASIM=1``); NumPy inputs are copied to the device, CuPy inputs stay
  there and CuPy comes back;
- ``"reference"``: the plain-Python oracle of :mod:`graphpipe.ops.sampling.reference`;
- ``"auto"`` (default): ``"cuda"`` when the graph or the seeds already live on a GPU
  (CuPy or numba device arrays) and numba.cuda works, ``"cpu"`` otherwise
  (:func:`graphpipe.ops._core.backend.resolve_backend`). Host arrays never go to the GPU
  by themselves: copying the whole graph for one batch costs more than sampling it.

Same output: for the same ``(graph, seeds, fanouts, replace, seed)`` every backend returns
equal :class:`~graphpipe.ops.sampling.types.SampleOutput` s, bit for bit. The CUDA kernels
draw the CPU's edges but number each hop's new nodes in the order threads win an atomic
counter; :func:`canonical_local_ids` renumbers them into the CPU's order (first
appearance in the hop's edge list, destinations in local-ID order) on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphpipe.ops._core.backend import numba_cuda_available, resolve_backend
from graphpipe.ops.sampling import cpu as _cpu
from graphpipe.ops.sampling.reference import (
    sample_hetero_neighbors_reference,
    sample_neighbors_reference,
)
from graphpipe.ops.sampling.types import (
    HeteroCSC,
    HeteroSampleOutput,
    SampleOutput,
    check_frontier,
    split_graph_args,
)
from graphpipe.ops.sampling.types import assemble as _assemble

__all__ = ["BACKENDS", "TYPED_BACKENDS", "canonical_local_ids", "sample_neighbors"]

BACKENDS = ("auto", "reference", "cpu", "cuda")
TYPED_BACKENDS = ("auto", "cpu", "reference", "cuda")


def _on_gpu(*arrays: Any) -> bool:
    """True when any of ``arrays`` is a CuPy or numba.cuda device array."""
    for a in arrays:
        if hasattr(a, "__cuda_array_interface__"):
            return True
    return False


def sample_neighbors(*graph_seeds_fanouts: Any, replace: bool = False, seed: int = 0,
                     backend: str = "auto", frontier: str = "new"
                     ) -> SampleOutput | HeteroSampleOutput:
    """Sample a multi-hop neighbourhood of ``seeds`` with Fused-Map local IDs.

    One sampler, two call forms (the number of relations picks the kernel):

    - ``sample_neighbors(indptr, indices, seeds, fanouts)``: one relation, the CSC by
      destination; returns a :class:`~graphpipe.ops.sampling.types.SampleOutput`;
    - ``sample_neighbors(graph, seeds, fanouts)``: a typed graph
      (:class:`~graphpipe.ops.sampling.types.HeteroCSC`); returns a
      :class:`~graphpipe.ops.sampling.types.HeteroSampleOutput` (typed local IDs). A graph
      of one node type and one relation takes the one-relation kernel, others the
      relation loop; :meth:`HeteroCSC.homogeneous` gives the homogeneous sample.

    Args:
        indptr: int64 (N+1,) CSC offsets by destination (global IDs).
        indices: int32/int64 (E,) in-neighbour global IDs.
        graph: a :class:`HeteroCSC` built by :meth:`HeteroCSC.from_arrays` (checked).
        seeds: int (B,) unique global node IDs in ``[0, N)`` (local IDs ``0..B-1``);
            typed: ``{ntype: int (B_t,)}``, unique per type.
        fanouts: per hop, seed hop first; ``-1`` takes all neighbours, ``0`` none. Typed:
            one list for every relation, or ``{etype: list}`` for each relation (tuple or
            ``"src___rel___dst"`` keys, :func:`~graphpipe.ops.sampling.types.resolve_fanouts`).
        replace: sample with replacement.
        seed: integer key of this batch's random stream; the output is a pure function
            of (graph, seeds, fanouts, replace, seed, frontier), whatever the backend.
        backend: ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"reference"`` (module docstring);
            typed graphs sample on ``"cpu"`` (``"auto"``) or ``"reference"``.
        frontier: which nodes a hop after the first expands: ``"new"`` (default, PyG's
            convention: only the nodes the hop before reached first; the others keep empty
            rows in the block) or ``"all"`` (DGL's: every node known so far, seeds
            included). Same draws per expanded destination under both.

    Returns:
        :class:`~graphpipe.ops.sampling.types.SampleOutput` (block convention in
        :mod:`graphpipe.ops.sampling.cpu`) or, typed,
        :class:`~graphpipe.ops.sampling.types.HeteroSampleOutput`.

    Raises:
        ValueError: empty/invalid ``fanouts`` (typed: unknown or missing relations, uneven
            lengths), out-of-range or duplicate ``seeds`` (typed: unknown types),
            malformed ``indptr``/``indices``, an unknown ``backend``, ``"cpu"`` or
            ``"reference"`` with data on a GPU, ``"cuda"`` where numba.cuda cannot run or
            with a typed graph.
        TypeError: positional arguments in neither form.

    >>> import numpy as np
    >>> indptr = np.array([0, 2, 3, 4]); indices = np.array([1, 2, 0, 0])
    >>> out = sample_neighbors(indptr, indices, np.array([0]), [2], backend="cpu")
    >>> out.n_id.tolist(), out.blocks[0].indices.tolist()
    ([0, 1, 2], [1, 2])

    Two hops from seeds 0 and 2 (``fanouts`` seed hop first; ``blocks`` input layer
    first, DGL's convention); every backend returns the same sample. By default (PyG's
    convention) the second hop expands only node 1, the node the first hop reached:

    >>> out = sample_neighbors(indptr, indices, np.array([0, 2]), [1, 1], seed=7)
    >>> out.batch_size, out.num_sampled_nodes, out.num_sampled_edges
    (2, [2, 1, 0], [2, 1])
    >>> out.blocks[0].indptr.tolist()     # rows of the seeds 0, 2 empty in hop 2
    [0, 0, 0, 1]
    >>> ref = sample_neighbors(indptr, indices, np.array([0, 2]), [1, 1], seed=7,
    ...                        backend="reference")
    >>> ref.n_id.tolist() == out.n_id.tolist()
    True

    DGL's convention re-samples the seeds in hop 2 too:

    >>> dgl = sample_neighbors(indptr, indices, np.array([0, 2]), [1, 1], seed=7, frontier="all")
    >>> dgl.num_sampled_edges, dgl.blocks[0].indptr.tolist()
    ([2, 3], [0, 1, 2, 3])

    The same graph as a typed one with its single relation ``(_N, _E, _N)`` draws the same:

    >>> typed = sample_neighbors(HeteroCSC.homogeneous(indptr, indices),
    ...                          {"_N": np.array([0, 2])}, [1, 1], seed=7)
    >>> typed.n_id["_N"].tolist() == out.n_id.tolist()
    True

    Authors write papers; papers cite papers. Two hops from paper 0:

    >>> g = HeteroCSC.from_arrays({"paper": 3, "author": 2}, {
    ...     ("author", "writes", "paper"): (np.array([0, 1, 2, 3]), np.array([0, 1, 1])),
    ...     ("paper", "cites", "paper"): (np.array([0, 2, 2, 3]), np.array([1, 2, 0]))})
    >>> out = sample_neighbors(g, {"paper": np.array([0])}, [1, 1], seed=3)
    >>> {t: ids.tolist() for t, ids in out.n_id.items()}
    {'paper': [0, 2], 'author': [0, 1]}
    >>> cites = ("paper", "cites", "paper")      # hop 1: 2 -> 0; hop 2: 0 -> 2 (local 1)
    >>> out.row[cites].tolist(), out.col[cites].tolist()
    ([1, 0], [0, 1])
    >>> out.num_sampled_nodes, out.num_sampled_edges[("author", "writes", "paper")]
    ({'paper': [1, 1, 0], 'author': [0, 1, 1]}, [1, 1])
    >>> ref = sample_neighbors(g, {"paper": np.array([0])}, [1, 1], seed=3, backend="reference")
    >>> all(np.array_equal(ref.row[e], out.row[e]) for e in g.edge_types)
    True
    """
    graph, seeds, fanouts = split_graph_args(graph_seeds_fanouts)
    if isinstance(graph, HeteroCSC):
        return _sample_typed(graph, seeds, fanouts, replace=replace, seed=seed, backend=backend,
                             frontier=frontier)
    indptr, indices = graph
    frontier = check_frontier(frontier)
    device = "cuda" if _on_gpu(indptr, indices, seeds) else "cpu"
    if backend == "reference" and device != "cpu":
        raise ValueError("'backend'='reference' needs host arrays (got device arrays)")
    backend = resolve_backend(backend, BACKENDS, device, gpu="cuda")
    if backend == "cuda":
        if not numba_cuda_available():
            raise ValueError("'backend'='cuda' needs numba.cuda (no usable GPU and "
                             "NUMBA_ENABLE_CUDASIM is not set)")
        from graphpipe.ops.sampling.cuda import sample_neighbors_cuda

        out = sample_neighbors_cuda(indptr, indices, seeds, fanouts, replace=replace, seed=seed,
                                    frontier=frontier)
        return canonical_local_ids(out)
    if backend == "reference":
        return sample_neighbors_reference(indptr, indices, seeds, fanouts, replace=replace,
                                          seed=seed, frontier=frontier)
    return _cpu.sample_neighbors(indptr, indices, seeds, fanouts, replace=replace, seed=seed,
                                 frontier=frontier)


def _sample_typed(graph: HeteroCSC, seeds: Any, fanouts: Any, *, replace: bool, seed: int,
                  backend: str, frontier: str) -> HeteroSampleOutput:
    """The typed form of :func:`sample_neighbors` on ``"cpu"``, ``"reference"`` or ``"cuda"``
    (:mod:`graphpipe.ops.sampling.cuda_typed`, the CPU's sample; ``"auto"``: the CPU)."""
    if backend not in TYPED_BACKENDS:
        raise ValueError(f"'backend' must be one of {TYPED_BACKENDS} for a typed graph "
                         f"(got {backend!r})")
    if backend == "cuda":
        if not numba_cuda_available():
            raise ValueError("'backend'='cuda' needs numba.cuda (no usable GPU and "
                             "NUMBA_ENABLE_CUDASIM is not set)")
        from graphpipe.ops.sampling.cuda_typed import sample_typed_cuda

        return sample_typed_cuda(graph, seeds, fanouts, replace=replace, seed=seed, frontier=frontier)
    if backend == "reference":
        return sample_hetero_neighbors_reference(graph, seeds, fanouts, replace=replace,
                                                 seed=seed, frontier=frontier)
    return _cpu.sample_typed(graph, seeds, fanouts, replace=replace, seed=seed, frontier=frontier)


def _host(a: Any) -> np.ndarray:
    """``a`` as a host NumPy array: CuPy (``.get``), torch (CPU or CUDA) or array-like."""
    if hasattr(a, "get"):
        return a.get()
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def canonical_local_ids(out: SampleOutput) -> SampleOutput:
    """``out`` with each hop's new nodes renumbered in first-appearance order (the CPU's).

    Any Fused-Map numbering that gives a hop's new nodes the ID range
    ``[num_dst, num_src)`` is mapped onto the CPU's: destinations in local-ID order,
    each destination's edges in draw order, a new source numbered at its first edge.
    Rows of later blocks are permuted with their destinations, edges keep their order
    within a row. Host arrays come back; CuPy ones (detected by ``.get``) go back to CuPy.
    """
    as_cupy = hasattr(out.n_id, "get")
    n_id = _host(out.n_id)
    canon = np.arange(n_id.shape[0], dtype=np.int64)  # old local ID -> canonical local ID
    hops = []
    for block in reversed(out.blocks):  # seed hop first
        indptr, indices = _host(block.indptr), _host(block.indices)
        edge_ids = _host(block.edge_ids)
        old_row = np.empty(block.num_dst, dtype=np.int64)
        old_row[canon[:block.num_dst]] = np.arange(block.num_dst)
        deg = np.diff(indptr)[old_row]
        new_indptr = np.zeros(block.num_dst + 1, dtype=np.int64)
        np.cumsum(deg, out=new_indptr[1:])
        take = np.repeat(indptr[old_row] - new_indptr[:-1], deg) + np.arange(new_indptr[-1])
        src = indices[take]
        new = src[src >= block.num_dst]
        uniq, first = np.unique(new, return_index=True)
        canon[uniq[np.argsort(first, kind="stable")]] = np.arange(block.num_dst, block.num_src)
        hops.append((new_indptr, canon[src], edge_ids[take], block.num_dst, block.num_src))
    new_n_id = np.empty_like(n_id)
    new_n_id[canon] = n_id
    result = _assemble(new_n_id, out.batch_size, hops)
    if as_cupy:
        import cupy

        for b in result.blocks:
            b.indptr, b.indices, b.edge_ids = (cupy.asarray(a) for a in (b.indptr, b.indices,
                                                                         b.edge_ids))
        result.n_id = cupy.asarray(result.n_id)
    return result
