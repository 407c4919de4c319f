"""GPU path of the Fused-Map neighbour sampler (numba.cuda kernels).

Same semantics and the same random numbers as :mod:`graphpipe.ops.sampling`: each
destination's draws come from a SplitMix64 stream keyed by (batch seed, hop, global
node ID), so for the same ``seed`` the GPU samples exactly the CPU's edges. Only the
local IDs of non-seed nodes differ: Fused-Map on the GPU assigns them in the order
threads win the atomic counter, which is a valid bijection onto each hop's ID range
but not deterministic (fastgl.md §5.2). Compare with the CPU up to relabelling.

Kernels, one hop at a time (destinations = every node known before the hop, or with
``frontier="new"`` only those the hop before reached first; the host pads the block's
offsets with empty rows for the others):

1. ``_count_kernel``: one thread per destination writes ``min(fanout, deg)``.
2. host/CuPy exclusive scan → block ``indptr`` (the one device→host sync per hop sizes
   the outputs, as in DGL and the FastGL artifact).
3. ``_sample_kernel``: one thread per destination, Floyd's algorithm without
   replacement (membership by scanning the thread's own output), uniform draws with
   replacement, or the whole row. Draws come from per-destination stream keys, which
   ``_stream_key_kernel`` derives on the device or the caller supplies from the host.
4. ``_fused_map_kernel``: one thread per sampled edge, the race-free Fused-Map:
   ``atomicCAS(key, -1, g)`` on the slot; the one thread whose CAS returned -1 owns the
   new key, takes ``lid = base + atomicAdd(counter, 1)`` (the *returned* value; the
   paper's Algorithm 2 reads the counter non-atomically and races) and publishes it
   with ``atomicExch(value, lid)``. Threads that find the key already present spin on
   an atomic read of the value until it is published, then write the edge's local
   source. Linear probing. (Spinning relies on independent thread scheduling, i.e.
   Volta or newer; the simulator runs a block's threads as OS threads.)
5. ``_relabel_kernel``: table lookup of any array of global IDs (used by
   :func:`fused_map_cuda` and for the destination side; a separate launch after the
   map kernel so every value is published).
6. ``_rehash_kernel``: grows the table between hops when a hop's bound of distinct
   nodes would push the load above 0.5.

Arrays: CuPy arrays are accepted and returned when CuPy is installed; NumPy arrays are
copied to the device (or run under ``NUMBA_ENABLE_CUDASIM=1``) and results come back as
NumPy. The table keys are int64 global IDs (-1 empty), values int32 local IDs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from numba import cuda

from graphpipe.ops._core import rng
from graphpipe.ops._core.checks import check_csc as _check_graph
from graphpipe.ops._core.checks import check_fanouts as _check_fanouts
from graphpipe.ops._core.checks import check_node_ids as _check_seeds
from graphpipe.ops.sampling.idmap import EMPTY_KEY, HASH_MIX, HASH_MOD, table_capacity
from graphpipe.ops.sampling.keys import batch_key, hop_key
from graphpipe.ops.sampling.types import SampleOutput, check_frontier
from graphpipe.ops.sampling.types import assemble as _assemble

try:  # optional
    import cupy as _cupy  # type: ignore
except Exception:  # noqa: BLE001  # pragma: no cover - a broken CuPy install means "no CuPy"
    _cupy = None

__all__ = [
    "fused_map_cuda",
    "relabel_cuda",
    "sample_hop_global_cuda",
    "sample_neighbors_cuda",
]

# the constants of graphpipe.ops._core.rng (device twins of mix64/bounded below)
_GOLDEN = rng.GOLDEN
_M1 = rng.M1
_M2 = rng.M2
_S30 = rng.S30
_S27 = rng.S27
_S31 = rng.S31
_S32 = rng.S32
_MASK32 = rng.MASK32
_TWO32 = rng.TWO32
_MIX_MUL = rng.GOLDEN  # idmap's multiplicative hash (Fibonacci hashing) uses the same constant

_THREADS = 128
_SIMULATOR = bool(numba.config.ENABLE_CUDASIM)


# --------------------------------------------------------------------------------------
# device functions (bit-identical to the CPU versions in _core/rng.py / sampling/idmap.py)


@cuda.jit(device=True, inline=True)
def _mix64_d(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@cuda.jit(device=True, inline=True)
def _bounded_d(state, n):
    un = np.uint64(n)
    while True:
        state = state + _GOLDEN
        r = _mix64_d(state)
        m = (r >> _S32) * un
        low = m & _MASK32
        if low >= un:
            return state, np.int64(m >> _S32)
        if low >= (_TWO32 - un) % un:
            return state, np.int64(m >> _S32)


@cuda.jit(device=True, inline=True)
def _home_slot_d(key, size, mode):
    if mode == HASH_MOD:
        return np.int64(key) % size
    h = np.uint64(key) * _MIX_MUL
    h = h ^ (h >> _S32)
    return np.int64(h & np.uint64(size - 1))


@cuda.jit(device=True, inline=True)
def _count_for_d(deg, fanout, replace):
    if fanout < 0:
        return deg
    if replace:
        if deg > 0:
            return fanout
        return 0
    if deg > fanout:
        return fanout
    return deg


# --------------------------------------------------------------------------------------
# kernels


@cuda.jit
def _count_kernel(indptr, dst, fanout, replace, counts):
    i = cuda.grid(1)
    if i < dst.shape[0]:
        v = dst[i]
        counts[i] = _count_for_d(indptr[v + 1] - indptr[v], fanout, replace)


@cuda.jit
def _stream_key_kernel(hkey, dst, out):
    i = cuda.grid(1)
    if i < dst.shape[0]:
        out[i] = _mix64_d(hkey ^ (np.uint64(dst[i]) * _M1))


@cuda.jit
def _sample_kernel(indptr, indices, dst, fanout, replace, skeys, offsets, out_src, out_eid):
    i = cuda.grid(1)
    if i >= dst.shape[0]:
        return
    v = dst[i]
    start = indptr[v]
    deg = indptr[v + 1] - start
    base = offsets[i]
    count = offsets[i + 1] - base
    if count == 0:
        return
    if fanout < 0 or (not replace and deg <= fanout):
        for q in range(count):
            out_eid[base + q] = start + q
    elif replace:
        state = skeys[i]
        for q in range(count):
            state, t = _bounded_d(state, deg)
            out_eid[base + q] = start + t
    else:  # Floyd: positions deg-count .. deg-1
        state = skeys[i]
        first = deg - count
        for j in range(first, deg):
            q = j - first
            state, t = _bounded_d(state, j + 1)
            for p in range(q):
                if out_eid[base + p] == start + t:
                    t = j
                    break
            out_eid[base + q] = start + t
    for q in range(count):
        out_src[base + q] = indices[out_eid[base + q]]


@cuda.jit
def _insert_dst_kernel(keys, values, dst, mode, dup):
    """Destinations are unique: thread i inserts dst[i] with local ID i (no counter)."""
    i = cuda.grid(1)
    if i >= dst.shape[0]:
        return
    key = dst[i]
    size = keys.shape[0]
    slot = _home_slot_d(key, size, mode)
    for _ in range(size):
        old = cuda.atomic.cas(keys, slot, EMPTY_KEY, key)
        if old == EMPTY_KEY:
            cuda.atomic.exch(values, slot, i)
            return
        if old == key:
            cuda.atomic.min(dup, 0, i)
            return
        slot += 1
        if slot == size:
            slot = 0


@cuda.jit
def _fused_map_kernel(keys, values, src, mode, counter, base_id, new_keys, new_flags, local_src, write_local):
    """One thread per sampled edge: CAS-insert, atomicAdd a fresh local ID when new."""
    e = cuda.grid(1)
    if e >= src.shape[0]:
        return
    key = src[e]
    size = keys.shape[0]
    slot = _home_slot_d(key, size, mode)
    for _ in range(size):
        old = cuda.atomic.cas(keys, slot, EMPTY_KEY, key)
        if old == EMPTY_KEY:  # this thread inserted the key: it alone assigns the ID
            idx = cuda.atomic.add(counter, 0, 1)
            lid = base_id + idx
            cuda.atomic.exch(values, slot, lid)
            new_keys[idx] = key
            new_flags[e] = 1
            if write_local:
                local_src[e] = lid
            return
        if old == key:  # present: wait until its owner has published the local ID
            if write_local:
                lid = cuda.atomic.add(values, slot, 0)
                while lid < 0:
                    lid = cuda.atomic.add(values, slot, 0)
                local_src[e] = lid
            return
        slot += 1
        if slot == size:
            slot = 0


@cuda.jit
def _relabel_kernel(keys, values, ids, mode, out):
    i = cuda.grid(1)
    if i >= ids.shape[0]:
        return
    key = ids[i]
    size = keys.shape[0]
    slot = _home_slot_d(key, size, mode)
    out[i] = -1
    for _ in range(size):
        k = keys[slot]
        if k == key:
            out[i] = values[slot]
            return
        if k == EMPTY_KEY:
            return
        slot += 1
        if slot == size:
            slot = 0


@cuda.jit
def _rehash_kernel(old_keys, old_values, keys, values, mode):
    s = cuda.grid(1)
    if s >= old_keys.shape[0]:
        return
    key = old_keys[s]
    if key == EMPTY_KEY:
        return
    size = keys.shape[0]
    slot = _home_slot_d(key, size, mode)
    for _ in range(size):
        if cuda.atomic.cas(keys, slot, EMPTY_KEY, key) == EMPTY_KEY:
            values[slot] = old_values[s]
            return
        slot += 1
        if slot == size:
            slot = 0


@cuda.jit
def _copy_kernel(src, dst, offset):
    i = cuda.grid(1)
    if i < src.shape[0]:
        dst[offset + i] = src[i]


@cuda.jit
def _fill_kernel(arr, value):
    i = cuda.grid(1)
    if i < arr.shape[0]:
        arr[i] = value


# --------------------------------------------------------------------------------------
# host side


def _is_cupy(a: Any) -> bool:
    return _cupy is not None and isinstance(a, _cupy.ndarray)


def _is_torch_cuda(a: Any) -> bool:
    """A torch tensor on a CUDA device (shared with numba through ``__cuda_array_interface__``)."""
    return bool(getattr(a, "is_cuda", False)) and hasattr(a, "__cuda_array_interface__")


def _is_device(a: Any) -> bool:
    """A numba device array (real or simulated), a CuPy array or a CUDA torch tensor."""
    return hasattr(a, "copy_to_host") or _is_cupy(a) or _is_torch_cuda(a)


def _to_device(a: Any, dtype) -> Any:
    if _is_cupy(a):
        return cuda.as_cuda_array(a.astype(dtype, copy=False))
    if _is_torch_cuda(a):
        import torch

        wanted = {np.int64: torch.int64, np.int32: torch.int32}.get(dtype, dtype)  # or a torch dtype
        return cuda.as_cuda_array(a.detach().to(wanted).contiguous())
    if hasattr(a, "copy_to_host"):
        return a
    return cuda.to_device(np.ascontiguousarray(a, dtype=dtype))


def _to_host(a: Any) -> np.ndarray:
    if _is_torch_cuda(a):
        return a.detach().cpu().numpy()
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


def _out(a: Any, as_cupy: bool) -> Any:
    return _cupy.asarray(a) if as_cupy else _to_host(a)


def _launch(kernel, n: int, *args) -> None:
    if n <= 0:
        return
    with np.errstate(over="ignore"):  # uint64 hashing wraps by design (simulator runs NumPy scalars)
        kernel[(n + _THREADS - 1) // _THREADS, _THREADS](*args)


def _device_full(n: int, value, dtype) -> Any:
    arr = cuda.device_array(max(n, 0), dtype=dtype)
    _launch(_fill_kernel, n, arr, value)
    return arr


def _exclusive_scan(counts) -> tuple[Any, int]:
    """int64 (n+1,) offsets of ``counts`` on the device, and the total (host int)."""
    if _cupy is not None and not _SIMULATOR:
        c = _cupy.asarray(counts)
        offsets = _cupy.zeros(c.shape[0] + 1, dtype=_cupy.int64)
        _cupy.cumsum(c, out=offsets[1:])
        return cuda.as_cuda_array(offsets), int(offsets[-1])
    host = _to_host(counts)
    offsets = np.zeros(host.shape[0] + 1, dtype=np.int64)
    np.cumsum(host, out=offsets[1:])
    return cuda.to_device(offsets), int(offsets[-1])


class _DeviceTable:
    """int64 keys (-1 empty) and int32 values (-1 unpublished) on the device."""

    def __init__(self, size: int, mode: int):
        self.mode = mode
        self.keys = _device_full(size, EMPTY_KEY, np.int64)
        self.values = _device_full(size, -1, np.int32)

    @property
    def size(self) -> int:
        return int(self.keys.shape[0])

    def ensure(self, max_distinct: int) -> None:
        if self.mode == HASH_MIX and self.size < 2 * max_distinct:
            old_keys, old_values = self.keys, self.values
            new_size = table_capacity(max_distinct)
            self.keys = _device_full(new_size, EMPTY_KEY, np.int64)
            self.values = _device_full(new_size, -1, np.int32)
            _launch(_rehash_kernel, old_keys.shape[0], old_keys, old_values, self.keys, self.values, self.mode)


def sample_hop_global_cuda(indptr, indices, dst_global, fanout: int, *, replace: bool = False,
                           stream_keys=None, hop_key_value: int | None = None):
    """One hop in global IDs on the GPU (counts, scan, per-destination sampling).

    Exactly one of ``stream_keys`` (uint64 (num_dst,), host-supplied draws) and
    ``hop_key_value`` (derive them on the device like the CPU sampler) is given.

    Returns ``(indptr_local, src_global, edge_ids)`` like
    :func:`graphpipe.ops.sampling.sample_hop_global` (NumPy unless CuPy inputs).
    """
    as_cupy = _is_cupy(dst_global)
    indptr_h, indices_h = (indptr, indices) if _is_cupy(indptr) else _check_graph(indptr, indices)
    fanout = _check_fanouts([fanout])[0]
    if not _is_cupy(dst_global):
        dst_global = _check_seeds(dst_global, indptr_h.shape[0] - 1, "dst_global")
    if (stream_keys is None) == (hop_key_value is None):
        raise ValueError("give exactly one of 'stream_keys' and 'hop_key_value'")
    d_indptr = _to_device(indptr_h, np.int64)
    d_indices = _to_device(indices_h, indices_h.dtype)
    d_dst = _to_device(dst_global, np.int64)
    offsets, _total, d_src, d_eid = _sample_hop_device(d_indptr, d_indices, d_dst, fanout, replace, stream_keys, hop_key_value)
    return _out(offsets, as_cupy), _out(d_src, as_cupy), _out(d_eid, as_cupy)


def _sample_hop_device(d_indptr, d_indices, d_dst, fanout, replace, stream_keys, hkey):
    n = int(d_dst.shape[0])
    counts = cuda.device_array(n, dtype=np.int64)
    _launch(_count_kernel, n, d_indptr, d_dst, fanout, bool(replace), counts)
    offsets, total = _exclusive_scan(counts)
    if stream_keys is not None:
        skeys = _to_device(stream_keys, np.uint64)
        if int(skeys.shape[0]) != n:
            raise ValueError(f"'stream_keys' must have shape ({n},) (got ({int(skeys.shape[0])},))")
    else:
        skeys = cuda.device_array(n, dtype=np.uint64)
        _launch(_stream_key_kernel, n, np.uint64(hkey), d_dst, skeys)
    d_src = cuda.device_array(total, dtype=np.int64)
    d_eid = cuda.device_array(total, dtype=np.int64)
    _launch(_sample_kernel, n, d_indptr, d_indices, d_dst, fanout, bool(replace), skeys, offsets, d_src, d_eid)
    return offsets, total, d_src, d_eid


def _fused_map_device(table: _DeviceTable, d_src, base_id: int, write_local: bool = True):
    """Map the sampled sources; returns (local_src, new_keys[:num_new], new_flags, num_new)."""
    m = int(d_src.shape[0])
    counter = _device_full(1, 0, np.int32)
    new_keys = cuda.device_array(max(m, 1), dtype=np.int64)
    new_flags = _device_full(m, 0, np.int8)
    local_src = _device_full(m, -1, np.int64)
    _launch(_fused_map_kernel, m, table.keys, table.values, d_src, table.mode, counter, base_id,
            new_keys, new_flags, local_src, 1 if write_local else 0)
    num_new = int(_to_host(counter)[0])
    return local_src, new_keys[:num_new], new_flags, num_new


def fused_map_cuda(dst_global, src_global, *, table_size: int | None = None, mode: int = HASH_MIX,
                   write_local: bool = True, return_table: bool = False):
    """GPU Fused-Map of one block; same contract as :func:`graphpipe.ops.sampling.idmap.fused_map`.

    ``unique_global[:num_dst] == dst_global``; the other local IDs follow the atomic
    counter (non-deterministic order). With ``write_local`` the map kernel itself writes
    each edge's local source (spinning on unpublished values); otherwise the separate
    relabel kernel does. Extra return (when ``return_table``): ``(keys, values,
    new_flags)`` as NumPy, ``new_flags`` int8 (num_edges,) = 1 for the edge whose thread
    inserted a new key.
    """
    dst = np.ascontiguousarray(_to_host(dst_global), dtype=np.int64)
    src = np.ascontiguousarray(_to_host(src_global), dtype=np.int64)
    if (dst.size and dst.min() < 0) or (src.size and src.min() < 0):
        raise ValueError("'dst_global' and 'src_global' must hold non-negative global IDs")
    if mode not in (HASH_MIX, HASH_MOD):
        raise ValueError(f"'mode' must be HASH_MIX or HASH_MOD (got {mode})")
    if table_size is None:
        table_size = table_capacity(dst.size + src.size)
    if mode == HASH_MIX and table_size & (table_size - 1):
        raise ValueError(f"'table_size' must be a power of two with HASH_MIX (got {table_size})")
    distinct = np.unique(np.concatenate([dst, src])).size
    if table_size <= distinct:
        raise ValueError(f"'table_size' must exceed the number of distinct keys {distinct} (got {table_size})")
    table = _DeviceTable(table_size, mode)
    dup = _device_full(1, np.iinfo(np.int32).max, np.int32)
    d_dst = cuda.to_device(dst)
    _launch(_insert_dst_kernel, dst.size, table.keys, table.values, d_dst, mode, dup)
    first_dup = int(_to_host(dup)[0])
    if first_dup != np.iinfo(np.int32).max:
        raise ValueError(f"'dst_global' must be unique (got {int(dst[first_dup])} twice)")
    d_src = cuda.to_device(src)
    local_src, new_keys, new_flags, num_new = _fused_map_device(table, d_src, dst.size, write_local)
    if not write_local:
        local_src = relabel_cuda(table.keys, table.values, d_src, mode=mode)
    unique = np.concatenate([dst, _to_host(new_keys)[:num_new]])
    local_src = _to_host(local_src)
    if return_table:
        return unique, local_src, (_to_host(table.keys), _to_host(table.values), _to_host(new_flags))
    return unique, local_src


def relabel_cuda(keys, values, ids, *, mode: int = HASH_MIX):
    """Local ID of every global ID in ``ids`` (-1 when absent) by table lookup on the device."""
    d_keys = _to_device(keys, np.int64)
    d_values = _to_device(values, np.int32)
    d_ids = _to_device(ids, np.int64)
    out = cuda.device_array(int(d_ids.shape[0]), dtype=np.int64)
    _launch(_relabel_kernel, int(d_ids.shape[0]), d_keys, d_values, d_ids, mode, out)
    return out if _is_device(ids) else _to_host(out)


def sample_neighbors_cuda(indptr, indices, seeds, fanouts: Sequence[int], *, replace: bool = False,
                          seed: int = 0, frontier: str = "new") -> SampleOutput:
    """GPU :func:`graphpipe.ops.sampling.sample_neighbors`: same arguments, same edges.

    ``n_id[:B]`` equals the seeds and each hop's new nodes occupy the same ID range as
    on the CPU, but their order within a hop is the atomic counter's (non-deterministic).
    Arrays in the result are CuPy when ``seeds`` is a CuPy array, else NumPy.
    """
    as_cupy = _is_cupy(seeds)
    fanouts = _check_fanouts(fanouts)
    frontier = check_frontier(frontier)
    if _is_device(indptr):  # already on the GPU (checked by whoever put it there)
        num_graph_nodes = int(indptr.shape[0]) - 1
        d_indptr, d_indices = _to_device(indptr, np.int64), _to_device(indices, indices.dtype)
    else:
        indptr, indices = _check_graph(indptr, indices)
        num_graph_nodes = indptr.shape[0] - 1
        d_indptr, d_indices = _to_device(indptr, np.int64), _to_device(indices, indices.dtype)
    seeds_h = _check_seeds(_to_host(seeds), num_graph_nodes)
    batch_size = seeds_h.shape[0]
    table = _DeviceTable(table_capacity(batch_size), HASH_MIX)
    capacity = max(batch_size, 1)
    n_id = cuda.device_array(capacity, dtype=np.int64)
    d_seeds = cuda.to_device(seeds_h)
    _launch(_copy_kernel, batch_size, d_seeds, n_id, 0)
    dup = _device_full(1, np.iinfo(np.int32).max, np.int32)
    _launch(_insert_dst_kernel, batch_size, table.keys, table.values, d_seeds, HASH_MIX, dup)
    first_dup = int(_to_host(dup)[0])
    if first_dup != np.iinfo(np.int32).max:
        raise ValueError(f"'seeds' must be unique (got {int(seeds_h[first_dup])} more than once)")
    bkey = batch_key(seed)
    num_nodes = batch_size
    first = 0  # destinations before it are not expanded (frontier="new")
    hops = []
    for h, fanout in enumerate(fanouts):
        num_dst = num_nodes
        offsets, total, d_src, d_eid = _sample_hop_device(d_indptr, d_indices, n_id[first:num_dst], fanout,
                                                          replace, None, hop_key(bkey, h))
        offsets = _pad_rows(offsets, first)
        bound = min(num_nodes + total, num_graph_nodes)
        table.ensure(bound)
        if capacity < bound:
            grown = cuda.device_array(bound, dtype=np.int64)
            _launch(_copy_kernel, num_nodes, n_id[:num_nodes], grown, 0)
            n_id, capacity = grown, bound
        local_src, new_keys, _, num_new = _fused_map_device(table, d_src, num_nodes)
        _launch(_copy_kernel, num_new, new_keys, n_id, num_nodes)
        num_nodes += num_new
        hops.append((_out(offsets, as_cupy), _out(local_src, as_cupy), _out(d_eid, as_cupy), num_dst, num_nodes))
        if frontier == "new":
            first = num_dst
    return _assemble(_out(n_id[:num_nodes], as_cupy), batch_size, hops)


def _pad_rows(offsets: Any, first: int) -> Any:
    """Block offsets with ``first`` empty rows in front (the destinations not expanded)."""
    if first == 0:
        return offsets
    if _cupy is not None and not _SIMULATOR:
        o = _cupy.asarray(offsets)
        return cuda.as_cuda_array(_cupy.concatenate([_cupy.zeros(first, dtype=o.dtype), o]))
    host = _to_host(offsets)
    return cuda.to_device(np.concatenate([np.zeros(first, dtype=host.dtype), host]))
