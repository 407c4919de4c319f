"""Reading the binary files a dataset folder brings without ever running code from them.

A downloaded dataset is untrusted input. Python pickles (``torch.save`` files,
``.npz`` members holding object arrays) can run arbitrary code when loaded, so
nothing here calls :mod:`pickle`:

- ``torch.save`` files (OGB's ``split/<name>/split_dict.pt`` and
  ``processed/data_processed``) are read by torch's *weights-only* unpickler, which
  interprets the pickle opcodes itself and resolves a global only if it is on an
  allow-list; ours adds exactly what OGB's files hold: NumPy arrays, dtypes and
  scalars (:data:`NUMPY_GLOBALS`). Whatever loads is then walked: only dicts,
  lists, tuples, ``None``, numbers, strings, tensors and numeric arrays (no object
  dtype) are accepted. torch's unpickler reads pickle protocols up to 3 only
  (OGB writes ``processed/data_processed`` with protocol 4): such a file is
  refused, never handed to :mod:`pickle`.
- ``.npz``/``.npy`` files are read with ``allow_pickle=False`` (:mod:`.npz_stream`): an
  object-array member is refused, never unpickled.

Every refusal is an :class:`IngestError` naming the file.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.ingest.errors import IngestError

_MAX_DEPTH = 16


def _numpy_globals() -> list:
    """NumPy callables and classes a pickled numeric array, dtype or scalar refers to,
    under their NumPy 2 names and under the ``numpy.core`` names NumPy 1 wrote."""
    from numpy._core import multiarray

    found: list = [np.ndarray, np.dtype]
    for name in ("_reconstruct", "scalar"):
        fn = getattr(multiarray, name)
        found += [fn, (fn, f"numpy.core.multiarray.{name}")]
    found += list({type(np.dtype(code)) for code in "?bBhHiIlLqQefdgFD"})
    return found


NUMPY_GLOBALS = _numpy_globals()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


_PROTOCOL_4_OPS = {"148": "MEMOIZE", "149": "FRAME", "140": "SHORT_BINUNICODE", "142": "BINBYTES8",
                   "141": "BINUNICODE8", "147": "STACK_GLOBAL", "146": "NEWOBJ_EX"}


def _torch_reason(exc: BaseException) -> str:
    """The part of a weights-only refusal that says what was refused (not torch's advice to
    load the file with ``weights_only=False``)."""
    text = str(exc)
    kept = [p.strip() for p in text.split("\n\n")
            if p.strip() and not p.lstrip().startswith(("Weights only load failed", "Check the documentation"))]
    reason = " ".join(kept).split("WeightsUnpickler error:")[-1].strip() if kept else text
    operand = reason.removeprefix("Unsupported operand ").strip()
    if operand in _PROTOCOL_4_OPS:
        return f"pickle protocol 4+ opcode {_PROTOCOL_4_OPS[operand]}, which the weights-only loader does not read"
    return _one_line(reason)


def check_plain(value: Any, display: str, where: str = "", depth: int = 0) -> None:
    """Refuse anything but dicts/lists/tuples of numbers, strings, ``None`` and numeric arrays."""
    if depth > _MAX_DEPTH:
        raise IngestError(f"{display}: nested deeper than {_MAX_DEPTH} levels{where and f' at {where}'}")
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.hasobject or value.dtype.kind not in "biufc":
            raise IngestError(f"{display}: {where or 'value'}: dtype {value.dtype} refused "
                              f"(only numeric arrays are read)")
        return
    import torch

    if isinstance(value, torch.Tensor):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise IngestError(f"{display}: {where or 'dict'}: key of type {type(key).__name__} refused")
            check_plain(item, display, f"{where}[{key!r}]", depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_plain(item, display, f"{where}[{i}]", depth + 1)
        return
    raise IngestError(f"{display}: {where or 'value'}: type {type(value).__name__} refused")


def _numpy_allowed(torch: Any) -> Any:
    """The context in which ``weights_only`` loading also accepts NumPy arrays
    (``torch.serialization.safe_globals``, torch >= 2.5); on an older torch (DGL's
    environment: 2.2) none, so such a file holds tensors and plain containers only."""
    safe_globals = getattr(torch.serialization, "safe_globals", None)
    return safe_globals(NUMPY_GLOBALS) if safe_globals is not None else contextlib.nullcontext()


def load_torch_file(path: str | os.PathLike, display: str, *, way_out: str = "") -> Any:
    """The content of a ``torch.save`` file holding only plain containers and numeric
    arrays, read without running any code from it; :class:`IngestError` otherwise.

    ``way_out`` is appended to a refusal (what the user can do instead).
    """
    import torch

    path = Path(path)
    suffix = f"; {way_out}" if way_out else ""
    try:
        with _numpy_allowed(torch), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's "pickle protocol 4" warning: refused below
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - every failure to load is a refusal of this file
        raise IngestError(
            f"{display}: refused: not a torch.save file of plain arrays, and graphpipe never "
            f"unpickles code from a dataset ({_torch_reason(exc)}){suffix}") from None
    check_plain(loaded, display)
    return loaded

