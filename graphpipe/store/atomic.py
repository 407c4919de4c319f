"""Atomic directory commit: build in a temporary sibling, fsync, then rename into place.

An interrupted write leaves the previous store (or nothing) at the destination,
never half a store: the new tree only becomes visible through one rename, and an
existing store is swapped out with ``renameat2(RENAME_EXCHANGE)`` where the
kernel has it, so there is no instant at which the destination is missing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import uuid
from pathlib import Path

from graphpipe.store.errors import StoreError

_TMP_TAG = ".tmp-"
_OLD_TAG = ".old-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


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


def commit_directory(tmp: str | os.PathLike, dest: str | os.PathLike, *, overwrite: bool) -> None:
    """Move the finished tree ``tmp`` to ``dest``.

    ``dest`` must not exist unless ``overwrite``; when it does, it is replaced in
    one atomic exchange (or, lacking renameat2, two renames) and then deleted.
    """
    tmp, dest = Path(tmp), Path(dest)
    fsync_tree(tmp)
    if dest.is_file():
        raise StoreError(f"{dest}: exists and is a file, not a store directory")
    if dest.exists():
        if not overwrite:
            raise StoreError(f"{dest}: already exists (pass --overwrite to replace it)")
        if _exchange(tmp, dest):
            shutil.rmtree(tmp)  # tmp now holds the old store
        else:
            old = dest.parent / f".{dest.name}{_OLD_TAG}{uuid.uuid4().hex[:8]}"
            os.rename(dest, old)
            os.rename(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, dest)
    fd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_destination(dest: str | os.PathLike, *, overwrite: bool) -> None:
    """Refuse early (before any work) a destination that a commit would refuse."""
    dest = Path(dest)
    if dest.is_file():
        raise StoreError(f"{dest}: exists and is a file, not a store directory")
    if dest.exists() and not overwrite:
        raise StoreError(f"{dest}: already exists (pass --overwrite to replace it)")
