"""The read plan of the disk tier: which byte ranges of which chunk files to read for a
sorted set of rows, and where each row lands in the scratch buffer the reads fill.

Row ``r`` lives in file ``r // chunk_rows`` at byte ``(r % chunk_rows) * row_bytes``.
With O_DIRECT a read must start and end on the file's block (``block``: the device's
logical block size, 512 or 4096; 1 for a buffered file), so each row's range is widened
to whole blocks. Neighbouring rows of one file whose widened ranges overlap or lie at
most ``gap`` bytes apart share one read (never longer than ``max_request`` bytes, unless
one row alone is). A 512-byte row at a 512-aligned offset then costs exactly its own
bytes (read amplification 1.0) instead of a 4 KiB page.

All three kernels are Numba (``nogil``): no Python work per row or per read;
:func:`run_reads` calls libc's ``pread`` itself, so the threads that
run it keep many reads in flight without taking the GIL.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

__all__ = ["plan_reads", "run_reads", "scatter_rows"]

# libc's pread(fd, address, count, offset), bound by symbol name (so the kernel caches);
# the address as an integer: the same ABI as a pointer
_pread = types.ExternalFunction("pread", types.int64(types.int32, types.uintp, types.uintp, types.int64))


@numba.njit(cache=True, nogil=True)
def plan_reads(uniq: np.ndarray, chunk_rows: int, row_bytes: int, blocks: np.ndarray, gap: int,
               max_request: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The reads covering rows ``uniq`` (int64 ``(k,)``, sorted, distinct).

    Args:
        blocks: int64 ``(files,)`` alignment of each file's reads (1: none).
        gap: the most bytes between two rows' ranges that one read still covers.
        max_request: the longest read that merging may make.

    Returns:
        ``(file, offset, length, buf, row_at, total)``: int64 ``(R,)`` file index,
        aligned byte offset, length and offset in the scratch buffer of each read;
        int64 ``(k,)`` scratch offset of each row; the scratch bytes needed.

    >>> import numpy as np
    >>> f, off, n, buf, at, total = plan_reads(np.array([0, 1, 5]), 100, 400, np.array([512]), 0, 1 << 17)
    >>> off.tolist(), n.tolist(), at.tolist(), total
    ([0, 1536], [1024, 1024], [0, 400, 1488], 2048)
    """
    k = uniq.shape[0]
    r_file = np.empty(k, dtype=np.int64)
    r_off = np.empty(k, dtype=np.int64)
    r_len = np.empty(k, dtype=np.int64)
    r_buf = np.empty(k, dtype=np.int64)
    row_at = np.empty(k, dtype=np.int64)
    n = 0
    total = 0
    for i in range(k):
        f = uniq[i] // chunk_rows
        off = (uniq[i] % chunk_rows) * row_bytes
        b = blocks[f]
        lo = off // b * b
        hi = (off + row_bytes + b - 1) // b * b
        if n > 0 and r_file[n - 1] == f:
            end = r_off[n - 1] + r_len[n - 1]
            if lo <= end + gap and hi - r_off[n - 1] <= max_request:
                if hi > end:
                    total += hi - end
                    r_len[n - 1] = hi - r_off[n - 1]
                row_at[i] = r_buf[n - 1] + off - r_off[n - 1]
                continue
        r_file[n] = f
        r_off[n] = lo
        r_len[n] = hi - lo
        r_buf[n] = total
        row_at[i] = total + off - lo
        total += hi - lo
        n += 1
    return r_file[:n], r_off[:n], r_len[:n], r_buf[:n], row_at, total


@numba.njit(cache=True, nogil=True)
def scatter_rows(scratch: np.ndarray, row_at: np.ndarray, inverse: np.ndarray, out: np.ndarray) -> None:
    """``out[i] = scratch[row_at[inverse[i]] : + row_bytes]`` for every ``i``.

    Args:
        scratch: uint8 ``(S,)`` the bytes the reads filled.
        row_at: int64 ``(k,)`` scratch offset of each distinct row.
        inverse: int64 ``(m,)`` distinct-row index of each requested row.
        out: uint8 ``(m, row_bytes)`` the requested rows' bytes.
    """
    width = out.shape[1]
    for i in range(inverse.shape[0]):
        start = row_at[inverse[i]]
        for j in range(width):
            out[i, j] = scratch[start + j]


@numba.njit(cache=True, nogil=True)
def run_reads(fds: np.ndarray, r_file: np.ndarray, r_off: np.ndarray, r_len: np.ndarray,
              r_buf: np.ndarray, sizes: np.ndarray, scratch: np.ndarray, lo: int, hi: int) -> int:
    """Reads ``lo .. hi-1`` of a plan into ``scratch`` with ``pread`` (short reads
    continued; a read may stop at the end of its file, ``sizes[file]``).

    Returns:
        -1 when every read got its bytes, else the index of the first read that failed
        (an error, or the file ended early); the caller reports it.
    """
    base = scratch.ctypes.data
    for r in range(lo, hi):
        f = r_file[r]
        need = min(r_len[r], sizes[f] - r_off[r])
        done = 0
        while done < need:
            got = _pread(fds[f], base + r_buf[r] + done, r_len[r] - done, r_off[r] + done)
            if got <= 0:
                return r
            done += got
    return -1
