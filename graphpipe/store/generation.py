"""Which store a reader opened: the store directory pinned by its identity.

``graphpipe ingest --overwrite`` replaces a store by swapping directories
(:mod:`graphpipe.store.atomic`): the new tree takes the old one's path in one
rename, and the old tree is deleted. A reader keeps what it already memory-mapped
(a mapped file stays valid after it is unlinked), but a file it opens *later* by the
same path would come from the new store: mixed data. So :meth:`GraphStore.open
<graphpipe.store.reader.GraphStore.open>` pins the directory (:func:`pin`: its path
plus the device and inode it named then), and every function that opens a store's
files calls :func:`confirm` *after* opening them. The old directory never comes back
to that path, so when the path still names the pinned directory after the open, the
file came from it; otherwise the reader fails with one line
(:class:`StoreReplacedError`), never with the new store's bytes. Cost: one ``stat``
per array or table opened (not per read).
"""

from __future__ import annotations

import os
from pathlib import PosixPath

from graphpipe.store.errors import StoreError


class StoreReplacedError(StoreError):
    """The store directory was replaced (``ingest --overwrite``) after it was opened."""

    exit_code = 1


class PinnedPath(PosixPath):
    """A store directory's path together with the ``(st_dev, st_ino)`` it named when opened.

    Paths made from it (``root / key``) are plain paths; the pin travels with the object
    itself, pickling included (a spawned worker checks the same directory)."""

    identity: tuple[int, int] | None = None

    def __reduce__(self):  # type: ignore[override]
        return _rebuild, (str(self), self.identity)


def _rebuild(path: str, identity: tuple[int, int] | None) -> PinnedPath:
    root = PinnedPath(path)
    root.identity = identity
    return root


def pin(path: str | os.PathLike) -> PinnedPath:
    """``path`` pinned to the directory it names now (unpinned when it names nothing: opening
    it then says what is missing).

    >>> import tempfile
    >>> root = pin(tempfile.mkdtemp())
    >>> confirm(root)           # still the same directory: nothing to say
    """
    root = PinnedPath(os.fspath(path))
    try:
        st = os.stat(root)
    except OSError:
        return root
    root.identity = (st.st_dev, st.st_ino)
    return root


def confirm(root: str | os.PathLike) -> None:
    """Raise :class:`StoreReplacedError` when ``root`` is pinned and its path no longer
    names the pinned directory (a no-op for plain paths). Call it after opening files."""
    identity = getattr(root, "identity", None)
    if identity is None:
        return
    try:
        st = os.stat(root)
        now = (st.st_dev, st.st_ino)
    except OSError:
        now = None
    if now != identity:
        raise StoreReplacedError(f"{root}: the store was replaced (graphpipe ingest --overwrite) "
                                 f"after this process opened it; reopen it to read the new one")
