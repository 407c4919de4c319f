"""Counter-based random numbers shared by every op: SplitMix64 mixing and Lemire bounds.

One copy of the generator that sampling, random walks, dropout and quantization draw
from, so a technique's random numbers are defined in one place:

- ``mix64(z)``: the SplitMix64 finaliser (bijective on uint64).
- ``splitmix64(z) = mix64(z + GOLDEN)``: one SplitMix64 step from state ``z``.
- ``bounded(state, n)``: advance ``state`` by ``GOLDEN`` and draw ``r`` uniform in
  ``[0, n)`` (``0 < n < 2^32``) with Lemire's unbiased multiply-and-reject method.
- ``uniform32(state)``: advance ``state`` and take the high 32 bits.
- ``uniform_f24(seed, counter)``: float32 in ``[0, 1)`` with 24 random bits from
  ``mix64(seed + (counter + 1) * GOLDEN)``.

Each Numba function (uint64 arithmetic wraps) has a plain-Python twin (``*_py``, on
Python ints masked to 64 bits) used by the reference implementations, and
``mix64_np``/``uniform_f24_np`` work on NumPy arrays. The CUDA sampler keeps device
twins of ``mix64``/``bounded`` (a ``cuda.jit`` device function cannot be an ``njit``
one) built from the constants here; its tests check it draws the same numbers.
"""

from __future__ import annotations

import numba
import numpy as np

U64_MASK = (1 << 64) - 1
GOLDEN_I = 0x9E3779B97F4A7C15
M1_I = 0xBF58476D1CE4E5B9
M2_I = 0x94D049BB133111EB

GOLDEN = np.uint64(GOLDEN_I)
M1 = np.uint64(M1_I)
M2 = np.uint64(M2_I)
S27 = np.uint64(27)
S30 = np.uint64(30)
S31 = np.uint64(31)
S32 = np.uint64(32)
S40 = np.uint64(40)
MASK32 = np.uint64(0xFFFFFFFF)
TWO32 = np.uint64(1 << 32)
INV_2_24 = np.float32(1.0 / (1 << 24))


@numba.njit(cache=True, nogil=True, inline="always")
def mix64(z):
    """SplitMix64 finaliser of uint64 ``z``."""
    z = (z ^ (z >> S30)) * M1
    z = (z ^ (z >> S27)) * M2
    return z ^ (z >> S31)


def mix64_py(z: int) -> int:
    """:func:`mix64` on a Python int (taken modulo 2^64)."""
    z &= U64_MASK
    z = ((z ^ (z >> 30)) * M1_I) & U64_MASK
    z = ((z ^ (z >> 27)) * M2_I) & U64_MASK
    return z ^ (z >> 31)


def mix64_np(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` elementwise on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> S30)) * M1
        z = (z ^ (z >> S27)) * M2
        return z ^ (z >> S31)


@numba.njit(cache=True, nogil=True, inline="always")
def splitmix64(z):
    """One SplitMix64 output from state ``z``: ``mix64(z + GOLDEN)``."""
    return mix64(z + GOLDEN)


@numba.njit(cache=True, nogil=True, inline="always")
def bounded(state, n):
    """Advance ``state`` and return ``(state, r)`` with ``r`` uniform in ``[0, n)``, 0 < n < 2^32."""
    un = np.uint64(n)
    while True:
        state = state + GOLDEN
        r = mix64(state)
        m = (r >> S32) * un
        low = m & MASK32
        if low >= un:
            return state, np.int64(m >> S32)
        if low >= (TWO32 - un) % un:
            return state, np.int64(m >> S32)


def bounded_py(state: int, n: int) -> tuple[int, int]:
    """:func:`bounded` on Python ints: ``(new_state, r)``."""
    while True:
        state = (state + GOLDEN_I) & U64_MASK
        r = mix64_py(state)
        m = (r >> 32) * n
        low = m & 0xFFFFFFFF
        if low >= n or low >= ((1 << 32) - n) % n:
            return state, m >> 32


@numba.njit(cache=True, nogil=True, inline="always")
def uniform32(state):
    """Advance ``state``; return ``(state, u)`` with ``u`` the high 32 bits (int64)."""
    state = state + GOLDEN
    return state, np.int64(mix64(state) >> S32)


def uniform32_py(state: int) -> tuple[int, int]:
    """:func:`uniform32` on Python ints."""
    state = (state + GOLDEN_I) & U64_MASK
    return state, mix64_py(state) >> 32


@numba.njit(cache=True, nogil=True, inline="always")
def uniform_f24(seed, counter):
    """float32 in [0, 1) with 24 random bits, from uint64 ``seed`` and ``counter``."""
    z = mix64(seed + (counter + np.uint64(1)) * GOLDEN)
    return np.float32(z >> S40) * INV_2_24


def uniform_f24_np(seed: np.uint64, counter: np.ndarray) -> np.ndarray:
    """:func:`uniform_f24` on a uint64 array of counters."""
    with np.errstate(over="ignore"):
        z = mix64_np(seed + (counter + np.uint64(1)) * GOLDEN)
    return (z >> S40).astype(np.float32) * INV_2_24
