"""Which backends exist here, and the one ``backend="auto"`` resolution.

Backends by name: ``"reference"`` (the plain oracle), ``"cpu"`` (Numba), ``"triton"``
(GPU kernels for torch tensors; on the CPU only under ``TRITON_INTERPRET=1``) and
``"cuda"`` (numba.cuda kernels for NumPy/CuPy arrays; also under
``NUMBA_ENABLE_CUDASIM=1``). ``"auto"`` picks the GPU backend of an op when its data
lives on a GPU (a CUDA torch tensor; for the sampler, a CuPy array or a usable
numba.cuda device) and ``"cpu"`` otherwise; it never picks ``"reference"``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

BACKENDS = ("auto", "reference", "cpu", "triton", "cuda")


@functools.cache
def numba_cuda_available() -> bool:
    """True when numba.cuda can run kernels here (a GPU with a driver, or the simulator)."""
    try:
        from numba import cuda
        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA install means "no CUDA"
        return False


@functools.cache
def triton_available() -> bool:
    """True when Triton can be imported."""
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install means "no Triton"
        return False
    return True


def check_backend(backend: str, choices: Sequence[str], *, name: str = "backend") -> str:
    """``backend`` if it is one of ``choices``, else ``ValueError`` naming argument ``name``."""
    if backend not in choices:
        raise ValueError(f"'{name}' must be one of {tuple(choices)} (got {backend!r})")
    return backend


def resolve_backend(backend: str, choices: Sequence[str], device: str, *,
                    gpu: str = "triton") -> str:
    """The concrete backend for ``backend`` among ``choices``, for data on ``device``
    (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...: ``str(tensor.device)``).

    ``"auto"`` -> ``gpu`` when the data is on a GPU, else ``"cpu"``; ``"cpu"`` with data
    on a GPU is an error (the Numba kernels read host memory).
    """
    check_backend(backend, choices)
    on_gpu = not str(device).startswith("cpu")
    if backend == "auto":
        return gpu if on_gpu else "cpu"
    if backend == "cpu" and on_gpu:
        raise ValueError(f"'backend'='cpu' needs CPU tensors (got device {device})")
    return backend
