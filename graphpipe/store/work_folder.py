"""The folder of a resumable computation that writes a derived array block by block
(``graphpipe embed``, ``graphpipe derive --mean-features``): ``STORE/.<job>/`` holds
``params.json`` (what a resumed run must share with the one that started it) and one
``.npy`` part per finished block, each saved atomically; the job copies the parts into the
store in one commit at the end and removes the folder.

>>> import tempfile, numpy as np
>>> from pathlib import Path
>>> work = Path(tempfile.mkdtemp()) / ".job"
>>> open_work(work, {"rows": 4}, refuse="other parameters")   # a new folder
False
>>> save_part(work / "part-0.npy", np.zeros(2))
>>> open_work(work, {"rows": 4}, refuse="other parameters")   # resumed: its parts stay
True
>>> open_work(work, {"rows": 5}, refuse=None)                 # other inputs: afresh
False
>>> sorted(p.name for p in work.iterdir())
['params.json']
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["open_work", "save_part"]


def open_work(work: Path, params: dict[str, Any], *, refuse: str | None) -> bool:
    """Create ``work`` with ``params`` (atomically), or reuse it when it was started with
    the same ``params``; returns whether it was reused. A folder started with other
    parameters raises ``ValueError`` naming it followed by ``refuse``, or, with ``refuse``
    None, is removed and started afresh."""
    spec = work / "params.json"
    if work.is_dir():
        if spec.is_file() and json.loads(spec.read_text()) == params:
            return True
        if refuse is not None:
            raise ValueError(f"{work}: {refuse}")
        shutil.rmtree(work)
    tmp = work.with_name(work.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    (tmp / "params.json").write_text(json.dumps(params, indent=1))
    os.replace(tmp, work)
    return False


def save_part(path: Path, rows: np.ndarray) -> None:
    """``np.save(path, rows)`` atomically and durably: a part is whole or absent."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, rows)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
