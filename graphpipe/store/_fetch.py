"""Where a store's files come from when they are not on local disk yet.

A store opened from object storage (:mod:`graphpipe.store.remote`) is a local
chunk-cache directory filled on demand. Its :class:`~graphpipe.store.remote.ChunkCache`
registers here under the directory's path; the functions that read a store's
files (:mod:`graphpipe.store.arrays`, :mod:`graphpipe.store.tables`) call
:func:`ensure_file` / :func:`ensure_array` first. For a local store (nothing
registered) both are one dictionary lookup and do nothing.
"""

from __future__ import annotations

import os
from typing import Protocol


class Fetcher(Protocol):
    def ensure_file(self, key: str) -> None: ...
    def ensure_array(self, key: str) -> None: ...


_FETCHERS: dict[str, Fetcher] = {}


def _root_key(root: str | os.PathLike) -> str:
    return os.path.abspath(os.fspath(root))


def register(root: str | os.PathLike, fetcher: Fetcher) -> None:
    """Files under ``root`` come from ``fetcher`` when missing."""
    _FETCHERS[_root_key(root)] = fetcher


def ensure_file(root: str | os.PathLike, key: str) -> None:
    """Make ``root/key`` present when ``root`` is a cache directory (a no-op otherwise)."""
    if _FETCHERS:
        fetcher = _FETCHERS.get(_root_key(root))
        if fetcher is not None:
            fetcher.ensure_file(key)


def ensure_array(root: str | os.PathLike, key: str) -> None:
    """Make every chunk file of array ``key`` present under ``root`` (a no-op for local stores)."""
    if _FETCHERS:
        fetcher = _FETCHERS.get(_root_key(root))
        if fetcher is not None:
            fetcher.ensure_array(key)
