"""Atomic directory commit: build in a temporary sibling, fsync, then rename into place.

An interrupted write leaves the previous store (or nothing) at the destination,
never half a store: the new tree only becomes visible through one rename, and an
existing store is swapped out with ``renameat2(RENAME_EXCHANGE)`` where the
kernel has it, so there is no instant at which the destination is missing.

What may be replaced: with ``overwrite``, an existing destination is replaced
only when it is a graphpipe store (a directory whose ``manifest.json`` names the
store format; see :func:`is_store_dir`), never a symbolic link, never a plain
directory or file, and never a path that is, or contains, one of the inputs
being read (``sources``, compared after resolving symbolic links). The old store
is deleted only after the new one has been renamed into its place.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

from graphpipe import interrupt
from graphpipe.store.errors import StoreError
from graphpipe.store.manifest import FORMAT_NAME, MANIFEST_FILE

_TMP_TAG = ".tmp-"
_OLD_TAG = ".old-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_MANIFEST_MAX_BYTES = 64 << 20


def temp_sibling(dest: str | os.PathLike) -> Path:
    """A fresh temporary directory next to ``dest`` (same filesystem, so rename is atomic)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}{_TMP_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def remove_stale_temps(dest: str | os.PathLike) -> list[Path]:
    """Delete temporary siblings of ``dest`` left by writers that are no longer running."""
    dest = Path(dest)
    removed = []
    if not dest.parent.is_dir():
        return removed
    for entry in dest.parent.glob(f".{dest.name}{_TMP_TAG}*"):
        pid_text = entry.name.split(_TMP_TAG, 1)[1].split("-", 1)[0]
        if pid_text.isdigit() and _pid_alive(int(pid_text)):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    for entry in dest.parent.glob(f".{dest.name}{_OLD_TAG}*"):
        if dest.exists():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_tree(root: str | os.PathLike) -> None:
    """fsync every file and directory under ``root``."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False when unsupported."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


def commit_directory(tmp: str | os.PathLike, dest: str | os.PathLike, *, overwrite: bool,
                     require_store: bool = True) -> None:
    """Move the finished tree ``tmp`` to ``dest``.

    ``dest`` must not exist unless ``overwrite``; when it does, it must be a store
    (unless ``require_store=False``, for outputs that are not stores) and is
    replaced in one atomic exchange (or, lacking renameat2, two renames, undone if
    the second fails), and only then deleted.
    """
    tmp, dest = Path(tmp), Path(dest)
    interrupt.check()  # a Ctrl-C that something swallowed still publishes nothing
    fsync_tree(tmp)
    check_destination(dest, overwrite=overwrite, require_store=require_store)
    if dest.exists() and not is_empty_dir(dest):
        if _exchange(tmp, dest):
            shutil.rmtree(tmp)  # tmp now holds the old store
        else:
            old = dest.parent / f".{dest.name}{_OLD_TAG}{uuid.uuid4().hex[:8]}"
            os.rename(dest, old)
            try:
                os.rename(tmp, dest)
            except BaseException:
                os.rename(old, dest)
                raise
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, dest)  # replaces an empty directory (rename(2)), or fails if it filled up
    fd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_empty_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory (not a link) with nothing in it.

    >>> import tempfile
    >>> is_empty_dir(tempfile.mkdtemp())
    True
    """
    path = Path(path)
    return path.is_dir() and not path.is_symlink() and next(path.iterdir(), None) is None


def is_store_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory (not a link) holding a graphpipe ``manifest.json``
    (a JSON object whose ``format`` is the store format; any format version)."""
    path = Path(path)
    manifest = path / MANIFEST_FILE
    if path.is_symlink() or not path.is_dir() or manifest.is_symlink() or not manifest.is_file():
        return False
    try:
        if manifest.stat().st_size > _MANIFEST_MAX_BYTES:
            return False
        data = json.loads(manifest.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT_NAME


def _overlaps_source(dest: Path, sources: Iterable[str | os.PathLike | None]) -> str | None:
    """The first source that ``dest`` is, or is a parent of (symbolic links resolved)."""
    real_dest = dest.resolve()
    for source in sources:
        if source is None or str(source) == "":
            continue
        real = Path(source).resolve()
        if real == real_dest or real_dest in real.parents:
            return str(source)
    return None


def check_destination(dest: str | os.PathLike, *, overwrite: bool,
                      sources: Iterable[str | os.PathLike | None] = (),
                      require_store: bool = True) -> None:
    """Refuse early (before any work) a destination that a commit would refuse.

    Refused: a file; a symbolic link; a directory that is, or contains, one of
    ``sources``; an existing store without ``overwrite``; a non-empty directory that is
    not a graphpipe store (unless ``require_store=False``: then without ``overwrite``),
    whatever ``overwrite`` says, with a message saying what to do. An empty directory is
    used as it is.
    """
    dest = Path(dest)
    if dest.is_symlink():
        raise StoreError(f"{dest}: is a symbolic link; give the store's real path")
    if dest.is_file():
        raise StoreError(f"{dest}: exists and is a file, not a store directory")
    if not dest.exists():
        return
    source = _overlaps_source(dest, sources)
    if source is not None:
        raise StoreError(f"{dest}: is, or contains, the input {source}; "
                         f"choose another destination")
    if is_empty_dir(dest):
        return
    if require_store and not is_store_dir(dest):
        raise StoreError(f"{dest}: exists, is not empty and is not a graphpipe store (no valid "
                         f"{MANIFEST_FILE}); remove it yourself or choose another destination "
                         f"(--overwrite replaces only a store)")
    if not overwrite:
        raise StoreError(f"{dest}: already exists (pass --overwrite to replace it)")
